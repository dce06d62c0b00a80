"""SQLite mode: leadership between the workers of one host with OS file locks.

One lock file per key beside the database file. fcntl.flock is released by the
kernel when the process dies, just as PostgreSQL drops a session lock when its
connection goes. Each lock file records its holder for the leader page.
"""

import fcntl
import json
import os
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

from .locks import SQLITE_TOKEN, PollRow, identity
from .sqlite import sqlite_path


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
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = path.read_text() or "{}"
            return json.loads(text)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


class FileLockSession:
    """One process's file locks, with the same interface as PgLockSession."""

    token = SQLITE_TOKEN

    def __init__(self, url: str, instance: str) -> None:
        self.db_file = sqlite_path(url)
        self.instance = instance
        self.fds: dict[int, int] = {}
        self.counts: dict[int, int] = {}
        self._mutex = threading.RLock()
        self._wake = threading.Event()

    @property
    def name(self) -> str:
        """Return this process's identity."""
        return identity(self.instance)

    @property
    def connected(self) -> bool:
        """File locks need no connection."""
        return True

    def connect(self) -> None:
        """Nothing to open: file locks are taken per key."""

    def close(self) -> None:
        """Drop every lock this process holds."""
        with self._mutex:
            for key in list(self.fds):
                self._drop(key)

    def try_lock(self, key: int) -> bool:
        """Take (or re-enter) key's file lock without waiting."""
        with self._mutex:
            if key in self.fds:
                self.counts[key] += 1
                return True
            fd = os.open(lock_file(self.db_file, key), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            holder = {"application_name": self.name, "instance": self.instance,
                      "pid": os.getpid(), "since": _now()}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(holder).encode(), 0)
            self.fds[key] = fd
            self.counts[key] = 1
            return True

    def unlock(self, key: int) -> bool:
        """Release one level of key; False if this process did not hold it."""
        with self._mutex:
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

    def _db(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_file, timeout=15, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=15000")
        return conn

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
                    "RETURNING step_down_requested",
                    (_now(), key, os.getpid()),
                ).fetchone()
                if row is not None:
                    result[key] = bool(row[0])
        return datetime.now(UTC), result

    def record_acquired(self, key: int, detail: str = "") -> int:
        """Start a new term for key; return the term."""
        now = _now()
        with self._db() as conn:
            term = conn.execute(
                "INSERT INTO leader_state (key, term, holder, holder_pid, acquired_at, "
                "heartbeat_at, last_result, step_down_requested) VALUES (?, 1, ?, ?, ?, ?, '', 0) "
                "ON CONFLICT (key) DO UPDATE SET term = term + 1, holder = excluded.holder, "
                "holder_pid = excluded.holder_pid, acquired_at = excluded.acquired_at, "
                "heartbeat_at = excluded.heartbeat_at, step_down_requested = 0 RETURNING term",
                (key, self.name, os.getpid(), now, now),
            ).fetchone()[0]
            self._event(conn, key, "acquired", term, self.name, detail)
        return term

    def _event(self, conn, key, kind, term, holder, detail, at=None) -> None:  # noqa: ANN001
        conn.execute(
            "INSERT INTO leader_events (key, kind, term, holder, detail, at) "
            "VALUES (?, ?, coalesce(?, (SELECT term FROM leader_state WHERE key = ?), 0), ?, ?, ?)",
            (key, kind, term, key, holder, detail, at or _now()),
        )

    def record_event(self, key: int, kind: str, term: int | None, holder: str,
                     detail: str = "", at: object = None) -> None:
        """Append one leadership event."""
        at = _stamp(at) if at else None
        with self._db() as conn:
            self._event(conn, key, kind, term, holder, detail, at)

    def release(self, key: int, term: int, detail: str = "") -> bool:
        """Unlock key fully and record the release."""
        with self._mutex:
            if key not in self.fds:
                return False
            self._drop(key)
        with self._db() as conn:
            conn.execute("UPDATE leader_state SET holder_pid = NULL, heartbeat_at = NULL "
                         "WHERE key = ? AND holder_pid = ?", (key, os.getpid()))
            self._event(conn, key, "released", term, self.name, detail)
        return True

    def evict_stale(self, key: int, stale_seconds: float, ours: list[int],
                    detail: str) -> tuple[str, list[int]] | None:
        """Never evict on one host: a dead process's file lock is freed by the kernel."""
        return None

    def notify(self, channel: str, payload: str = "") -> None:
        """No NOTIFY in SQLite mode: standbys find a free key at their next poll."""

    def interrupt(self) -> None:
        """Wake a wait() in progress from another thread."""
        self._wake.set()

    def wait(self, timeout: float) -> list:
        """Sleep up to timeout or until interrupt()."""
        if self._wake.wait(max(timeout, 0)):
            self._wake.clear()
        return []

