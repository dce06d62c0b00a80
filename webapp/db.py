"""The bottom of the house: the database clock, the dialect test, wake-ups and fenced SQL.

Everything that differs between PostgreSQL and the embedded SQLite file is
decided here, once; the rest of the app asks these functions instead of
looking at the dialect itself.
"""

import hashlib
import os
import re
import secrets
import sqlite3
import string
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import psycopg
import psycopg.conninfo
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.pool import ConnectionPoolEntry

from .extensions import db

_DIALECT = PGDialect_psycopg()

MAX_INSTANCE = 24  # characters of the instance name in an application_name (63 in all)
BOOT_LETTERS = 8  # a process's boot id: 26**8 names, never renewed
NONCE_LETTERS = 6  # a lock session's nonce: renewed whenever the session comes back
WAKE_CHANNEL = "soloist_wake"  # payload: the name of the key whose leader should look now
HANDOVER_CHANNEL = "soloist_handover"  # payload: a key that was just released
POOLED_ROLES = ("web", "site", "plugin")  # through DATABASE_CONNECTION_POOL_URL when it is set


def short_instance(instance: str) -> str:
    """Return the instance name as application_names carry it: readable, unique, ASCII.

    A name that fits is kept. A longer one (a Kubernetes pod's, past 40 characters, whose
    pods differ only at the end) keeps its head and its tail around a short hash of the
    whole, never a cut that makes two pods one name. Characters PostgreSQL would not keep
    (non-ASCII) or that separate the parts (:) become _.
    """
    safe = "".join(c if " " <= c <= "~" and c != ":" else "_" for c in instance)
    if safe == instance and len(safe) <= MAX_INSTANCE:
        return safe
    digest = hashlib.sha256(instance.encode()).hexdigest()[:4]
    if len(safe) <= MAX_INSTANCE - 5:
        return f"{safe}~{digest}"
    return f"{safe[:10]}~{safe[-8:]}~{digest}"


def identity(instance: str, pid: int | None = None, role: str = "",
             nonce: str | None = None, boot: str | None = None) -> str:
    """Return the application_name of one of this process's connections.

    The lock session is soloist:<instance>:<pid>:<boot>:<nonce>; the process's other
    connections are soloist-<role>:<instance>:<pid>:<boot>:<nonce>. The boot id is random,
    taken when the process starts and never renewed: it, not (instance, pid), tells one
    process from another (every container's gunicorn master is pid 1, its workers 7, 8 …,
    and a platform's instance name survives a restart). The nonce is random too, taken
    anew whenever the process's lock session comes back after it was lost, so an eviction
    aimed at a stale session ends exactly that session's connections, wherever they come
    from (a pooler, a unix socket), and none the healthy process opened since.
    """
    pid = os.getpid() if pid is None else pid
    prefix = f"soloist-{role}" if role else "soloist"
    boot = boot_id() if boot is None else boot
    nonce = current_nonce() if nonce is None else nonce
    return f"{prefix}:{short_instance(instance)}:{pid}:{boot}:{nonce}"


@dataclass(frozen=True)
class Identity:
    """One connection's application_name, read back: whose process and which session."""

    role: str  # "lock" for the lock session, else the connection's role ("web", "sched" …)
    instance: str
    pid: int
    boot: str  # "" for a name written before boot ids (then the process is unknown)
    nonce: str


def parse_identity_parts(application_name: str) -> Identity | None:
    """Read soloist[-role]:<instance>:<pid>[:<boot>][:<nonce>] back; None if not soloist's.

    The boot id and the nonce are lowercase letters, so a last part of digits is the pid
    of an older name without them.
    """
    prefix, _, rest = application_name.partition(":")
    if prefix == "soloist":
        role = "lock"
    elif prefix.startswith("soloist-") and prefix[8:].isalpha():
        role = prefix[8:]
    else:
        return None
    parts = rest.split(":")
    letters: list[str] = []
    while parts and len(letters) < 2 and _letters(parts[-1]):
        letters.insert(0, parts.pop())
    if len(parts) < 2 or not (parts[-1].isascii() and parts[-1].isdigit()):
        return None
    boot, nonce = (letters[0], letters[1]) if len(letters) == 2 else ("", "".join(letters))
    return Identity(role, ":".join(parts[:-1]), int(parts[-1]), boot, nonce)


def _letters(part: str) -> bool:
    return part.isascii() and part.isalpha() and part.islower()


def parse_identity_role(application_name: str) -> tuple[str, str] | None:
    """Return (role, instance) of a soloist[-role]:<instance>:<pid>[:<boot>:<nonce>] name:
    role "lock" for the lock session; None for a connection that is not soloist's."""
    found = parse_identity_parts(application_name)
    return None if found is None else (found.role, found.instance)


def _random_letters(count: int) -> str:
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(count))


_boot: tuple[int, str] = (0, "")
_nonce: tuple[int, str] = (0, "")


def boot_id() -> str:
    """Return this process's boot id, taken at its start (a forked child takes its own)."""
    global _boot
    if _boot[0] != os.getpid():
        _boot = (os.getpid(), _random_letters(BOOT_LETTERS))
    return _boot[1]


