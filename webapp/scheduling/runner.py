"""The scheduler thread: leadership kept up to date and the ticks of the keys it leads.

One thread per worker process. It keeps the process's leadership up to date
(polling as a follower, heartbeating as a leader), runs the tick of every key
it leads when that tick is due, and sleeps until the next thing to do or until
a NOTIFY wakes it.
"""

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial

from flask import Flask

from ..db import (
    HANDOVER_CHANNEL,
    WAKE_CHANNEL,
    client_keepalives,
    database_now,
    is_sqlite_url,
    server_options,
)
from ..extensions import db
from ..leadership import lock_session
from ..leadership.base import LOCK_ERRORS
from ..leadership.election import RECONNECT_MAX, RECONNECT_MIN, Leadership
from ..leadership.fence import record_work
from ..leadership.keys import KEYS, PLUGINS, PUBLISH
from ..leadership.local import LOCAL_POLL, LocalLease, lease_path
from ..models import LeaderEvent
from ..ops.budget import check_connection_budget
from ..ops.metrics import observe_tick
from . import plugin_tick, publish, workers
from .engines import Engines, working_on
from .wakeup import Waiter
from .watch import Watch

log = logging.getLogger("soloist.scheduler")

IDLE_RECHECK_PG = 10.0  # NOTIFY wakes us sooner; this only bounds a missed one
IDLE_RECHECK_SQLITE = 0.5  # no NOTIFY in SQLite mode
TICK_ERROR_RETRY = 5.0
LOOP_ERROR_MAX = 5.0  # longest back-off after the loop itself failed
MAX_DEFER = 2.0  # longest a publish backlog keeps the other keys' ticks waiting
DRAIN_SECONDS = 10.0  # well inside gunicorn's graceful_timeout (25 s) minus the hand-over
DB_ERRORS = LOCK_ERRORS


