"""How migrations/env.py runs migrations: one transaction each, a short lock_timeout, retries.

A statement that waits longer than the lock timeout for its lock is cancelled, the
migration's transaction rolls back (a migration is all or nothing, and the ones before it
stay committed), and it is tried again after a back-off that doubles up to MAX_PAUSE: the
release waits for a gap in the fleet's work, the fleet never waits long behind the release.
A deadlock with the fleet ends the same way, well before the server's deadlock_timeout.
"""

import itertools
import logging
import random
from collections.abc import Callable

import psycopg
import sqlalchemy as sa
from flask import Flask

from ...db import is_sqlite_dialect, pg_connect_args, watch_connections
from ...extensions import db
from .limits import Limits, ReleaseError
from .plan import locks_of

log = logging.getLogger("soloist.release")

FIRST_PAUSE = 0.2  # seconds before the second try; doubled each time, up to MAX_PAUSE
MAX_PAUSE = 5.0
GAVE_WAY = (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected)


def engine_for(app: Flask) -> sa.Engine:
    """Return the engine migrations run on: the app's, or, where the web pool goes through a
    pooler (DATABASE_CONNECTION_POOL_URL), one of their own on the direct URL.

    A transaction-mode pooler would hand the release's session settings (its lock_timeout)
    to other clients' transactions, and drop them between its own.
    """
    if not app.config["DB_WEB_VIA_POOLER"]:
        return db.engine
    engine = sa.create_engine(app.config["LOCK_DATABASE_URL"], poolclass=sa.pool.NullPool,
                              hide_parameters=True,
                              connect_args=pg_connect_args(app.config, "release"))
    watch_connections(engine, app.config["INSTANCE_NAME"], "release")
    return engine


def pause(attempt: int, rand: Callable[[], float] = random.random) -> float:
    """Return the back-off after the attempt-th try gave way: doubling, jittered."""
    return min(MAX_PAUSE, FIRST_PAUSE * 2 ** (attempt - 1)) * (0.5 + rand() / 2)


def gave_way(exc: BaseException) -> bool:
    """Return whether exc is a lock wait cut short (lock_timeout, or a deadlock's victim)."""
    return isinstance(getattr(exc, "orig", exc), GAVE_WAY)


def run(context, limits: Limits, sleep: Callable[[float], None], recorder=None) -> None:
    """Run the pending migrations of an Alembic environment context, trying again those that
    gave way (PostgreSQL); sleep waits (env.py gives the time module's; only the scheduler
    and migrations/env.py sleep)."""
    connection = context.get_context().connection
    postgres = not is_sqlite_dialect(connection.dialect)
    if postgres:
        for statement in limits.session_sql():
            connection.exec_driver_sql(statement)
        connection.commit()
    try:
        for attempt in itertools.count(1):
            try:
                with context.begin_transaction():
                    context.run_migrations()
                return
            except sa.exc.DBAPIError as exc:
                if not (postgres and gave_way(exc)):
                    raise
                if attempt > limits.retries:
                    raise ReleaseError(gave_up(connection, exc, attempt, limits)) from exc
                wait = pause(attempt)
                if recorder is not None:
                    recorder.gave_way(wait)
                log.warning("a migration gave way (%s); trying again in %.1f s",
                            str(exc.orig).strip().splitlines()[0], wait)
                sleep(wait)
    finally:
        if postgres:
            reset(connection)


BLOCKERS_SQL = """
SELECT DISTINCT a.application_name, a.state,
       extract(epoch FROM clock_timestamp() - coalesce(a.xact_start, a.query_start))::float8
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.granted AND l.pid <> pg_backend_pid() AND l.locktype = 'relation'
  AND l.relation = ANY(SELECT to_regclass(t) FROM unnest(CAST(%(tables)s AS text[])) t)
"""


def gave_up(connection: sa.Connection, exc: sa.exc.DBAPIError, tries: int,
            limits: Limits) -> str:
    """Say which statement never found a gap, and who holds the locks it waited for."""
    statement = " ".join((exc.statement or "").split())
    tables = sorted(locks_of(exc.statement or ""))
    connection.rollback()
    holders = connection.exec_driver_sql(BLOCKERS_SQL, {"tables": tables}).all()
    connection.rollback()
    held = "; ".join(f"{name or '(no name)'} ({state}, for {age:.0f} s)"
                     for name, state, age in holders) or "nobody now"
    return (f"the release gave up after {tries} tries: a statement waited more than "
            f"{limits.lock_timeout:g} s for its lock every time "
            f"(MIGRATION_LOCK_TIMEOUT_SECONDS, MIGRATION_LOCK_RETRIES): {statement[:300]}. "
            f"Sessions holding locks on {', '.join(tables) or 'its tables'}: {held}. "
            "Nothing of that migration was kept; end the long transaction and release again.")


def reset(connection: sa.Connection) -> None:
    """Give the connection back with the pool's settings (the release records its deploy
    on the same pool afterwards); a connection that broke needs nothing."""
    try:
        connection.rollback()
        connection.exec_driver_sql("RESET ALL")
        connection.commit()
    except sa.exc.DBAPIError:
        pass
