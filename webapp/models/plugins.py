"""Models for plugins, timers, hook deliveries and webhooks."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .core import UTCDateTime, utcnow

__all__ = [
    "HookDelivery",
    "PluginDocument",
    "PluginState",
    "Timer",
    "TimerRun",
    "WebhookDelivery",
    "WebhookEndpoint",
]

BigId = sa.BigInteger().with_variant(sa.Integer, "sqlite")


class PluginState(db.Model):
    """Whether an admin has switched a plugin off (no row: on)."""

    __tablename__ = "plugin_states"

    name: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    enabled: Mapped[bool] = mapped_column(default=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Timer(db.Model):
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


class TimerRun(db.Model):
    """One slot of a timer: claimed (UNIQUE per slot) before it runs, then its outcome."""

    __tablename__ = "timer_runs"
    __table_args__ = (
        sa.UniqueConstraint("timer_id", "scheduled_for", name="uq_timer_runs_slot"),
        sa.Index("ix_timer_runs_status", "status"),
    )

    STATUSES = ("queued", "running", "succeeded", "failed", "timed_out", "skipped")

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
    instance: Mapped[str] = mapped_column(sa.String(200), default="")


class HookDelivery(db.Model):
    """One outbox event handed to one plugin's hook, retried until it succeeds."""

    __tablename__ = "hook_deliveries"
    __table_args__ = (
        sa.UniqueConstraint("plugin", "event_id", name="uq_hook_deliveries_plugin_event"),
        sa.Index("ix_hook_deliveries_due", "status", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    plugin: Mapped[str] = mapped_column(sa.String(64))
    hook: Mapped[str] = mapped_column(sa.String(32))
    event_id: Mapped[int] = mapped_column(
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        sa.ForeignKey("outbox_events.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(sa.String(16), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    instance: Mapped[str] = mapped_column(sa.String(200), default="")
    last_error: Mapped[str] = mapped_column(sa.String(500), default="")
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookEndpoint(db.Model):
    """An admin's webhook receiver; the secret signs bodies and is never shown again."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(sa.String(2000))
    description: Mapped[str] = mapped_column(sa.String(200), default="")
    events: Mapped[list] = mapped_column(sa.JSON, default=list)
    secret: Mapped[str] = mapped_column(sa.String(200))
    active: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    def __repr__(self) -> str:  # never the secret
        return f"<WebhookEndpoint {self.id} {self.url}>"


class WebhookDelivery(db.Model):
    """One event for one endpoint: a fixed body and id, retried with backoff."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        sa.UniqueConstraint("endpoint_id", "event_id", name="uq_webhook_deliveries_endpoint_event"),
        sa.Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    delivery_id: Mapped[str] = mapped_column(sa.String(36), unique=True)
    endpoint_id: Mapped[int] = mapped_column(
        sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), index=True)
    event_id: Mapped[int | None] = mapped_column(
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        sa.ForeignKey("outbox_events.id", ondelete="SET NULL"))
    topic: Mapped[str] = mapped_column(sa.String(64))
    body: Mapped[str] = mapped_column(sa.Text)
    status: Mapped[str] = mapped_column(sa.String(16), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    response_status: Mapped[int | None]
    last_error: Mapped[str] = mapped_column(sa.String(500), default="")
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PluginDocument(db.Model):
    """A document a plugin builds and every instance serves (e.g. the sitemap)."""

    __tablename__ = "plugin_documents"

    name: Mapped[str] = mapped_column(sa.String(100), primary_key=True)
    content_type: Mapped[str] = mapped_column(sa.String(100), default="text/plain")
    content: Mapped[str] = mapped_column(sa.Text, default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
