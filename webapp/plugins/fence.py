"""The plugin key's leadership a claim is made under: its term and its holder, checked as one.

Every write of the plugin leader (webhook and hook claims, timer-run claims, its
bookkeeping) is fenced by Lead.holds(): leader_state's term AND holder are this
leader's, and its term is open. A claim made under another leadership is taken over
only once its holder's process is gone (gone(): known by the boot id in the holder's
name) or its lease has run out: a leader that handed over (a deploy's SIGTERM) may
still be sending, and the successor must not send the same thing beside it.
"""

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from ..db import boot_id
from ..extensions import db
from ..leadership import current_view
from ..leadership.base import process_of
from ..leadership.keys import PLUGINS
from ..models import LeaderState
from ..models.leadership import leads


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

    def other(self, term: sa.Column, holder: sa.Column) -> sa.ColumnElement[bool]:
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