def current_nonce() -> str:
    """Return this process's connection nonce (a forked child takes its own)."""
    if _nonce[0] != os.getpid():
        renew_nonce()
    return _nonce[1]


def renew_nonce() -> str:
    """Take a new nonce: connections opened from now on answer to it, not the old one.

    Lowercase letters only, so it never reads as a pid.
    """
    global _nonce
    _nonce = (os.getpid(), _random_letters(NONCE_LETTERS))
    return _nonce[1]


def _forked() -> None:
    """Forget the parent's boot id and nonce in a forked child (pids may repeat elsewhere,
    but never between a parent and its child)."""
    global _boot, _nonce
    _boot, _nonce = (0, ""), (0, "")


os.register_at_fork(after_in_child=_forked)


def keepalive_seconds(config: Mapping) -> dict[str, int]:
    """Return TCP keepalive timing that notices a vanished peer in half the stale bound.

    A host cut off without a RST otherwise waits in a socket read until TCP gives up
    (about 15 minutes on Linux), and the server keeps its idle sessions for two hours.
    """
    stale = config["LEADER_STALE_SECONDS"]
    return {"idle": max(1, int(stale / 5)), "interval": max(1, int(stale / 10)), "count": 3,
            "user_timeout_ms": max(1000, int(stale * 500))}


def client_keepalives(config: Mapping) -> dict:
    """Return the libpq arguments that bound every client socket wait (and connecting)."""
    k = keepalive_seconds(config)
    return {"keepalives": 1, "keepalives_idle": k["idle"],
            "keepalives_interval": k["interval"], "keepalives_count": k["count"],
            "tcp_user_timeout": k["user_timeout_ms"],
            # per host of a multi-host URL; at least 3 s: a busy server forks slowly
            "connect_timeout": max(3, int(config["LEADER_STALE_SECONDS"] / 3))}


def server_options(config: Mapping) -> str:
    """Return libpq options for the server's side of a direct session.

    It ends long statements and idle transactions, and it notices a client that vanished
    without a word (keepalives, unacknowledged data, a dead socket during a query) within
    the same bound as the client does. Every statement, and every transaction left open,
    ends within half the stale bound, well before a standby would evict its process: a
    frozen host cannot keep row locks its successor needs.
    """
    k = keepalive_seconds(config)
    bound_ms = int(config["LEADER_STALE_SECONDS"] * 500)
    settings = {
        "statement_timeout": bound_ms,
        "idle_in_transaction_session_timeout": bound_ms,
        "tcp_keepalives_idle": k["idle"],
        "tcp_keepalives_interval": k["interval"],
        "tcp_keepalives_count": k["count"],
        "tcp_user_timeout": k["user_timeout_ms"],
        "client_connection_check_interval": k["interval"] * 1000,
    }
    return " ".join(f"-c {name}={value}" for name, value in settings.items())


def pg_connect_args(config: Mapping, role: str) -> dict:
    """Return the psycopg connect arguments of one of this process's connections.

    Every connection gets client keepalives and a TCP user timeout. A transaction-mode
    pooler refuses startup options (and would hand the settings to other clients), so a
    connection behind one (the web pool and the 304s' reader with
    DATABASE_CONNECTION_POOL_URL) leaves the server's side to the pooler. Nor may it
    prepare statements (psycopg does after 5 runs of one): the next transaction may reach
    a server connection another client prepared "_pg3_0" on.
    """
    args = {"application_name": identity(config["INSTANCE_NAME"], role=role),
            **client_keepalives(config)}
    if role in POOLED_ROLES and config["DB_WEB_VIA_POOLER"]:
        args["prepare_threshold"] = None
    else:
        args["options"] = server_options(config)
    return args


def conninfo(url: str) -> str:
    """Return the libpq connection string of a SQLAlchemy URL, every host of it kept.

    Built the way SQLAlchemy's psycopg dialect builds its own connect arguments, so the
    lock session and the 304s' reader reach the same servers as the engines
    (?host=h1:5432&host=h2:5432, target_session_attrs and the rest).
    """
    _args, kwargs = _DIALECT.create_connect_args(make_url(url))
    return psycopg.conninfo.make_conninfo(**kwargs)


def read_only_server(connection: psycopg.Connection) -> bool:
    """Return whether a connection landed on a standby or a read-only server.

    Both are reported by the server at start-up and on change (PostgreSQL 14+): no round
    trip. A former primary back as a replica is one.
    """
    info = connection.info
    return "on" in (info.parameter_status("in_hot_standby"),
                    info.parameter_status("default_transaction_read_only"))


# SQLSTATEs that say the server is away or cannot take us now, not that a statement is wrong:
# connection exceptions, shutting down or starting, too many clients, a read-only standby
_AWAY_STATES = ("08", "57P01", "57P02", "57P03", "53300", "25006")
_BUSY_SQLITE = ("SQLITE_BUSY", "SQLITE_LOCKED")


