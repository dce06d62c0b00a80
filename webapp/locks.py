"""The advisory-lock primitive: one dedicated lock session per process.

Session-level advisory locks belong to the server backend that took them, so
the lock is taken and released on one autocommit psycopg connection that lives
outside the SQLAlchemy pool (a pooled connection keeps its locks when it goes
back to the pool, and an unlock on another pooled connection silently fails).
"""

import contextlib
import logging
import os
import select
import threading
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from sqlalchemy.engine import make_url

log = logging.getLogger("soloist.locks")


class _Token:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


PG_TOKEN = _Token("PG_TOKEN")
SQLITE_TOKEN = _Token("SQLITE_TOKEN")

WAKE_CHANNEL = "soloist_wake"
HANDOVER_CHANNEL = "soloist_handover"

# The bigint key of an advisory lock taken with pg_advisory_lock(bigint).
KEY_SQL = "((l.classid::bigint << 32) | l.objid::bigint)"
ADVISORY = (
    "l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


class LockUnavailable(Exception):
    """The lock session cannot take locks (no connection, or an unsafe one)."""


class TransactionPoolerError(LockUnavailable):
    """The lock connection goes through a transaction-mode pooler such as PgBouncer."""


@dataclass
class PollRow:
    """What one poll learned about one key."""

    key: int
    acquired: bool
    heartbeat_age: float | None
    term: int = 0


def identity(instance: str, pid: int | None = None) -> str:
    """Return this process's application_name: soloist:<instance>:<pid>."""
    pid = os.getpid() if pid is None else pid
    suffix = f":{pid}"
    return f"soloist:{instance}"[: 63 - len(suffix)] + suffix


def libpq_conninfo(url: str) -> str:
    """Turn a SQLAlchemy URL into a libpq connection URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
    "connect_timeout": 5,
}

POLL_SQL = """
SELECT k.key, pg_try_advisory_lock(k.key),
       extract(epoch FROM now() - s.heartbeat_at)::float8, coalesce(s.term, 0)
FROM unnest(%s::bigint[]) AS k(key) LEFT JOIN leader_state s ON s.key = k.key
"""

HEARTBEAT_SQL = f"""
UPDATE leader_state s SET heartbeat_at = now()
WHERE s.key = ANY(%s) AND s.holder_pid = pg_backend_pid()
  AND EXISTS (SELECT 1 FROM pg_locks l
              WHERE l.pid = pg_backend_pid() AND {ADVISORY} AND {KEY_SQL} = s.key)
RETURNING s.key, s.step_down_requested, now()
"""

ACQUIRED_SQL = """
WITH s AS (
  INSERT INTO leader_state AS st (key, term, holder, holder_pid, acquired_at, heartbeat_at,
                                  last_result, step_down_requested)
  VALUES (%(key)s, 1, %(holder)s, pg_backend_pid(), now(), now(), '', false)
  ON CONFLICT (key) DO UPDATE SET term = st.term + 1, holder = excluded.holder,
    holder_pid = excluded.holder_pid, acquired_at = now(), heartbeat_at = now(),
    step_down_requested = false
  RETURNING term)
INSERT INTO leader_events (key, kind, term, holder, detail, at)
SELECT %(key)s, 'acquired', term, %(holder)s, %(detail)s, now() FROM s RETURNING term
"""

EVENT_SQL = """
INSERT INTO leader_events (key, kind, term, holder, detail, at)
VALUES (%(key)s, %(kind)s,
        coalesce(%(term)s, (SELECT term FROM leader_state WHERE key = %(key)s), 0),
        %(holder)s, %(detail)s, coalesce(%(at)s, now()))
"""

RELEASED_SQL = """
WITH st AS (UPDATE leader_state SET holder_pid = NULL, heartbeat_at = NULL
            WHERE key = %(key)s AND holder_pid = pg_backend_pid() RETURNING term),
     ev AS (INSERT INTO leader_events (key, kind, term, holder, detail, at)
            VALUES (%(key)s, 'released', %(term)s, %(holder)s, %(detail)s, now()))
SELECT pg_notify('soloist_handover', %(key)s::text)
"""

def evict_sql(victim: str, notify: bool = False) -> str:
    """Return the statement that ends the lock session holding %(key)s, chosen by victim.

    In the same statement it records an "evicted" event for each of %(ours)s the session
    held (parameter %(detail)s), and with notify wakes the standbys. It returns the
    session's application_name and every key it held; no row if victim matched nobody.
    """
    wake = ", pg_notify('soloist_handover', %(key)s::text)" if notify else ""
    return f"""
WITH victim AS MATERIALIZED (
  SELECT a.pid, a.application_name,
         (SELECT array_agg({KEY_SQL.replace("l.", "h.")}) FROM pg_locks h
          WHERE h.pid = a.pid AND {ADVISORY.replace("l.", "h.")}) AS keys
  FROM pg_locks l
  JOIN pg_stat_activity a ON a.pid = l.pid
  LEFT JOIN leader_state s ON s.key = {KEY_SQL}
  WHERE {ADVISORY} AND {KEY_SQL} = %(key)s AND a.pid <> pg_backend_pid() AND {victim}
), events AS (
  INSERT INTO leader_events (key, kind, term, holder, detail, at)
  SELECT k, 'evicted', coalesce((SELECT term FROM leader_state WHERE key = k), 0),
         v.application_name, %(detail)s, now()
  FROM victim v, unnest(v.keys) AS k WHERE k = ANY(%(ours)s)
)
SELECT v.application_name, v.keys, pg_terminate_backend(v.pid, 2000){wake} FROM victim v
"""


# A holder whose heartbeat and last statement are both older than %(stale)s seconds.
EVICT_STALE_SQL = evict_sql(
    "now() - greatest(CASE WHEN s.holder_pid = a.pid THEN s.heartbeat_at END, "
    "a.query_start, a.backend_start) > make_interval(secs => %(stale)s)"
)


class PgLockSession:
    """One process's dedicated, autocommit lock connection to PostgreSQL."""

    token = PG_TOKEN

    def __init__(self, url: str, instance: str) -> None:
        self.url = url
        self.instance = instance
        self.conn: psycopg.Connection | None = None
        self.counts: dict[int, int] = {}
        self._mutex = threading.RLock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)

    @property
    def name(self) -> str:
        """Return the application_name this session carries."""
        return identity(self.instance)

    @property
    def connected(self) -> bool:
        """Return whether the lock connection is open and usable."""
        return self.conn is not None and not self.conn.closed and not self.conn.broken

    def connect(self) -> None:
        """Open the lock connection, refuse a pooler, and LISTEN for wake-ups."""
        with self._mutex:
            self.close()
            conninfo = libpq_conninfo(self.url)
            conn = psycopg.connect(conninfo, autocommit=True, application_name=self.name,
                                   **KEEPALIVE)
            try:
                check_direct_connection(conn, conninfo)
                conn.execute(f"LISTEN {WAKE_CHANNEL}")
                conn.execute(f"LISTEN {HANDOVER_CHANNEL}")
            except BaseException:
                conn.close()
                raise
            self.conn = conn
            self.counts.clear()

    def close(self) -> None:
        """Close the connection; the server drops every lock it held."""
        with self._mutex:
            if self.conn is not None:
                try:
                    self.conn.close()
                finally:
                    self.conn = None
                    self.counts.clear()

    def execute(self, sql: str, params: object = None) -> list[tuple]:
        """Run one statement on the lock connection and return its rows."""
        with self._mutex:
            if not self.connected:
                raise LockUnavailable("the lock connection is not open")
            cur = self.conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def try_lock(self, key: int) -> bool:
        """Try to take (or re-enter) one key."""
        got = self.execute("SELECT pg_try_advisory_lock(%s)", (key,))[0][0]
        if got:
            self.counts[key] = self.counts.get(key, 0) + 1
        return bool(got)

    def unlock(self, key: int) -> bool:
        """Release one level of a key; False means this session did not hold it."""
        ok = bool(self.execute("SELECT pg_advisory_unlock(%s)", (key,))[0][0])
        if ok:
            self.counts[key] = self.counts.get(key, 1) - 1
            if self.counts[key] <= 0:
                self.counts.pop(key)
        return ok

    def poll(self, keys: list[int]) -> list[PollRow]:
        """Try every key in one statement and read each key's heartbeat age."""
        rows = self.execute(POLL_SQL, (keys,))
        for key, got, _age, _term in rows:
            if got:
                self.counts[key] = self.counts.get(key, 0) + 1
        return [PollRow(key, bool(got), age, term) for key, got, age, term in rows]

    def heartbeat(self, keys: list[int]) -> tuple[datetime, dict[int, bool]]:
        """Stamp the heartbeat of the keys still held.

        Return the database clock and {key: step_down_requested} for those keys.
        """
        rows = self.execute(HEARTBEAT_SQL, (keys,))
        now = rows[0][2] if rows else datetime.now(UTC)
        return now, {key: bool(step) for key, step, _now in rows}

    def record_acquired(self, key: int, detail: str = "") -> int:
        """Start a new term for key with this session as holder; return the term."""
        rows = self.execute(ACQUIRED_SQL, {"key": key, "holder": self.name, "detail": detail})
        return rows[0][0]

    def record_event(self, key: int, kind: str, term: int | None, holder: str,
                     detail: str = "", at: object = None) -> None:
        """Append one leadership event (term None: the key's current term)."""
        self.execute(EVENT_SQL, {"key": key, "kind": kind, "term": term, "holder": holder,
                                 "detail": detail, "at": at})

    def release(self, key: int, term: int, detail: str = "") -> bool:
        """Unlock key fully, record the release and NOTIFY the standbys."""
        ok = False
        while self.counts.get(key):
            ok = self.unlock(key) or ok
            if not ok:
                break
        if ok:
            self.execute(RELEASED_SQL, {"key": key, "term": term, "holder": self.name,
                                        "detail": detail})
        return ok

    def evict_stale(self, key: int, stale_seconds: float, ours: list[int],
                    detail: str) -> tuple[str, list[int]] | None:
        """Terminate the lock session of a holder whose heartbeat is stale.

        Record an "evicted" event for each of ours it held, in the same statement, and
        return its application_name and those keys; None if it is not stale after all.
        """
        rows = self.execute(EVICT_STALE_SQL, {"key": key, "stale": stale_seconds, "ours": ours,
                                        "detail": detail})
        return (rows[0][0], list(rows[0][1] or [key])) if rows else None

    def notify(self, channel: str, payload: str = "") -> None:
        """Send a notification to every lock session."""
        self.execute("SELECT pg_notify(%s, %s)", (channel, payload))

    def interrupt(self) -> None:
        """Wake a wait() in progress from another thread."""
        os.write(self._wake_w, b"x")

    def wait(self, timeout: float) -> list[psycopg.Notify]:
        """Sleep up to timeout; return early with any notifications or on interrupt()."""
        if not self.connected:
            select.select([self._wake_r], [], [], max(timeout, 0))
            self._drain_pipe()
            return []
        with self._mutex:
            notes = list(self.conn.notifies(timeout=0))
            if notes:
                return notes
            fileno = self.conn.fileno()
        ready, _, _ = select.select([fileno, self._wake_r], [], [], max(timeout, 0))
        self._drain_pipe()
        if fileno in ready:
            with self._mutex:
                return list(self.conn.notifies(timeout=0))
        return []

    def _drain_pipe(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass


def check_direct_connection(conn: psycopg.Connection, conninfo: str) -> None:
    """Refuse a lock connection that goes through a transaction-mode pooler.

    A direct connection reports its real backend pid at start-up. Behind a pooler
    (which hands out its own cancel keys) look closer: in transaction mode one
    client's consecutive statements can land on different backends, and two open
    clients can share one backend; neither ever happens to a direct or
    session-mode connection.
    """
    first = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    if first == conn.info.backend_pid:
        return
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as probe:
        other = probe.execute("SELECT pg_backend_pid()").fetchone()[0]
        second = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    if first != second or other in (first, second):
        raise TransactionPoolerError(
            "the lock connection goes through a transaction-mode pooler such as PgBouncer "
            f"(one session ran on backends {first} and {second}, another on {other}); "
            "session advisory locks need a direct connection: set LOCK_DATABASE_URL to "
            "the database's direct URL (on Heroku, DATABASE_URL rather than "
            "DATABASE_CONNECTION_POOL_URL)"
        )


_sessions: dict[tuple[int, str], object] = {}
_sessions_lock = threading.Lock()


def lock_session(url: str, instance: str):  # noqa: ANN201  (PgLockSession | FileLockSession)
    """Return this process's lock session for url, creating it after a fork."""
    key = (os.getpid(), url)
    with _sessions_lock:
        found = _sessions.get(key)
        if found is None:
            if url.startswith("sqlite"):
                from .filelocks import FileLockSession

                found = FileLockSession(url, instance)
            else:
                found = PgLockSession(url, instance)
            _sessions[key] = found
        return found


def _session_for(session):  # noqa: ANN001, ANN202
    from flask import current_app

    bind = session.get_bind()
    if bind.dialect.name == "sqlite":
        url = bind.url.render_as_string(hide_password=False)
    else:
        url = current_app.config["LOCK_DATABASE_URL"]
    return lock_session(url, current_app.config["INSTANCE_NAME"])


def try_acquire_leader(session, key: int):  # noqa: ANN001, ANN201
    """Try to take key on this process's lock session; return a token, or None if not leader.

    Fails closed: any error while acquiring means "not leader", never "SQLite".
    """
    try:
        locks = _session_for(session)
        if not locks.connected:
            locks.connect()
        return locks.token if locks.try_lock(key) else None
    except (psycopg.Error, LockUnavailable, OSError) as exc:
        log.warning("could not try the lock for key %#x (%s): not leader", key, exc)
        return None


def release_leader(session, token, key: int) -> bool:  # noqa: ANN001
    """Release one level of key taken with try_acquire_leader; log a failed unlock as lost."""
    if token is None:
        return False
    try:
        released = _session_for(session).unlock(key)
    except (psycopg.Error, LockUnavailable, OSError) as exc:
        log.warning("lost leadership of key %#x: unlock failed (%s)", key, exc)
        return False
    if not released:
        log.warning("lost leadership of key %#x: the lock was no longer held at unlock", key)
    return released


def with_scheduler_leader_lock(session, key: int, fn):  # noqa: ANN001, ANN201
    """Run fn() only if this process leads key; return its result, or None if not leader."""
    token = try_acquire_leader(session, key)
    if token is None:
        return None
    try:
        return fn()
    finally:
        release_leader(session, token, key)


def close_all_sessions() -> None:
    """Close every lock session this process opened (tests and shutdown)."""
    with _sessions_lock:
        found = list(_sessions.values())
        _sessions.clear()
    for session in found:
        session.close()
