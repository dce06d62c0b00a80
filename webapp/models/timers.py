"""Model timers: stored schedules for plugin actions and the record of each run."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import BigId, UTCDateTime, utcnow


class Timer(Model):
    """A stored schedule that runs one plugin action."""

    __tablename__ = "timers"
    __table_args__ = (
        sa.UniqueConstraint("plugin", "default_key", name="uq_timers_plugin_default_key"),
        sa.Index("ix_timers_next_run_at", "next_run_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(100))
    plugin: Mapped[str] = mapped_column(sa.String(64))
    action: Mapped[str] = mapped_column(sa.String(64))
    params: Mapped[dict] = mapped_column(sa.JSON, default=dict)
    default_key: Mapped[str | None] = mapped_column(sa.String(64))  # set for a plugin's own
    kind: Mapped[str] = mapped_column(sa.String(8))  # every | cron | once
    every: Mapped[int | None]
    unit: Mapped[str | None] = mapped_column(sa.String(8))
    cron: Mapped[str | None] = mapped_column(sa.String(120))
    run_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    start_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    timezone: Mapped[str] = mapped_column(sa.String(64), default="UTC")
    paused: Mapped[bool] = mapped_column(default=False)
    paused_reason: Mapped[str] = mapped_column(sa.String(500), default="")
    misfire: Mapped[str] = mapped_column(sa.String(16), default="run_once")
    grace_seconds: Mapped[int] = mapped_column(default=60)
    max_runtime_seconds: Mapped[int] = mapped_column(default=300)
    max_failures: Mapped[int] = mapped_column(default=5)
    consecutive_failures: Mapped[int] = mapped_column(default=0)
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    @property
    def qualified_action(self) -> str:
        """Return plugin.action."""
        return f"{self.plugin}.{self.action}"


class TimerRun(Model):
    """One slot of a timer: claimed (UNIQUE per slot) before it runs, then its outcome."""

    __tablename__ = "timer_runs"
    __table_args__ = (
        sa.UniqueConstraint("timer_id", "scheduled_for", name="uq_timer_runs_slot"),
        sa.Index("ix_timer_runs_status", "status"),
    )

    STATUSES = ("queued", "running", "succeeded", "failed", "timed_out", "skipped", "abandoned")

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    timer_id: Mapped[int] = mapped_column(sa.ForeignKey("timers.id", ondelete="CASCADE"))
    scheduled_for: Mapped[datetime] = mapped_column(UTCDateTime)
    trigger: Mapped[str] = mapped_column(sa.String(16), default="schedule")
    status: Mapped[str] = mapped_column(sa.String(16))
    queued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    duration_seconds: Mapped[float | None] = mapped_column(sa.Float)
    result: Mapped[str] = mapped_column(sa.String(500), default="")
    error: Mapped[str] = mapped_column(sa.Text, default="")
    # the holder that started it; the column keeps its name for the release running beside
    instance: Mapped[str] = mapped_column(sa.String(200), default="")
    # the leadership of the plugin key that claimed it; a run still running under
    # another is an orphan (its process died or lost the key) and is settled at once
    claimed_term: Mapped[int] = mapped_column(default=0, server_default="0")
    claimed_holder: Mapped[str] = mapped_column(sa.String(200), default="", server_default="")
