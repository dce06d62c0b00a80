"""The PostgreSQL backend: one dedicated lock session per process, and the pg_locks view.

Session-level advisory locks belong to the server backend that took them, so
the lock is taken and released on one autocommit psycopg connection that lives
outside the SQLAlchemy pool (a pooled connection keeps its locks when it goes
back to the pool, and an unlock on another pooled connection silently fails).
The view reads who holds what from pg_locks joined with pg_stat_activity.
"""

import logging
import os
import threading
from datetime import datetime
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.abc import Params

from ..config import load_config
from ..db import (
    HANDOVER_CHANNEL,
    WAKE_CHANNEL,
    boot_id,
    client_keepalives,
    conninfo,
    identity,
    read_only_server,
    renew_nonce,
)
from ..extensions import db
from ..version import code_version, schema_head
from .base import (
    PG_TOKEN,
    BaseLockSession,
    LockSession,
    LockUnavailable,
    OpsError,
    PollRow,
    parse_identity,
)
from .pg_sql import (
    ACQUIRED_SQL,
    CLEAR_SNAPSHOT_SQL,
    EVENT_SQL,
    EVICT_SQL,
    EVICT_STALE_SQL,
    HEARTBEAT_SQL,
    HOLDER_SQL,
    POLL_SQL,
    PROCESS_SQL,
    RELEASED_SQL,
    SESSIONS_SQL,
    UNVERSIONED_SESSIONS_SQL,
    VERSION_SQL,
    VERSIONS_KNOWN_SQL,
    WAIT_SQL,
)

log = logging.getLogger("soloist.locks")


class TransactionPoolerError(LockUnavailable):
    """The lock connection goes through a transaction-mode pooler such as PgBouncer."""


def libpq_conninfo(url: str) -> str:
    """Turn a SQLAlchemy URL into a libpq connection string (every host of it kept)."""
    return conninfo(url)


# for a lock session made without the app's settings (the seed API in a test, a CLI): the
# defaults' (no environment read)
KEEPALIVE = client_keepalives(load_config({}))


