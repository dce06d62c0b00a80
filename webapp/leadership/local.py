"""One candidate per instance: the workers of one host and INSTANCE_NAME agree on a file.

Only the instance's candidate holds a lock session and competes for the keys; its
siblings stand by on this host at no cost to the database. The candidate is the worker
holding an exclusive flock on the lease file, a file in LEASE_DIR named for the lock
database and the instance. The kernel drops the flock the moment its holder exits or is
killed (or recycled by max_requests), and a sibling polling the file every LOCAL_POLL
seconds takes it within milliseconds.

A frozen candidate (SIGSTOP, a stuck host) keeps its flock, so it also stamps the file
with the monotonic clock (CLOCK_MONOTONIC, one for the whole host, which no NTP step
moves) at every scheduler step: a sibling that finds the stamp older than
LEADER_STALE_SECONDS breaks the lease by renaming a new file it holds over the path
(under a short second lock, so two siblings do not both break it). The frozen worker, on
waking, finds the path is no longer its file, drops its lock session (its keys went
elsewhere meanwhile: standbys evict a frozen leader in the same time) and stands by.
"""

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import time

from sqlalchemy.engine import make_url

log = logging.getLogger("soloist.locks")

LOCAL_POLL = 0.05  # how often a sibling standing by tries the lease
RECORD = 74  # bytes of the lease's record (LocalLease._write), always the same


def lease_path(directory: str, url: str, instance: str) -> str:
    """Return the lease file of an instance on a lock database (its password left out)."""
    parts = make_url(url)
    where = (f"{parts.username}@{parts.host}:{parts.port}/{parts.database}"
             f"?{sorted(parts.query.items())}")  # the password left out
    digest = hashlib.sha256(f"{where}\0{instance}".encode()).hexdigest()[:16]
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", instance)[:40]
    return os.path.join(directory, f"soloist-candidate-{safe}-{digest}.lock")


class LocalLease:
    """This worker's side of its instance's candidacy."""

    def __init__(self, path: str, stale_seconds: float) -> None:
        self.path = path
        self.stale_seconds = stale_seconds
        self.fd: int | None = None
        self.offline_since: float | None = None  # monotonic: lock session down since then

    @property
    def held(self) -> bool:
        return self.fd is not None

    def take(self) -> bool:
        """Become the instance's candidate if no live sibling is; return whether this is."""
        if self.fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return self._break_if_stale()
        if not _same_file(fd, self.path):  # a sibling broke the lease between open and flock
            os.close(fd)
            return False
        self._own(fd)
        return True

    def still_held(self) -> bool:
        """Return whether this worker is still the candidate (False: a sibling broke the
        lease while this one was frozen); drop the lease when it is not."""
        if self.fd is None:
            return False
        if _same_file(self.fd, self.path):
            return True
        self.release()
        return False

    def beat(self) -> None:
        """Stamp the lease: this candidate is alive."""
        if self.fd is not None:
            self._write(self.fd)

    def release(self) -> None:
        """Stop being the candidate (a sibling takes over at its next try)."""
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)  # the flock goes with the last descriptor

    def holder(self) -> tuple[int | None, float | None]:
        """Return the pid written in the lease and the age of its stamp (None: no lease)."""
        pid, age, _offline = self.read()
        return pid, age

    def read(self) -> tuple[int | None, float | None, float | None]:
        """Return the lease's pid, the age of its stamp, and for how long its candidate has
        had no lock session (None: it has one, or there is no lease)."""
        try:
            with open(self.path, "rb") as lease:
                modified = os.fstat(lease.fileno()).st_mtime
                text = lease.read(RECORD + 64).decode("ascii", "replace").split()
        except OSError:
            return None, None, None
        pid = int(text[0]) if text and text[0].isdigit() else None
        stamp, offline = (_number(text[2]), _number(text[3])) if len(text) > 3 else (None, None)
        if stamp is None:  # written by an older version (a reload's overlap): its mtime
            return pid, time.time() - modified, None
        now = time.monotonic()  # never below 0: the stamps are rounded to the microsecond
        return pid, max(0.0, now - stamp), None if offline is None else max(0.0, now - offline)

    def say_offline(self, down: float) -> None:
        """Write in the lease for how long (down, 0 when it is up) this candidate's lock
        session has been down, for its siblings' /readyz."""
        if self.fd is None or bool(down) == (self.offline_since is not None):
            return  # nothing changed
        self.offline_since = time.monotonic() - down if down else None
        self._write(self.fd)

    def _write(self, fd: int) -> None:
        """Write the whole record, one length always, in one pwrite: a sibling never reads
        a half-written or shortened one."""
        since = self.offline_since
        wall = "-" if since is None else f"{time.time() - (time.monotonic() - since):.6f}"
        mono = "-" if since is None else f"{since:.6f}"
        # pid, then the wall-clock time it went offline (read by an older version), then
        # the monotonic stamp and offline time this version reads
        text = f"{os.getpid():<10}\n{wall:<20}\n{time.monotonic():<20.6f} {mono:<20}\n"
        os.pwrite(fd, text.encode(), 0)

    def _own(self, fd: int) -> None:
        os.ftruncate(fd, 0)
        self.fd = fd
        self.offline_since = None
        self._write(fd)

    def _break_if_stale(self) -> bool:
        """Take the lease from a holder that stopped stamping it; return whether taken."""
        pid, age = self.holder()
        if age is None or age <= self.stale_seconds:
            return False
        guard = os.open(self.path + ".break", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # a sibling is breaking it now
            again_pid, again_age = self.holder()
            if again_pid != pid or again_age is None or again_age <= self.stale_seconds:
                return False  # taken, or stamped again, meanwhile
            fresh = f"{self.path}.{os.getpid()}"
            fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody holds it
            self._own(fd)
            os.replace(fresh, self.path)
        finally:
            os.close(guard)
        log.warning("took over this instance's candidacy from worker %s, whose lease was "
                    "last stamped %.1f s ago (frozen?)", pid, age)
        return True


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "-": none
        return None


def _same_file(fd: int, path: str) -> bool:
    with contextlib.suppress(FileNotFoundError):
        mine, now = os.fstat(fd), os.stat(path)
        return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)
    return False
