"""The plugin key's leadership a claim is made under: its term and its holder, checked as one.

Every write of the plugin leader (webhook and hook claims, timer-run claims, its
bookkeeping) is fenced by Lead.holds(): leader_state's term AND holder are this
leader's. A claim whose (term, holder) is not the current one is stale: a new
leadership takes the previous ones' unfinished claims at once, whatever their term
numbers say.
"""

from dataclasses import dataclass

import sqlalchemy as sa

from ..extensions import db
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
