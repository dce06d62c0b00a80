"""Model the scheduler's leadership: each key's current state and its history."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import BigId, UTCDateTime, utcnow


class LeaderState(Model):
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


class LeaderEvent(Model):
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


class ProcessVersion(Model):
    """The code one process runs, recorded by its lock session when it connects.

    Keyed by the process's boot id (the part of its application_name that never repeats):
    the status page shows each lock session's version, and a contract step refuses to run
    while a lock session's code is older than it allows (webapp.ops.release.fleet).
    """

    __tablename__ = "process_versions"

    boot: Mapped[str] = mapped_column(sa.String(16), primary_key=True)
    instance: Mapped[str] = mapped_column(sa.String(200))
    pid: Mapped[int]
    version: Mapped[str] = mapped_column(sa.String(200))
    source: Mapped[str] = mapped_column(sa.String(40))  # the variable, git, or package
    schema_head: Mapped[str] = mapped_column(sa.String(32))  # the newest migration it ships
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