class PgLockSession(BaseLockSession):
    """One process's dedicated, autocommit lock connection to PostgreSQL.

    It belongs to the process's scheduler thread; psycopg serialises the statements
    of any other caller (the seed API) on the connection itself.
    """

    token = PG_TOKEN

    def __init__(self, url: str, instance: str, options: str = "",
                 keepalives: dict | None = None, allow_pooler: bool = False) -> None:
        super().__init__(instance)
        self.url = url
        self.allow_pooler = allow_pooler  # LOCK_ALLOW_POOLER: a session-mode pooler is fine
        self.options = options  # libpq options: the server's timeouts and keepalives
        self.keepalives = keepalives or KEEPALIVE  # the client's, and connect_timeout
        self.conn: psycopg.Connection | None = None
        self.opened = False  # once: a later connect takes a new nonce
        self.waiting = False  # in wait_for, the one statement interrupt() may cancel
        self.interrupted = False  # interrupt() was called: no wait until the next connect
        self._waiting = threading.RLock()  # RLock: a SIGTERM may arrive inside interrupt()

    @property
    def connected(self) -> bool:
        """Return whether the lock connection is open and usable."""
        return self.conn is not None and not self.conn.closed and not self.conn.broken

    def connect(self) -> None:
        """Open the lock connection, refuse a pooler, and LISTEN for wake-ups."""
        self.close()
        info = libpq_conninfo(self.url)
        extra: dict[str, Any] = {"options": self.options} if self.options else {}
        if self.opened:  # back after a loss: an eviction aimed at the old session misses us
            renew_nonce()
        self.session_name = identity(self.instance)
        conn = psycopg.connect(info, autocommit=True, application_name=self.session_name,
                               **self.keepalives, **extra)
        self.opened = True
        try:
            check_writable(conn)
            check_direct_connection(conn, info, self.keepalives, self.allow_pooler)
            conn.execute(f"LISTEN {WAKE_CHANNEL}")
            conn.execute(f"LISTEN {HANDOVER_CHANNEL}")
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        self.counts.clear()
        self.interrupted = False
        self.record_version()

    def record_version(self) -> None:
        """Record the code this process runs, for the status page and the release.

        Never at the cost of the lock session: a database the release has not migrated yet
        (no process_versions) just shows this process's version as unknown.
        """
        version, source = code_version()
        try:
            self.execute(VERSION_SQL, {"boot": boot_id(), "instance": self.instance[:200],
                                       "pid": os.getpid(), "version": version,
                                       "source": source, "schema": schema_head()})
        except psycopg.Error as exc:
            log.info("this process's version is not recorded: %s", exc)

    def close(self) -> None:
        """Close the connection; the server drops every lock it held."""
        conn, self.conn = self.conn, None
        self.counts.clear()
        if conn is not None:
            conn.close()

    def execute(self, sql: str, params: Params | None = None) -> list[tuple]:
        """Run one statement on the lock connection and return its rows."""
        conn = self.conn
        if conn is None or conn.closed or conn.broken:
            raise LockUnavailable("the lock connection is not open")
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []

    def try_lock(self, key: int) -> bool:
        """Try to take (or re-enter) one key."""
        got = self.execute("SELECT pg_try_advisory_lock(%s)", (key,))[0][0]
        if got:
            self.counts[key] = self.counts.get(key, 0) + 1
        return bool(got)

    def wait_for(self, key: int, seconds: float) -> bool | None:
        """Wait in the server's lock queue up to seconds for key; return whether it is held.

        A standby that holds nothing waits here instead of sleeping between polls: when
        the holder's session ends (killed, cut off, evicted, released) the server grants
        the lock at once, with no poll to wait for. The wait ends by lock_timeout (then
        the caller polls, which also reads the holder's heartbeat) or by interrupt().
        """
        with self._waiting:
            if self.interrupted:  # stopping: no more waits (None: the caller sleeps instead)
                return None
            self.waiting = True
        try:
            self.execute(WAIT_SQL, (key, f"{max(1, round(seconds * 1000))}ms"))
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled):
            return False
        finally:
            with self._waiting:
                self.waiting = False
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.interrupted:  # granted as the cancel was on its way: a stopping process
            self.unlock(key)  # leads nothing, and nothing was recorded
            return False
        return True

    def interrupt(self) -> None:
        """End a wait_for in progress and refuse new ones until the next connect.

        From another thread (a stopping worker's signal handler). Only a wait is cancelled:
        a cancel that reached the release of a key would leave its term open.
        """
        with self._waiting:
            self.interrupted = True
            conn = self.conn
            if not self.waiting or conn is None or conn.closed or conn.broken:
                return
            try:
                conn.cancel_safe(timeout=2.0)
            except (psycopg.Error, OSError) as exc:
                log.warning("could not cancel the lock session's wait: %s", exc)

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
        check_writable(self.conn)
        rows = self.execute(POLL_SQL, (keys,))
        for key, got, *_ in rows:
            if got:
                self.counts[key] = self.counts.get(key, 0) + 1
        return [PollRow(key, bool(got), age, term, recorded)
                for key, got, age, term, recorded in rows]

    def heartbeat(self, keys: list[int]) -> tuple[datetime, dict[int, bool]]:
        """Stamp the heartbeat of the keys still held.

        Return the database clock and {key: step_down_requested} for those keys (a request
        meant for another holder does not count).
        """
        rows = self.execute(HEARTBEAT_SQL, (keys, self.name))
        now = rows[0][2] if rows else self.execute("SELECT now()")[0][0]
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
        """Record the release, unlock key fully and NOTIFY the standbys.

        Recorded first, then unlocked: a standby waiting in the server's lock queue takes
        the key the instant it is free, and must find this term already closed.
        """
        if not self.counts.get(key):
            return False
        held = bool(self.execute(RELEASED_SQL, {"key": key, "term": term, "holder": self.name,
                                                "detail": detail})[0][0])
        ok = False
        while self.counts.get(key):
            ok = self.unlock(key) or ok
            if not ok:
                break
        if ok:
            self.notify(HANDOVER_CHANNEL, str(key))
        return ok and held

    def evict_stale(self, key: int, stale_seconds: float, ours: list[int],
                    detail: str) -> tuple[str, list[int]] | None:
        """Terminate the lock session of a holder whose heartbeat is stale.

        Record an "evicted" event for each of ours it held, in the same statement, and
        return its application_name and those keys; None if it is not stale after all, or
        if its session did not end (the next poll judges it again).
        """
        rows = self.execute(EVICT_STALE_SQL, {"key": key, "stale": stale_seconds, "ours": ours,
                                        "detail": detail})
        if rows and not rows[0][2]:
            log.warning("the lock session of %s did not end; evicting it again at the next "
                        "poll", rows[0][0])
        return (rows[0][0], list(rows[0][1] or [key])) if rows and rows[0][2] else None

    def notify(self, channel: str, payload: str = "") -> None:
        """Send a notification to every lock session."""
        self.execute("SELECT pg_notify(%s, %s)", (channel, payload))

    def fileno(self) -> int | None:
        """Return the socket NOTIFYs arrive on, or None while disconnected."""
        conn = self.conn
        return None if conn is None or conn.closed or conn.broken else conn.fileno()

    def notifies(self) -> list[psycopg.Notify]:
        """Return the notifications that have arrived, without waiting."""
        conn = self.conn
        if conn is None or conn.closed or conn.broken:
            return []
        return list(conn.notifies(timeout=0))