def unreachable(error: BaseException) -> bool:
    """Return whether a database error means "not reachable now" (a 503 to retry).

    The pool timing out or a connection found dead counts, and so does a driver error
    with no SQLSTATE (it never reached a server) or a state naming the connection, a
    shutdown, a full server or a standby. A bad statement, a timeout, a deadlock or a
    missing table is a programming or load error: the caller lets it be a 500, logged.
    """
    if isinstance(error, (sa.exc.TimeoutError, sa.exc.DisconnectionError)):
        return True
    if not isinstance(error, sa.exc.DBAPIError):
        return False
    if error.connection_invalidated:
        return True
    orig = error.orig
    if isinstance(orig, psycopg.Error):
        state = orig.sqlstate
        return state is None or state.startswith(_AWAY_STATES)
    return getattr(orig, "sqlite_errorname", "") in _BUSY_SQLITE


def watch_connections(engine: Engine, instance: str, role: str) -> None:
    """Name each new connection of engine with the current nonce; refuse read-only servers.

    A checkout of a connection made under an older nonce makes a new one instead. A
    checkout that finds its connection on a standby or a read-only server (the old
    primary back as a replica) drops it, and the pool connects again: with a multi-host
    URL and target_session_attrs=read-write, to the primary.
    """

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: sa.Dialect, record: ConnectionPoolEntry, cargs: list,
                 cparams: dict) -> psycopg.Connection:
        record.info["nonce"] = current_nonce()
        cparams["application_name"] = identity(instance, role=role, nonce=record.info["nonce"])
        connection = cast(psycopg.Connection, dialect.connect(*cargs, **cparams))
        if read_only_server(connection):  # an error the request answers 503 for
            connection.close()
            raise psycopg.OperationalError("the server is read-only (a standby): no primary "
                                           "among the database URL's hosts")
        return connection

    @event.listens_for(engine, "checkout")
    def _refuse_read_only(dbapi_connection: psycopg.Connection, record: ConnectionPoolEntry,
                          _proxy: object) -> None:
        if read_only_server(dbapi_connection):  # it became one: connect again
            raise sa.exc.DisconnectionError("the server is read-only (a standby)")
        if record.info.get("nonce", current_nonce()) != current_nonce():
            # made before the lock session came back under a new nonce: an eviction aimed
            # at this process's new session must find every connection it uses
            raise sa.exc.DisconnectionError("made under the process's previous nonce")


def engine_options(config: Mapping, url: str, role: str, pool_size: int,
                   max_overflow: int = 0, wait_cap: float = 10.0) -> dict:
    """Return the options of one of this process's engines: the web pool's, the ticks' or
    plugin work's (role names its connections, pool_size and max_overflow size it).

    A logged database error never carries its statement's values (webhook secrets, hashes).
    A checkout waits no longer than half the stale bound, and at most wait_cap: past it, a
    request answers 503 and a tick tries again.
    """
    if is_sqlite_url(url):
        return {"hide_parameters": True, "connect_args": {"timeout": 15}}
    wait = max(1.0, config["LEADER_STALE_SECONDS"] / 2)
    return {"hide_parameters": True, "pool_size": pool_size, "max_overflow": max_overflow,
            "pool_pre_ping": True, "pool_timeout": min(wait_cap, wait),
            "connect_args": pg_connect_args(config, role)}


def set_up_engine(engine: Engine, instance: str, role: str) -> None:
    """Give a new engine SQLite's pragmas, or PostgreSQL's named connections that refuse a
    read-only server."""
    if is_sqlite_dialect(engine.dialect):
        enable_sqlite_pragmas(engine)
    else:
        watch_connections(engine, instance, role)


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


def insert_ignoring_conflicts(model: type, keys: list[str] | None) -> sa.Insert:
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
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=15000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
        dbapi_connection.isolation_level = None  # we say when a transaction begins

    @event.listens_for(engine, "before_cursor_execute")
    def _begin_before_writing(conn: sa.Connection, cursor: sqlite3.Cursor, statement: str,
                              _parameters: object, context: DefaultExecutionContext,
                              _many: bool) -> None:
        dbapi_connection = cursor.connection
        if dbapi_connection.in_transaction or not _writes_or_locks(statement, context):
            return
        if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            dbapi_connection.execute("BEGIN IMMEDIATE")


_PLAIN_READ = re.compile(r"[\s(]*(SELECT|PRAGMA|EXPLAIN)\b", re.IGNORECASE)


def _writes_or_locks(statement: str, context: DefaultExecutionContext) -> bool:
    """Return whether a statement must run inside a write transaction on SQLite.

    A SELECT … FOR UPDATE counts: SQLite has no row locks, its one lock is the write lock.
    """
    if context.isinsert or context.isupdate or context.isdelete:
        return True  # WITH … UPDATE included
    query = getattr(context.compiled, "statement", None)
    if isinstance(query, sa.sql.selectable.GenerativeSelect):
        return query._for_update_arg is not None
    return not _PLAIN_READ.match(statement)  # DDL, SAVEPOINT, raw SQL other than a read


def rows_changed(statement: sa.Executable) -> int:
    """Run an UPDATE or DELETE in the session; return how many rows it changed."""
    return cast(sa.CursorResult[Any], db.session.execute(statement)).rowcount


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
