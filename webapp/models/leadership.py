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
