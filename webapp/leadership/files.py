"""SQLite mode: leadership between the workers of one host with OS file locks.

One lock file per key beside the database file. fcntl.flock is released by the
kernel when the process dies, just as PostgreSQL drops a session lock when its
connection goes. Each lock file records its holder for the leader page.
"""

import contextlib
import fcntl
import glob
import json
import os
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ..db import boot_id, sqlite_path
from ..extensions import db
from ..version import code_version, schema_head
from .base import ENDED_DETAIL, SQLITE_TOKEN, BaseLockSession, LockSession, OpsError, PollRow


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _now() -> str:
    return _stamp(datetime.now(UTC))


def lock_file(db_file: Path, key: int) -> Path:
    """Return the lock file of key beside the database file."""
    return db_file.with_name(f"{db_file.name}.lock-{key & 0xFFFFFFFFFFFFFFFF:016x}")


def read_holder(db_file: Path, key: int) -> dict | None:
    """Return the holder recorded in key's lock file, if the lock is held."""
    path = lock_file(db_file, key)
    if not _taken(path):
        return None
    try:
        return json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return None


def _taken(path: Path, exclusive: bool = False) -> bool | None:
    """Return whether a live process holds path's flock (None: there is no such file).

    exclusive tests for any holder, a shared probe only for an exclusive one.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # and with it the probe's own lock
    return False


class FileLockSession(BaseLockSession):
    """One process's file locks, with the same interface as PgLockSession.

    It belongs to the process's scheduler thread, like the PostgreSQL lock session.
    """

    token = SQLITE_TOKEN

    def __init__(self, url: str, instance: str) -> None:
        super().__init__(instance)
        self.db_file = sqlite_path(url)
        self.fds: dict[int, int] = {}
        self.boot_fd: int | None = None  # this process's boot file, held while it may lead

    @property
    def connected(self) -> bool:
        """File locks need no connection."""
        return True

    def connect(self) -> None:
        """Nothing to open: file locks are taken per key."""

    def close(self) -> None:
        """Drop every lock this process holds."""
        for key in list(self.fds):
            self._drop(key)

    def try_lock(self, key: int) -> bool:
        """Take (or re-enter) key's file lock without waiting."""
        if key in self.fds:
            self.counts[key] += 1
            return True
        if self.boot_fd is None:  # before it can claim anything: its claims' holder lives
            self.boot_fd = hold_boot_file(self.db_file)
        fd = os.open(lock_file(self.db_file, key), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        version, _source = code_version()
        holder = {"application_name": self.name, "instance": self.instance,
                  "pid": os.getpid(), "since": _now(), "version": version,
                  "schema": schema_head()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        self.fds[key] = fd
        self.counts[key] = 1
        return True

    def unlock(self, key: int) -> bool:
        """Release one level of key; False if this process did not hold it."""
        if key not in self.fds:
            return False
        self.counts[key] -= 1
        if self.counts[key] <= 0:
            self._drop(key)
        return True

    def _drop(self, key: int) -> None:
        fd = self.fds.pop(key)
        self.counts.pop(key, None)
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """Open the database file for one write transaction, committed or rolled back whole."""
        conn = sqlite3.connect(self.db_file, timeout=15, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=15000")
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def poll(self, keys: list[int]) -> list[PollRow]:
        """Try every key; heartbeat ages are not used on one host."""
        return [PollRow(key, self.try_lock(key), None) for key in keys]

    def heartbeat(self, keys: list[int]) -> tuple[datetime, dict[int, bool]]:
        """Stamp the heartbeat of the keys this process holds; return the clock and them."""
        held = [k for k in keys if k in self.fds]
        result = {}
        with self._db() as conn:
            for key in held:
                row = conn.execute(
                    "UPDATE leader_state SET heartbeat_at = ? WHERE key = ? AND holder_pid = ? "
                    "RETURNING step_down_requested AND holder = ?",  # asked of this holder
                    (_now(), key, os.getpid(), self.name),
                ).fetchone()
                if row is not None:
                    result[key] = bool(row[0])
        return datetime.now(UTC), result

    def record_acquired(self, key: int, detail: str = "") -> int:
        """Start a new term for key; return the term."""
        now = _now()
        with self._db() as conn:
            ended = conn.execute(  # the last holder's process died without releasing
                "SELECT term, holder, heartbeat_at FROM leader_state s WHERE key = ? AND "
                "holder_pid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM leader_events e WHERE "
                "e.key = s.key AND e.term = s.term AND e.kind IN "
                "('released', 'lost', 'evicted', 'ended'))", (key,)).fetchone()
            term = conn.execute(
                "INSERT INTO leader_state (key, term, holder, holder_pid, acquired_at, "
                "heartbeat_at, last_result, step_down_requested) VALUES (?, 1, ?, ?, ?, ?, '', 0) "
                "ON CONFLICT (key) DO UPDATE SET term = term + 1, holder = excluded.holder, "
                "holder_pid = excluded.holder_pid, acquired_at = excluded.acquired_at, "
                "heartbeat_at = excluded.heartbeat_at, step_down_requested = 0 RETURNING term",
                (key, self.name, os.getpid(), now, now),
            ).fetchone()[0]
            if ended:
                self._event(conn, key, "ended", ended[0], ended[1], ENDED_DETAIL,
                            ended[2] or now)
            self._event(conn, key, "acquired", term, self.name, detail)
        return term

    def _event(self, conn, key, kind, term, holder, detail, at=None) -> None:
        conn.execute(
            "INSERT INTO leader_events (key, kind, term, holder, detail, at) "
            "VALUES (?, ?, coalesce(?, (SELECT term FROM leader_state WHERE key = ?), 0), ?, ?, ?)",
            (key, kind, term, key, holder, detail, at or _now()),
        )

    def record_event(self, key: int, kind: str, term: int | None, holder: str,
                     detail: str = "", at: datetime | None = None) -> None:
        """Append one leadership event."""
        stamp = _stamp(at) if at else None
        with self._db() as conn:
            self._event(conn, key, kind, term, holder, detail, stamp)

    def release(self, key: int, term: int, detail: str = "") -> bool:
        """Record the release, then unlock key fully.

        Recorded first, as on PostgreSQL: the next holder takes the key the moment it is
        free, and must find this term closed (else it records the term as ended).
        """
        if key not in self.fds:
            return False
        try:
            with self._db() as conn:
                conn.execute("UPDATE leader_state SET holder_pid = NULL, heartbeat_at = NULL "
                             "WHERE key = ? AND holder_pid = ?", (key, os.getpid()))
                self._event(conn, key, "released", term, self.name, detail)
        finally:
            self._drop(key)  # unlocked even when the record fails: never held unknowingly
        return True

    def evict_stale(self, key: int, stale_seconds: float, ours: list[int],
                    detail: str) -> tuple[str, list[int]] | None:
        """Never evict on one host: a dead process's file lock is freed by the kernel."""
        return None

    def notify(self, channel: str, payload: str = "") -> None:
        """No NOTIFY in SQLite mode: standbys find a free key at their next poll."""

    def fileno(self) -> None:
        """File locks bring no notifications to wait on."""
        return None

    def notifies(self) -> list:
        """No NOTIFY in SQLite mode."""
        return []


def _parse_stamp(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC) if text else None
    except ValueError:
        return None


class FileView:
    """Who holds what on this host, read from the lock files beside the SQLite database."""

    mode = "sqlite"
    can_evict = False

    def now(self) -> datetime:
        """Return the clock of this host, which is the database's."""
        return datetime.now(UTC)

    def _db_file(self) -> Path:
        return sqlite_path(db.engine.url.render_as_string(hide_password=False))

    def sessions(self, keys: list[int]) -> list[LockSession]:
        """Return the processes holding any of keys (standbys leave no trace in files)."""
        by_name: dict[str, LockSession] = {}
        for key in keys:
            found = read_holder(self._db_file(), key)
            if not found or not found.get("application_name"):
                continue
            name = found["application_name"]
            session = by_name.setdefault(name, LockSession(
                name, found.get("instance", ""), found.get("pid"),
                backend_start=_parse_stamp(found.get("since")),
                version=found.get("version", ""), schema=found.get("schema", "")))
            session.keys.append(key)
        return list(by_name.values())

    def process_alive(self, boot: str) -> bool:
        """Return whether the process with boot id boot still runs on this host.

        One host: a live process of this database stamps a file named for its boot id
        (held with a flock for its life), and the kernel drops the flock when it exits.
        """
        return bool(boot) and boot_alive(self._db_file(), boot)

    def holder_of(self, key: int) -> str | None:
        """Return the application_name recorded in key's lock file while it is held."""
        return (read_holder(self._db_file(), key) or {}).get("application_name")

    def evict(self, key: int, expected: str, detail: str, ours: list[int]) -> str | None:
        """Refuse: a stuck worker keeps its file lock until it exits."""
        raise OpsError("Single-host (SQLite) mode has no lock sessions to evict: a stuck "
                       "worker keeps its file lock until it exits, so restart it.")


VIEW = FileView()


def boot_file(db_file: Path, boot: str) -> Path:
    """Return the file a live process with boot id boot holds a flock on, beside the database."""
    return db_file.with_name(f"{db_file.name}.proc-{boot}")


def hold_boot_file(db_file: Path) -> int:
    """Hold this process's boot file for its life (the kernel lets go when it exits); clear
    the files of processes that have exited. Return the descriptor, to keep open."""
    for other in db_file.parent.glob(f"{glob.escape(db_file.name)}.proc-*"):
        boot_alive(db_file, other.name.rpartition("-")[2])  # removes a dead one's file
    fd = os.open(boot_file(db_file, boot_id()), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)  # shared: a reader's test lock must fail, not wait
    return fd


def boot_alive(db_file: Path, boot: str) -> bool:
    """Return whether the process with boot id boot still holds its boot file."""
    path = boot_file(db_file, boot)
    taken = _taken(path, exclusive=True)
    if taken is False:
        path.unlink(missing_ok=True)  # nobody holds it: that process is gone
    return bool(taken)


def pid_alive(pid: int) -> bool:
    """Return whether a process of this host has pid (another user's counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
