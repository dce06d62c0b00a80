"""What the scheduler thread reports besides its ticks: leaderless keys and the dead-man's switch.

A standby sees, at each poll, the age of every key another process holds: its heartbeat,
or what its lock session last did when it recorded none (a session frozen before its term
was recorded, a plain session, one that outlived its eviction). When one is older than
OPS_NO_LEADER_SECONDS and the holder has not been evicted (eviction failed, or
LEADER_STALE_SECONDS is longer), the key has no working leader: the standby writes
ops.no_leader, once per term fleet-wide (webapp.ops.alerts dedupes it). An unknown age means
nobody held the key when it was polled: nothing to report.

The dead-man's switch is the other way round: the publish leader, and only it, pings
DEADMAN_URL every DEADMAN_EVERY_SECONDS, so a monitor such as healthchecks.io raises the
alarm when the pings stop: nobody leads (or no process runs at all). Each ping is a GET
in a thread of its own with a short timeout, never in the scheduler's loop.
"""

import http.client
import logging
import threading
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import sqlalchemy as sa
from flask import Flask

from ..db import database_now
from ..extensions import db
from ..leadership.base import PollRow, silence
from ..leadership.keys import by_value
from ..ops import alerts
from ..plugins.net import UnsafeURL, request, shown
from .engines import working_on

log = logging.getLogger("soloist.scheduler")

PING_TIMEOUT = 10.0


class Deadman:
    """Ping a URL every so often while leading the publish key, from a thread of its own.

    The URL is a bearer secret (whoever has it can fake the pings): logs show its host only.
    """

    def __init__(self, url: str, every: float, holder: str, allow_private: bool,
                 send: Callable[..., int] = request) -> None:
        self.url, self.every, self.holder = url, every, holder
        self.allow_private = allow_private
        self.send = send
        self.next_at: float | None = None  # monotonic time of the next ping, while leading
        self.thread: threading.Thread | None = None

    def step(self, leading: bool, now: float) -> float | None:
        """Ping if leading and it is time; return when the next ping is due (None: not leading).

        A leader pings at once, then every `every` seconds; a ping still waiting for its
        answer is not doubled.
        """
        if not leading:
            self.next_at = None
            return None
        if self.next_at is None or now >= self.next_at:
            self.next_at = now + self.every
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self.ping, name="soloist-deadman",
                                               daemon=True)
                self.thread.start()
        return self.next_at

    def ping(self) -> int | None:
        """GET the URL once; return the status (None when it could not be reached)."""
        # the header keeps the name monitors already match on; it carries the holder
        headers = {"User-Agent": "Soloist-Deadman/1", "X-Soloist-Instance": self.holder}
        timeout = min(PING_TIMEOUT, max(self.every / 2, 0.5))
        try:
            status = self.send("GET", self.url, None, headers, timeout, self.allow_private)
        except (UnsafeURL, OSError, http.client.HTTPException) as exc:
            log.warning("dead-man's switch %s not reached: %s", shown(self.url),
                        self._scrubbed(str(exc)))
            return None
        if not 200 <= status < 300:
            log.warning("dead-man's switch %s answered HTTP %s", shown(self.url), status)
        return status


    def _scrubbed(self, message: str) -> str:
        """Return an error's message with the URL, or its path and query, cut out."""
        parts = urlsplit(self.url)
        secret = parts.path + (f"?{parts.query}" if parts.query else "")
        message = message.replace(self.url, shown(self.url))
        return message.replace(secret, "/…") if len(secret) > 1 else message


class Watch:
    """The scheduler's reports: ops.no_leader as a standby, pings as the publish leader."""

    def __init__(self, app: Flask, holder: str, engine: sa.Engine | None = None) -> None:
        cfg = app.config
        self.app, self.holder = app, holder
        self.engine = engine  # the ticks' (None: the app's pool)
        self.no_leader_seconds = cfg["OPS_NO_LEADER_SECONDS"]
        self.reported: set[tuple[int, int]] = set()  # (key, term) this process wrote
        self.deadman = Deadman(cfg["DEADMAN_URL"], cfg["DEADMAN_EVERY_SECONDS"], holder,
                               cfg["WEBHOOK_ALLOW_PRIVATE"]) if cfg["DEADMAN_URL"] else None

    def unled(self, rows: Iterable[PollRow]) -> None:
        """Report each key whose holder is silent longer than OPS_NO_LEADER_SECONDS."""
        for row in rows:
            key = by_value(row.key)
            age = row.heartbeat_age
            if key is None or age is None or age < self.no_leader_seconds:
                continue
            if (row.key, row.term) in self.reported:
                continue
            with working_on(self.app, self.engine):
                try:
                    if alerts.no_leader(key, row.term, age, database_now(), self.holder):
                        log.error("key %s has had no working leader (%s)", key.name,
                                  silence(age, row.recorded))
                    self.reported.add((row.key, row.term))
                except Exception:  # the alert waits for the next poll; the loop goes on
                    log.exception("could not record that key %s has no leader", key.name)
                    db.session.rollback()

    def ping_deadman(self, leading: bool) -> float | None:
        """Ping the dead-man's switch if due; return the monotonic time of the next ping."""
        if self.deadman is None:
            return None
        return self.deadman.step(leading, time.monotonic())
