"""Model the scheduler's leadership: each key's current state and its history."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import BigId, UTCDateTime, utcnow


class LeaderState(db.Model):
    """The current term, holder and heartbeat of one scheduler key."""

    __tablename__ = "leader_state"

    key: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    term: Mapped[int] = mapped_column(default=0)
    holder: Mapped[str] = mapped_column(sa.String(200), default="")
    holder_pid: Mapped[int | None]
    acquired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_work_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_result: Mapped[str] = mapped_column(sa.String(500), default="")
    step_down_requested: Mapped[bool] = mapped_column(default=False)


class LeaderEvent(db.Model):
    """One change of leadership: acquired, released, lost or evicted."""

    __tablename__ = "leader_events"
    __table_args__ = (sa.Index("ix_leader_events_key_at", "key", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    key: Mapped[int] = mapped_column(sa.BigInteger)
    kind: Mapped[str] = mapped_column(sa.String(16))
    term: Mapped[int] = mapped_column(default=0)
    holder: Mapped[str] = mapped_column(sa.String(200), default="")
    detail: Mapped[str] = mapped_column(sa.String(500), default="")
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


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