class Scheduler:
    """Leadership plus the ticks of the keys this process leads."""

    def __init__(self, app: Flask, locks=None, engines: Engines | None = None) -> None:
        cfg = app.config
        self.app = app
        # the ticks' own connection and plugin work's own pool (engines.build), so neither
        # waits behind web requests; without them, the app's pool
        self.engines = engines or Engines()
        self.locks = locks or lock_session(cfg["LOCK_DATABASE_URL"], cfg["INSTANCE_NAME"],
                                           server_options(cfg), client_keepalives(cfg),
                                           cfg["LOCK_ALLOW_POOLER"])
        # reconnect at least as often as a follower polls: keys led again soon after an outage
        self.leadership = Leadership(
            self.locks, [k.value for k in KEYS.values()], cfg["LEADER_STALE_SECONDS"],
            reconnect_max=min(RECONNECT_MAX, cfg["FOLLOWER_POLL_SECONDS"]))
        self.ticks: dict[int, Callable[..., datetime | None]] = {
                      PUBLISH.value: publish.tick,
                      PLUGINS.value: partial(plugin_tick.tick, plugin_engine=self.engines.plugins)}
        self.names = {k.value: k.name for k in KEYS.values()}
        self.poll_seconds = cfg["FOLLOWER_POLL_SECONDS"]
        self.heartbeat_seconds = min(1.0, cfg["LEADER_STALE_SECONDS"] / 4)
        sqlite = is_sqlite_url(cfg["LOCK_DATABASE_URL"])
        self.idle_recheck = IDLE_RECHECK_SQLITE if sqlite else IDLE_RECHECK_PG
        self.waiter = Waiter()
        self.due: dict[int, float] = {}
        self.next_poll = 0.0
        self.next_heartbeat = 0.0
        self.deferred_since: float | None = None
        self._stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.budget_checked = sqlite
        self.stale_seconds = cfg["LEADER_STALE_SECONDS"]
        self.failures = 0  # failed loop iterations in a row
        # ops.no_leader, the dead-man's switch
        self.watch = Watch(self.app, self.locks.name, self.engines.ticks)
        # PostgreSQL: one candidate per instance (webapp.leadership.local); SQLite is one host
        self.lease = None if sqlite else LocalLease(
            lease_path(cfg["LEASE_DIR"], cfg["LOCK_DATABASE_URL"], cfg["INSTANCE_NAME"]),
            cfg["LEADER_STALE_SECONDS"])
        self.next_ping: float | None = None
        self.step_started: float | None = None  # monotonic start of the step in hand

    @property
    def alive(self) -> bool:
        """Return whether the scheduler thread is running."""
        return self.thread is not None and self.thread.is_alive()

    def problems(self) -> list[str]:
        """Say what keeps this process's scheduler from leading, for /readyz."""
        found = []
        if not self.alive and not self._stopping.is_set():
            found.append("scheduler thread is not running")
        down = self.leadership.offline_for()
        if down > self.stale_seconds:
            found.append(f"lock session down for {down:.0f} s")
        if self.lease is not None and not self.lease.held:  # standing by: the candidate's
            pid, _age, offline = self.lease.read()
            if offline is not None and offline > self.stale_seconds:
                found.append(f"this instance's candidate (worker {pid}) has had no lock "
                             f"session for {offline:.0f} s")
        started = self.step_started
        if started is not None and time.monotonic() - started > self.stale_seconds * 0.75:
            found.append(f"scheduler stuck in one step for {time.monotonic() - started:.0f} s")
        return found

    def request_stop(self) -> None:
        """Hand leadership over as soon as the unit of work in hand is done (SIGTERM).

        Safe in a signal handler: it sets a flag, writes a byte and cancels a wait in the
        server's lock queue (so a sibling stopping too is not handed the key); the thread
        does the rest.
        """
        self._stopping.set()
        self.leadership.stop()  # a step in hand polls no more: it would hand the keys back
        self.waiter.interrupt()
        self.locks.interrupt()

    def start(self) -> None:
        """Start the scheduler thread."""
        self.thread = threading.Thread(target=self.run, name="soloist-scheduler", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 20.0) -> bool:
        """Finish the unit of work in hand, hand leadership over, and stop."""
        self.request_stop()
        if self.thread is not None:
            self.thread.join(timeout)
            if self.thread.is_alive():
                log.error("scheduler did not stop within %.0f s; dropping its locks", timeout)
                self.locks.close()
                return False
        return True

    def run(self) -> None:
        """Loop until stopped: step, then sleep until the next thing to do."""
        log.info("scheduler started as %s", self.locks.name)
        while not self._stopping.is_set():
            try:
                self.step_started = time.monotonic()
                try:
                    delay = self.step()
                finally:
                    self.step_started = None
                if not self._stopping.is_set():
                    self.wait(delay)
                self.failures = 0
            except Exception:  # nothing may end this thread: log the first failure, back off
                self._failed()
        self.shutdown()

    def _failed(self) -> None:
        self.failures += 1
        if self.failures == 1:
            log.exception("scheduler loop failed; retrying with back-off")
        delay = min(LOOP_ERROR_MAX, 0.1 * 2 ** self.failures) * random.uniform(0.5, 1.0)
        self._stopping.wait(delay)  # stop() still ends the back-off at once

    def shutdown(self) -> None:
        """Release every key (recorded, with NOTIFY) and close the lock session."""
        try:
            self.leadership.release_all("graceful stop")
        except DB_ERRORS as exc:
            log.warning("could not hand over cleanly: %s", exc)
        finally:
            self.locks.close()
            if self.lease is not None:
                self.lease.release()  # a sibling that runs on is the candidate now
        # Hand over first (fast), then let plugin runs in flight record their results.
        if not workers.drain(DRAIN_SECONDS):
            log.warning("plugin runs still in flight after %.0f s; the next leader will "
                        "time them out", DRAIN_SECONDS)
        self.engines.close()  # the ticks' and plugins' own connections end with it
        log.info("scheduler stopped")

    def wait(self, delay: float) -> None:
        """Sleep up to delay; a notification, a key won or stop() wakes it early.

        A standby that holds nothing waits in the server's lock queue instead, so a key
        whose holder goes away is taken at once rather than at the next poll. Whatever
        the lock session does (down, failing, a wait cut short), the rest of delay is
        slept: no path of the loop spins.
        """
        deadline = time.monotonic() + delay
        won, notes = self._wait_in_queue(delay)
        rest = deadline - time.monotonic()
        if not won and not notes and rest > 0 and not self._stopping.is_set():
            try:
                notes = self.waiter.wait(self.locks, rest)
            except DB_ERRORS as exc:  # the socket broke while asleep: sleep on without it
                self._lose_all(f"lock connection failed while waiting: {exc}")
                self.waiter.wait(self.locks, deadline - time.monotonic())
        self._note(won or [], notes)

    def _wait_in_queue(self, delay: float) -> tuple[list[int] | None, list]:
        """Wait for a missing key in the server's lock queue when this worker can; return
        the keys won (None: it did not wait) and the notifications that arrived."""
        if (self.lease is not None and not self.lease.held) or not self.locks.connected:
            return None, []  # a sibling stands by, or the session is down: a plain sleep
        try:
            won = self.leadership.wait(delay)
            return won, self.locks.notifies() if won is not None else []
        except DB_ERRORS as exc:
            self._lose_all(f"lock connection failed while waiting: {exc}")
            return None, []

    def _note(self, won: list[int], notes: list) -> None:
        """Make the keys won due now, and act on the notifications."""
        now = time.monotonic()
        for key in won:
            self.due[key] = now
            self.next_poll = now  # the other keys came free with it, most likely
        for note in notes:
            if note.channel == HANDOVER_CHANNEL:
                self.next_poll = now
            elif note.channel == WAKE_CHANNEL and note.payload in KEYS:
                self.due[KEYS[note.payload].value] = now

    def step(self) -> float:
        """Do what is due now; return seconds until the next thing to do."""
        if self.lease is not None and not self._candidate(self.lease):
            return LOCAL_POLL
        if not self.leadership.ensure_connected():
            if self.leadership.refused:  # the database is up, the lock session refused there
                self._record_pending()
            return max(self.leadership.retry_in(), RECONNECT_MIN)
        try:
            self._check_budget_once()
            self._follow()
            self._lead()
            self.next_ping = self.watch.ping_deadman(PUBLISH.value in self.leadership.held)
        except DB_ERRORS as exc:
            self._lose_all(f"lock connection failed: {exc}")
            return RECONNECT_MIN
        if self.leadership.pending:  # a verify found its keys gone
            self._record_pending()
        if not self.leadership.held:
            self._close_tick_connections()
        return self._sleep_for()

    def _close_tick_connections(self) -> None:
        """Close the ticks' connection of a process that leads nothing (a standby wrote an
        alert or an event through it, or it just lost its keys): followers cost the
        database their lock session only; the next lead opens it again."""
        self.engines.close(idle_only=True)

    def _candidate(self, lease: LocalLease) -> bool:
        """Return whether this worker is its instance's candidate, taking the lease if free.

        A worker that finds a sibling broke its lease (it was frozen) drops its keys and
        its lock session and stands by; the lost events are written through the ticks'
        connections, since it will not reconnect.
        """
        if lease.held:
            if lease.still_held():
                lease.beat()
                down = self.leadership.offline_for()
                lease.say_offline(down)
                return True
            log.error("a sibling took over this instance's candidacy while this worker "
                      "was not stamping it (frozen?); standing by")
            self.leadership.stand_by("this instance's candidacy went to a sibling")
            self._record_pending()
            self._close_tick_connections()
            return False
        if self._stopping.is_set() or not lease.take():
            return False  # a stopping worker does not become the candidate
        log.info("now this instance's candidate (worker %d)", os.getpid())
        self.next_poll = 0.0
        return True

    def _lose_all(self, reason: str) -> None:
        """Drop every key; the events are written when the lock session is back (at once,
        if the database is up: the next step reconnects), never through a connection that
        may hang on a vanished server first."""
        self.leadership.lose_all(reason)

    def _record_pending(self) -> None:
        """Write lost-leadership events now, through the ticks' connections.

        The lock session is refused (a pooler in its way) while the database is up: the
        history should say "lost" now, not once someone mends the settings.
        """
        pending = self.leadership.take_pending()
        if not pending:
            return
        # twice: a frozen leader thaws to find its connections ended by its evictor, and the
        # first statement on a pooled one is what tells the pool so (a stand-by writes no
        # later: it has no lock session); a second failure means the database is away
        for attempt in (1, 2):
            with working_on(self.app, self.engines.ticks):
                try:
                    stamp = database_now()  # for an event whose database time is unknown
                    db.session.add_all(
                        LeaderEvent(key=key, kind=kind, term=term, holder=holder,
                                    detail=detail, at=at or stamp)
                        for key, kind, term, holder, detail, at in pending)
                    db.session.commit()
                    return
                except Exception:  # the database is away: the lock session writes them later
                    db.session.rollback()
                    if attempt == 2:
                        self.leadership.pending[:0] = pending

    def _check_budget_once(self) -> None:
        if not self.budget_checked:
            self.budget_checked = True
            check_connection_budget(self.locks, self.app.config)

    def _follow(self) -> None:
        now = time.monotonic()
        if self.leadership.missing and now >= self.next_poll:
            for key in self.leadership.poll():
                self.due[key] = now
            self.next_poll = now + self.poll_seconds * random.uniform(0.8, 1.2)
            self.watch.unled(self.leadership.unled.values())

    def _lead(self) -> None:
        if not self.leadership.held:
            return
        now = time.monotonic()
        due = sorted((k for k in self.leadership.held if self.due.get(k, 0) <= now),
                     key=lambda k: k != PUBLISH.value)  # publishing first
        if not due and now >= self.next_heartbeat:
            self._verify()
        for key in due:
            self._verify()  # re-verify before each unit of work
            if key in self.leadership.held and not self._stopping.is_set():
                self._tick(key)
            if self._keep_publishing(key, others=len(due) > 1):
                break

    def _keep_publishing(self, key: int, others: bool) -> bool:
        """Return whether to go on with a publish backlog before the other keys' ticks.

        A burst of due posts is published batch after batch; other keys wait, but never
        longer than MAX_DEFER seconds.
        """
        now = time.monotonic()
        if key != PUBLISH.value or self.due.get(key, now + 1) > now or not others:
            self.deferred_since = None
            return False
        self.deferred_since = self.deferred_since or now
        return now - self.deferred_since < MAX_DEFER

    def _verify(self) -> None:
        if self.lease is not None:
            self.lease.beat()  # before each unit of work too: a long tick is not a freeze
        still = self.leadership.verify()
        self.next_heartbeat = time.monotonic() + self.heartbeat_seconds
        self._step_down_if_asked(still)

    def _step_down_if_asked(self, still: dict[int, bool]) -> None:
        for key, asked in still.items():
            if asked:
                log.info("stepping down from key %#x as asked", key)
                self.leadership.step_down(key, "step down requested", 3 * self.poll_seconds)

    def _tick(self, key: int) -> None:
        started = time.monotonic()
        now = self.leadership.db_now
        if now is None:  # never: the verify before a tick reads the database's clock
            raise RuntimeError("a tick before the database's clock was read")
        with working_on(self.app, self.engines.ticks):
            try:
                upcoming = self.ticks[key](now, self.locks.name,
                                           term=self.leadership.held.get(key, 0))
            except Exception as exc:  # one failed tick must not stop the scheduler
                log.exception("tick of key %#x failed", key)
                db.session.rollback()
                self._record_failure(key, now, exc)
                self.due[key] = time.monotonic() + TICK_ERROR_RETRY
                return
            finally:
                observe_tick(self.names[key], time.monotonic() - started)
        elapsed = time.monotonic() - started
        delay = self.idle_recheck
        if upcoming is not None:
            delay = min(delay, (upcoming - now).total_seconds() - elapsed + 0.002)
        self.due[key] = time.monotonic() + max(0.0, delay)

    def _record_failure(self, key: int, now, exc: Exception) -> None:
        try:
            record_work(key, now, f"error: {type(exc).__name__}: {exc}",
                        term=self.leadership.held.get(key, 0), holder=self.locks.name)
        except Exception:
            log.exception("could not record the failed tick")
            db.session.rollback()

    def _sleep_for(self) -> float:
        now = time.monotonic()
        moments = [now + self.idle_recheck]
        if self.leadership.missing:
            moments.append(self.next_poll)
        if self.leadership.held:
            moments.append(self.next_heartbeat)
            moments.extend(self.due.get(k, now) for k in self.leadership.held)
        moments.extend(t for t in self.leadership.cooldown.values() if t > now)
        if self.next_ping is not None:
            moments.append(self.next_ping)
        return max(0.0, min(moments) - now)
