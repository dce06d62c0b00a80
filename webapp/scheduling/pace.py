"""A tick's pace: when it hands back to the runner, and how many rows one batch takes.

The runner heartbeats between ticks only, so a tick that runs long looks like a frozen
leader to its standbys. A tick works for a budget (LEADER_STALE_SECONDS / 4) and then
returns "due now"; a batch is sized so that one alone stays under half the stale bound
however slow the database is per row, and grows back when the database is fast again.
"""

import logging
import time
from collections.abc import Callable, Sized

import sqlalchemy as sa
from flask import current_app

from ..extensions import db
from .plugin_tick import BUDGET_SHARE

log = logging.getLogger("soloist.scheduler")

BATCH_SHARE = 2  # one batch at most LEADER_STALE_SECONDS / 2, the statement timeout's bound
CANCELLED_SHRINK = 4  # a batch the statement timeout ended: a quarter of it next time
QUERY_CANCELED = "57014"
monotonic = time.monotonic  # the pace's clock (tests move it)


class Pace:
    """A batch size fitted to how long batches take, kept by a process across its ticks."""

    def __init__(self, largest: int) -> None:
        self.largest = self.size = largest
        self.last = 0.0  # seconds the last batch took
        self.longest = self.expect = 0.0  # the longest batch this tick, and last tick
        self.before: tuple[int, float] | None = None  # (size, seconds) before the last shrink
        self.floor = 0.0  # what a batch takes however small (a cost a statement), once seen
        self.queue: list[str] = []  # what a tick cut short had left of its round
        self.full: set[str] = set()  # the kinds that round found with more due
        self.deadline = self.target = 0.0

    @classmethod
    def of(cls, name: str, largest: int) -> "Pace":
        """Return this process's pace for name (kept with the app), made on first use."""
        paces = current_app.extensions.setdefault("soloist.paces", {})
        return paces.setdefault(name, cls(largest))

    def start(self) -> None:
        """Start a tick: its budget runs from now."""
        stale = float(current_app.config["LEADER_STALE_SECONDS"])
        self.expect, self.longest = self.longest, 0.0
        self.deadline = monotonic() + stale / BUDGET_SHARE
        self.target = stale / BATCH_SHARE

    def over(self) -> bool:
        """Return whether another batch as long as the longest of this tick or the last
        would end past the budget (an empty batch is quick, the next kind's may not be)."""
        return monotonic() + max(self.longest, self.expect) >= self.deadline

    def run(self, batch: Callable[[int], Sized]) -> tuple[int, bool]:
        """Run batch(size); return (rows it moved, whether more may be due).

        A batch the server's statement timeout ended is rolled back and counts as none
        moved, more due: the next one is much smaller.
        """
        size, started, moved = self.size, monotonic(), None
        try:
            moved = len(batch(size))
        except sa.exc.DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) != QUERY_CANCELED:
                raise
            db.session.rollback()
        finally:
            self.last = monotonic() - started
            self.longest = max(self.longest, self.last)
        if moved is None:  # its cost is unknown: only that it was too much
            self.size, self.before = max(1, size // CANCELLED_SHRINK), None
            log.warning("a batch of %d took past the statement timeout (%.1f s); trying %d",
                        size, self.last, self.size)
            return 0, True
        self._fit(size, moved)
        return moved, moved >= size

    def _fit(self, size: int, moved: int) -> None:
        """Fit the next batch's size to how long this one took.

        Longer than the target (and than twice the floor): shrink it to take half the
        target, as if the cost were a row's. A shrunk batch hardly faster than the one
        before: the cost is a statement's, so take the bigger size back and keep that time
        as the floor. A full one under a third of the target: double it (a doubled one
        stays under the target), and forget the floor.
        """
        took, before, self.before = self.last, self.before, None
        if before is not None and moved >= size and took > before[1] / 2:
            self.size, self.floor = before[0], took
        elif moved and took > max(self.target, 2 * self.floor):
            self.before = (size, took)
            self.size = max(1, min(size, int(moved * self.target / took / 2)))
        elif took < self.target / 3:
            self.floor = 0.0
            if moved >= size:
                self.size = min(self.largest, size * 2)
