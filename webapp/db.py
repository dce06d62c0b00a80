"""The bottom of the house: the database clock, the dialect test, wake-ups and fenced SQL.

Everything that differs between PostgreSQL and the embedded SQLite file is
decided here, once; the rest of the app asks these functions instead of
looking at the dialect itself.
"""

import os
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, make_url

from .extensions import db

MAX_INSTANCE = 40  # characters of the instance name kept in an application_name (63 at most)
WAKE_CHANNEL = "soloist_wake"  # payload: the name of the key whose leader should look now
HANDOVER_CHANNEL = "soloist_handover"  # payload: a key that was just released
WEB_ROLES = ("web", "site")  # connections to DATABASE_URL: the pool, the 304s' own (revalidation)


def identity(instance: str, pid: int | None = None, role: str = "") -> str:
    """Return the application_name of one of this process's connections.

    The lock session is soloist:<instance>:<pid>; the process's other connections are
    soloist-<role>:<instance>:<pid>, so evicting a process can find all of them.
    """
    pid = os.getpid() if pid is None else pid
    prefix = f"soloist-{role}" if role else "soloist"
    return f"{prefix}:{instance[:MAX_INSTANCE]}:{pid}"


def server_options(config: Mapping) -> str:
    """Return libpq options that make the server end long statements and idle transactions."""
    statement = int(config["DB_STATEMENT_TIMEOUT_SECONDS"] * 1000)
    idle = int(config["DB_IDLE_IN_TRANSACTION_SECONDS"] * 1000)
    return f"-c statement_timeout={statement} -c idle_in_transaction_session_timeout={idle}"


def pg_connect_args(config: Mapping, role: str) -> dict:
    """Return the psycopg connect arguments of one of this process's engines.

    A transaction-mode pooler refuses startup options (and would hand the settings to
    other clients), so the web pool behind one leaves the timeouts to the pooler. Nor may
    a connection behind it prepare statements (psycopg does after 5 runs of one): the next
    transaction may reach a server connection another client prepared "_pg3_0" on.
    """
    args = {"application_name": identity(config["INSTANCE_NAME"], role=role),
            "connect_timeout": 5}
    if role in WEB_ROLES and config.get("DB_WEB_VIA_POOLER"):
        args["prepare_threshold"] = None
    else:
        args["options"] = server_options(config)
    return args


def is_sqlite_url(url: str) -> bool:
    """Return whether a database URL names the embedded SQLite file."""
    return url.startswith("sqlite")


def is_sqlite_dialect(dialect: sa.Dialect) -> bool:
    """Return whether a SQLAlchemy dialect is SQLite's."""
    return dialect.name == "sqlite"


def is_postgres() -> bool:
    """Return whether the app's database (the session's bind) is PostgreSQL."""
    return not is_sqlite_dialect(db.session.get_bind().dialect)


def database_now() -> datetime:
    """Return the database clock (the app's clock on SQLite, which is the same host).

    On PostgreSQL this ends the read transaction it opens.
    """
    if is_postgres():
        value = db.session.scalar(sa.text("SELECT now()"))
        db.session.rollback()
        return value
    return datetime.now(UTC)


def ping() -> str | None:
    """Run a trivial statement; return None when the database answers, else what went wrong."""
    try:
        db.session.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as exc:
        return f"database unreachable: {type(exc).__name__}"
    finally:
        db.session.rollback()
    return None


def clock(start_at: datetime) -> Callable[[], datetime]:
    """Return a clock that continues start_at (a database time) in real time."""
    origin = time.monotonic()
    return lambda: start_at + timedelta(seconds=time.monotonic() - origin)


def wake_scheduler(name: str) -> None:
    """NOTIFY the leader of key name when the current transaction commits (PostgreSQL only).

    SQLite mode has no NOTIFY; its leaders look again every half second.
    """
    if is_postgres():
        db.session.execute(sa.text("SELECT pg_notify(:channel, :name)"),
                           {"channel": WAKE_CHANNEL, "name": name})


def insert_ignoring_conflicts(model: type, keys: list[str]) -> sa.Insert:
    """Return INSERT … ON CONFLICT (keys) DO NOTHING: the row is written at most once."""
    insert = postgresql.insert if is_postgres() else sqlite.insert
    return insert(model).on_conflict_do_nothing(index_elements=keys)


def for_update_skip_locked(query: sa.Select) -> sa.Select:
    """Lock the selected rows on PostgreSQL, skipping rows another leader holds.

    SQLite has one writer at a time, so there is nothing to skip.
    """
    return query.with_for_update(skip_locked=True) if is_postgres() else query


def sqlite_path(url: str) -> Path:
    """Return the database file of a sqlite: URL."""
    database = make_url(url).database
    if not database or database == ":memory:":
        raise ValueError("Soloist's SQLite mode needs a database file, not an in-memory database")
    return Path(database)


def enable_sqlite_pragmas(engine: Engine) -> None:
    """Use WAL, a busy timeout and real transactions so workers share one file safely.

    pysqlite opens a transaction only before a statement that starts with INSERT,
    UPDATE, DELETE or REPLACE: a `WITH … UPDATE` committed on its own, and a
    failure after it left half a write. So the driver's own BEGIN is switched off
    (SQLAlchemy's pysqlite recipe) and we emit BEGIN IMMEDIATE before the first
    statement of a transaction that writes or locks; COMMIT and ROLLBACK stay the
    driver's. Plain reads before it run on their own, as before: a page view never
    takes the one write lock, and a transaction never has to upgrade a read
    snapshot to a write, which SQLite refuses at once ("database is locked", no
    busy wait) once another worker has written. A writer instead waits its turn
    for the lock, up to the busy timeout.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: object, _record: object) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=15000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
        dbapi_connection.isolation_level = None  # we say when a transaction begins

    @event.listens_for(engine, "before_cursor_execute")
    def _begin_before_writing(conn: sa.Connection, cursor: object, statement: str,
                              _parameters: object, context: object, _many: bool) -> None:
        dbapi_connection = cursor.connection
        if dbapi_connection.in_transaction or not _writes_or_locks(statement, context):
            return
        if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            dbapi_connection.execute("BEGIN IMMEDIATE")


_PLAIN_READ = re.compile(r"[\s(]*(SELECT|PRAGMA|EXPLAIN)\b", re.IGNORECASE)


def _writes_or_locks(statement: str, context: object) -> bool:
    """Return whether a statement must run inside a write transaction on SQLite.

    A SELECT … FOR UPDATE counts: SQLite has no row locks, its one lock is the write lock.
    """
    if context.isinsert or context.isupdate or context.isdelete:
        return True  # WITH … UPDATE included
    query = getattr(context.compiled, "statement", None)
    if isinstance(query, sa.sql.selectable.GenerativeSelect):
        return query._for_update_arg is not None
    return not _PLAIN_READ.match(statement)  # DDL, SAVEPOINT, raw SQL other than a read


def read_without_transaction() -> None:
    """Run the rest of this request's statements on a connection in autocommit.

    For a page that only reads, in one statement or in statements that need not agree
    (webapp.views.site): no BEGIN and ROLLBACK around them, two round trips fewer. Does
    nothing once the session has begun (a signed-in reader's user was loaded): those
    statements stay in its transaction.
    """
    if db.session().get_transaction() is None:
        db.session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})


def autocommit_connection() -> sa.Connection:
    """Return a pooled connection in autocommit, outside the session (close it when done).

    For a read that must cost as little as it can (a 304 before Flask runs): no session,
    no BEGIN and ROLLBACK.
    """
    return db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