def check_writable(conn: psycopg.Connection | None) -> None:
    """Refuse a lock connection on a standby or a read-only server: it cannot lead."""
    if conn is not None and not conn.closed and read_only_server(conn):
        raise LockUnavailable("the lock connection reached a read-only server (a standby); "
                              "connecting again to find the primary")


def _backend_pid(conn: psycopg.Connection) -> int:
    """Return the pid of the backend conn's statement runs on."""
    return conn.execute("SELECT pg_backend_pid()").fetchall()[0][0]


def check_direct_connection(conn: psycopg.Connection, info: str,
                            keepalives: dict | None = None, allow_pooler: bool = False) -> None:
    """Refuse a lock connection that does not run on the backend it started on.

    A direct connection reports its real backend pid at start-up, and every statement runs
    there. A pooler hands out its own pid: refused unless the operator opted in
    (LOCK_ALLOW_POOLER, for a session-mode pooler). Even then, look closer: in transaction
    mode one client's consecutive statements can land on different backends, and two open
    clients can share one backend; neither ever happens to a session-mode connection.
    """
    first = _backend_pid(conn)
    if first == conn.info.backend_pid:
        return
    if not allow_pooler:
        raise TransactionPoolerError(
            f"the lock connection goes through a pooler (it started as backend "
            f"{conn.info.backend_pid} but runs on {first}), and a transaction-mode pooler "
            f"breaks session advisory locks: {DIRECT_HINT}; or, if it is a session-mode "
            "pooler, set LOCK_ALLOW_POOLER=true")
    with psycopg.connect(info, autocommit=True, **(keepalives or KEEPALIVE)) as probe:
        other = _backend_pid(probe)
        seen = [_backend_pid(conn) for _ in range(3)]
    if set(seen) != {first} or other == first:
        raise TransactionPoolerError(
            "the lock connection goes through a transaction-mode pooler such as PgBouncer "
            f"(one session ran on backends {[first, *seen]}, another on {other}); "
            f"session advisory locks need a direct connection: {DIRECT_HINT}")


DIRECT_HINT = ("set LOCK_DATABASE_URL to the database's direct URL (on Heroku, DATABASE_URL "
               "rather than DATABASE_CONNECTION_POOL_URL)")


class PgView:
    """Who holds what, read from pg_locks and pg_stat_activity through the app's session."""

    mode = "postgresql"
    can_evict = True

    def now(self) -> datetime:
        """Return the database clock at this statement."""
        # statement_timestamp(), not now(): correct even inside a longer transaction
        return db.session.scalar(sa.text("SELECT statement_timestamp()"))

    versions_known = False  # process_versions exists (its migration ran): once, then kept

    @staticmethod
    def fresh() -> None:
        """Drop this transaction's copy of pg_stat_activity: PostgreSQL reads it once per
        transaction, so a second read would still show a process that ended in between."""
        db.session.execute(CLEAR_SNAPSHOT_SQL)

    def sessions(self, keys: list[int]) -> list[LockSession]:
        """Return every lock session of this database, with the keys (of keys) it holds and
        the version its process recorded."""
        if not self.versions_known:
            PgView.versions_known = bool(db.session.scalar(VERSIONS_KNOWN_SQL))
        query = SESSIONS_SQL if self.versions_known else UNVERSIONED_SESSIONS_SQL
        self.fresh()
        found = []
        for pid, name, addr, started, held, version, schema in db.session.execute(
                query, {"keys": keys}):
            instance, os_pid = parse_identity(name or "")
            found.append(LockSession(name or "", instance, os_pid, pid, addr, started,
                                     list(held), version or "", schema or ""))
        return found

    def holder_of(self, key: int) -> str | None:
        """Return the application_name of the lock session holding key now, if any."""
        self.fresh()
        return db.session.scalar(HOLDER_SQL, {"key": key})

    def process_alive(self, boot: str) -> bool:
        """Return whether the process with boot id boot has any connection to this database."""
        if not boot:
            return False
        self.fresh()
        return bool(db.session.scalar(PROCESS_SQL, {"boot": boot}))

    def evict(self, key: int, expected: str, detail: str, ours: list[int]) -> str | None:
        """End the lock session named expected if it holds key; return its name, or None."""
        params = {"key": key, "expected": expected, "detail": detail, "ours": ours}
        try:
            row = db.session.connection().exec_driver_sql(EVICT_SQL, params).first()
            if row:
                db.session.commit()
            else:  # nobody evicted: nothing to keep (an audit row the caller added goes too)
                db.session.rollback()
        except sa.exc.DBAPIError as exc:
            db.session.rollback()
            raise OpsError(f"PostgreSQL refused to end that session: {exc.orig}") from exc
        return row[0] if row else None


VIEW = PgView()
