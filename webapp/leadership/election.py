"""Sticky, verified, fenced leadership of every scheduler key for one process.

A follower tries every key it does not hold in one statement per poll. A leader
keeps its keys across ticks and re-verifies them (and stamps its heartbeat)
before each unit of work. A follower that finds a holder stale (its heartbeat, or
what its lock session last did when it recorded none: pg_sql.LAST_SIGN_SQL)
terminates the holder's lock session and takes over; one that survives is tried
again at the next poll.
"""

import logging
import random
import time
from datetime import datetime, timedelta

from .base import LOCK_ERRORS, PollRow, is_stale, silence
from .pg import TransactionPoolerError

log = logging.getLogger("soloist.leadership")

RECONNECT_MIN = 0.25
RECONNECT_MAX = 2.0  # a restarted database is led again within seconds of accepting
REFUSED_MAX = 60.0  # a pooler in the way is a setting to mend: no need to knock often


class Leadership:
    """Which keys this process leads, and the moves that change it."""

    def __init__(self, locks, keys: list[int], stale_seconds: float,
                 reconnect_max: float = RECONNECT_MAX) -> None:
        self.locks = locks
        self.keys = list(keys)
        self.stale_seconds = stale_seconds
        self.held: dict[int, int] = {}  # key -> term
        self.cooldown: dict[int, float] = {}  # key -> monotonic time it may be taken again
        self.online: bool | None = None
        self.offline_since: float | None = None  # monotonic time the lock session went down
        self.backoff = RECONNECT_MIN
        self.reconnect_max = max(RECONNECT_MIN, reconnect_max)  # the longest gap between tries
        self.next_connect = 0.0
        self.pending: list[tuple] = []  # events to write once the connection is back
        self.db_now: datetime | None = None  # the database clock at the last verify
        self.db_now_at = 0.0  # monotonic time of that verify
        self.refused = False  # the last connect was refused by a server that is up
        # what the last polls saw of the keys another holds: their heartbeat age and term
        self.unled: dict[int, PollRow] = {}
        self.stopping = False  # asked to stop: take no key it would hand back at once

    @property
    def missing(self) -> list[int]:
        """Return the keys this process does not lead and may try now."""
        now = time.monotonic()
        return [k for k in self.keys if k not in self.held and self.cooldown.get(k, 0) <= now]

    def ensure_connected(self) -> bool:
        """Open the lock connection when it is down, with backoff; log state changes once."""
        if self.locks.connected:
            return True
        now = time.monotonic()
        if now < self.next_connect or self.stopping:
            return False
        try:
            self.locks.connect()
        except LOCK_ERRORS as exc:
            self.refused = isinstance(exc, TransactionPoolerError)
            self._went_offline(exc)
            # jittered, so a fleet that lost its database does not reconnect in lockstep
            self.next_connect = now + self.backoff * random.uniform(0.5, 1.0)
            limit = REFUSED_MAX if isinstance(exc, TransactionPoolerError) else self.reconnect_max
            self.backoff = min(self.backoff * 2, limit)
            return False
        self.refused = False
        if self.online is False:
            log.info("lock connection restored as %s", self.locks.name)
        self.online, self.offline_since = True, None
        self.backoff = RECONNECT_MIN
        self._flush_pending()
        return True

    def retry_in(self) -> float:
        """Return seconds until the next reconnect attempt."""
        return max(0.0, self.next_connect - time.monotonic())

    def offline_for(self) -> float:
        """Return how long the lock session has been down (0 while it is up)."""
        return 0.0 if self.offline_since is None else time.monotonic() - self.offline_since

    def take_pending(self) -> list[tuple]:
        """Hand over the events still to write, for a writer with a working connection."""
        found, self.pending = self.pending, []
        return found

    def _went_offline(self, exc: BaseException) -> None:
        if self.online is not False:
            log.error("lock connection unavailable, leading nothing until it is back: %s", exc)
            self.offline_since = time.monotonic()
        self.online = False

    def _flush_pending(self) -> None:
        while self.pending:
            key, kind, term, holder, detail, at = self.pending[0]
            self.locks.record_event(key, kind, term, holder, detail, at)
            self.pending.pop(0)

    def stop(self) -> None:
        """Take no more keys: the process is stopping (a signal handler may call it)."""
        self.stopping = True

    def poll(self) -> list[int]:
        """Try every missing key in one statement; evict stale holders; return keys won."""
        won: list[int] = []
        if self.stopping:
            return won
        for _ in self.keys:
            # an evicted session held other keys too: they are free now, so look again
            if not (self._poll_once(won) and self.missing):
                break
        return won

    def _poll_once(self, won: list[int]) -> bool:
        """Poll once, adding the keys won to won; return whether a holder was evicted."""
        missing = self.missing
        if not missing:
            return False
        evicted = False
        for row in self.locks.poll(missing):
            self.unled.pop(row.key, None)
            if row.acquired:
                won.append(self._won(row.key))
            elif self._is_stale(row.heartbeat_age) and self._evict(row):
                evicted = True
                if self.locks.try_lock(row.key):
                    won.append(self._won(row.key))
            else:
                self.unled[row.key] = row
        return evicted

    def wait(self, seconds: float) -> list[int] | None:
        """Wait up to seconds in the server's queue for a missing key; return the keys won.

        Only a standby that holds nothing waits (a leader must heartbeat meanwhile), on one
        key (publish first): the others are polled as soon as it is won. None means it did
        not wait (the backend cannot, or it holds a key): sleep as usual.
        """
        missing = self.missing
        if self.held or not missing or seconds <= 0 or self.stopping:
            return None
        got = self.locks.wait_for(missing[0], seconds)
        if got is None:
            return None
        return [self._won(missing[0])] if got else []

    def _is_stale(self, age: float | None) -> bool:
        return is_stale(age, self.stale_seconds)

    def _won(self, key: int, detail: str = "") -> int:
        self.held[key] = self.locks.record_acquired(key, detail)
        log.info("now leading key %#x (term %d) as %s", key, self.held[key], self.locks.name)
        return key

    def _evict(self, row: PollRow) -> bool:
        """End the lock session of a stale holder; return whether one was ended.

        One that was not (its session outlived the termination) stays in unled: the next
        poll judges it again, and the watch reports the key if it stays unled.
        """
        detail = f"{silence(row.heartbeat_age, row.recorded)}; evicted by {self.locks.name}"
        evicted = self.locks.evict_stale(row.key, self.stale_seconds, self.keys, detail)
        if evicted is None:
            return False
        log.warning("evicted frozen leader %s of key %#x: %s", evicted[0], row.key, detail)
        return True

    def verify(self) -> dict[int, bool]:
        """Heartbeat every held key; drop the ones no longer held; return {key: step_down}."""
        if not self.held:
            return {}
        try:
            self.db_now, still = self.locks.heartbeat(list(self.held))
            self.db_now_at = time.monotonic()
        except LOCK_ERRORS as exc:
            self.lose_all(f"lock connection failed: {exc}")
            return {}
        for key in [k for k in self.held if k not in still]:
            self._lost(key, "the lock is no longer held by this session")
        return still

    def _lost(self, key: int, reason: str) -> None:
        term = self.held.pop(key)
        log.error("lost leadership of key %#x (term %d): %s", key, term, reason)
        self.pending.append((key, "lost", term, self.locks.name, reason[:500],
                             self.database_time()))

    def database_time(self) -> datetime | None:
        """Return the database clock now, as the last verify read it (None: never read).

        A lost key's event is dated by the database's clock, not this host's; None lets
        the database date it when it is written.
        """
        if self.db_now is None:
            return None
        return self.db_now + timedelta(seconds=time.monotonic() - self.db_now_at)

    def lose_all(self, reason: str) -> None:
        """Treat every held key as lost and drop the broken connection."""
        for key in list(self.held):
            self._lost(key, reason)
        self.locks.close()
        self._went_offline(Exception(reason))

    def stand_by(self, reason: str) -> None:
        """Treat every held key as lost and close the lock session, which is not down but
        given up: this process stops competing (its instance's candidacy moved)."""
        for key in list(self.held):
            self._lost(key, reason)
        self.locks.close()
        self.online, self.offline_since = None, None

    def step_down(self, key: int, detail: str, cooldown: float) -> None:
        """Release key and stay away from it for cooldown seconds so a standby wins it."""
        self.release(key, detail)
        self.cooldown[key] = time.monotonic() + cooldown

    def release(self, key: int, detail: str) -> None:
        """Release one held key, recording it and notifying the standbys."""
        term = self.held.pop(key, None)
        if term is None:
            return
        try:
            if not self.locks.release(key, term, detail):
                log.warning("lost leadership of key %#x: unlock returned false", key)
                self.pending.append((key, "lost", term, self.locks.name,
                                     "unlock returned false", self.database_time()))
        except LOCK_ERRORS as exc:
            log.warning("could not release key %#x cleanly (%s); closing the session", key, exc)
            self.locks.close()

    def release_all(self, detail: str) -> None:
        """Hand every held key over (graceful stop)."""
        for key in list(self.held):
            self.release(key, detail)
