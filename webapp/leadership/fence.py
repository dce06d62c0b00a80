"""Fencing, in one place: every write a leader makes holds only while it still leads.

A leadership is a key's term AND its holder (the lock session's name, which carries the
process's boot id and the session's nonce), and only while its term is open: leads() is
the fence of every leader's write. Lead is the plugin key's leadership a claim is made
under (webhook and hook claims, timer runs), and gone() says which claims' holders have
ended, so a successor takes another leadership's claim only once its holder's process is
gone or its lease has run out: a leader that handed over (a deploy's SIGTERM) may still
be sending, and the successor must not send the same thing beside it. record_work writes
a key's last unit of work under the same fence.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import QueryableAttribute

from ..db import boot_id
from ..extensions import db
from ..models import LeaderState
from . import current_view
from .base import process_of
from .keys import PLUGINS


def leads(key: int, term: int, holder: str) -> sa.ColumnElement[bool]:
    """Return whether (term, holder) is key's leadership now: the fence of a leader's writes.

    Equality on both, not term >= current: a lossy failover can hand a term number out
    again, but not the holder, whose lock session name carries a nonce taken at acquire.
    And only while the term is open (holder_pid set): a release or an eviction clears it
    in the statement that ends the term, so a leadership that handed over or was evicted
    is fenced out at once, not only once its successor's acquire commits.
    The unled (0, "") leads a key nobody ever led (tests, and ticks called by hand).
    """
    if (term, holder) == (0, ""):
        return ~sa.exists().where(LeaderState.key == key)
    return sa.exists().where(LeaderState.key == key, LeaderState.term == term,
                             LeaderState.holder == holder, LeaderState.holder_pid.is_not(None))


@dataclass(frozen=True)
class Lead:
    """One leadership of the plugin key: the term and the lock session name (holder)."""

    term: int = 0
    holder: str = ""

    @classmethod
    def current(cls) -> "Lead":
        """Return the plugin key's leadership now ((0, "") before anyone led it)."""
        row = db.session.execute(sa.select(LeaderState.term, LeaderState.holder).where(
            LeaderState.key == PLUGINS.value)).first()
        return cls(*row) if row is not None else cls()

    @classmethod
    def of(cls, term: int | None, holder: str) -> "Lead":
        """Return the leadership a tick was called with: (term, holder), or the current one."""
        return cls.current() if term is None else cls(term, holder[:200])

    def holds(self) -> sa.ColumnElement[bool]:
        """Return the fence: this is the plugin key's leadership now."""
        return leads(PLUGINS.value, self.term, self.holder)

    def other(self, term: QueryableAttribute[int],
              holder: QueryableAttribute[str]) -> sa.ColumnElement[bool]:
        """Return whether a claim's (term, holder) columns name another leadership."""
        return sa.or_(term != self.term, holder != self.holder)

    def mark(self) -> dict:
        """Return the claim columns' values of this leadership."""
        return {"claimed_term": self.term, "claimed_holder": self.holder}


def gone(holders: Iterable[str]) -> list[str]:
    """Return the holders (lock session names) among holders whose process has ended.

    A name without a boot id names no process we can ask about: gone. This process's own
    names are never gone (its threads re-check their claims themselves). Computed here,
    in Python, and passed to the claim queries as a list: SQLite has no pg_stat_activity.
    """
    found = []
    for holder in sorted(set(holders)):
        boot = process_of(holder)
        if boot != boot_id() and not (boot and current_view().process_alive(boot)):
            found.append(holder)
    return found


def record_work(key: int, now: datetime, result: str, *, term: int | None = None,
                holder: str = "") -> None:
    """Record the last unit of work a key's leader did and its result.

    With term (and holder, the lock session's name) it is written only while that is
    still the key's leadership: a deposed leader's late tick cannot overwrite its
    successor's. Without, it is written whoever leads (kept for callers that have no term).
    """
    fenced = [] if term is None else [LeaderState.term == term, LeaderState.holder == holder]
    db.session.execute(
        sa.update(LeaderState)
        .where(LeaderState.key == key, *fenced)
        .values(last_work_at=now, last_result=result[:500])
    )
    db.session.commit()
