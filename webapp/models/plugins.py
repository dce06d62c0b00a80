"""Model plugins: whether each is on, the documents they serve and their hook deliveries."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import BigId, UTCDateTime, utcnow


class PluginState(Model):
    """Whether an admin has switched a plugin off (no row: on)."""

    __tablename__ = "plugin_states"

    name: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    enabled: Mapped[bool] = mapped_column(default=True)
    # why Soloist switched it off itself (too many hung calls); shown on the Plugins page
    paused_reason: Mapped[str] = mapped_column(sa.String(500), default="", server_default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PluginDocument(Model):
    """A document a plugin builds and every instance serves (e.g. the sitemap)."""

    __tablename__ = "plugin_documents"

    name: Mapped[str] = mapped_column(sa.String(100), primary_key=True)
    content_type: Mapped[str] = mapped_column(sa.String(100), default="text/plain")
    content: Mapped[str] = mapped_column(sa.Text, default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class HookDelivery(Model):
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
        BigId, sa.ForeignKey("outbox_events.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(sa.String(16), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    claim: Mapped[str] = mapped_column(sa.String(32), default="", server_default="")
    claimed_term: Mapped[int] = mapped_column(default=0, server_default="0")
    # the lock session name beside the term: a reissued term number fences nothing in
    claimed_holder: Mapped[str] = mapped_column(sa.String(200), default="", server_default="")
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # the hook call began
    # the holder that claimed it; the column keeps its name for the release running beside
    instance: Mapped[str] = mapped_column(sa.String(200), default="")
    last_error: Mapped[str] = mapped_column(sa.String(500), default="")
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
