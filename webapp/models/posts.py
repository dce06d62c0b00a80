"""Model posts and the outbox of events their changes write."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import BigId, UTCDateTime, utcnow


class Post(Model):
    """A post with its publication schedule."""

    __tablename__ = "posts"
    __table_args__ = (
        sa.Index(
            "ix_posts_due",
            "publish_at",
            postgresql_where=sa.text("status = 'scheduled'"),
            sqlite_where=sa.text("status = 'scheduled'"),
        ),
        sa.Index(
            "ix_posts_expiring",
            "unpublish_at",
            postgresql_where=sa.text("status = 'published' AND unpublish_at IS NOT NULL"),
            sqlite_where=sa.text("status = 'published' AND unpublish_at IS NOT NULL"),
        ),
        sa.Index("ix_posts_status_published_at", "status", "published_at"),
        # the editors' list: newest first by id, per status, and title search
        sa.Index("ix_posts_status_id", "status", "id"),
        sa.Index("ix_posts_title_trgm", "title", postgresql_using="gin",
                 postgresql_ops={"title": "gin_trgm_ops"}),
    )

    STATUSES = ("draft", "scheduled", "published", "unpublished")

    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(sa.String(200))
    slug: Mapped[str] = mapped_column(sa.String(200), unique=True)
    body: Mapped[str] = mapped_column(sa.Text, default="")
    status: Mapped[str] = mapped_column(sa.String(16), default="draft")
    publish_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    unpublish_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    version: Mapped[int] = mapped_column(default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class OutboxEvent(Model):
    """An event written in the same transaction as the change it describes."""

    __tablename__ = "outbox_events"
    __table_args__ = (
        # the plugin tick scans only the unprocessed events, housekeeping only the processed:
        # both stay as fast with a million processed events as with a thousand
        sa.Index("ix_outbox_unprocessed", "id", postgresql_where=sa.text("processed_at IS NULL"),
                 sqlite_where=sa.text("processed_at IS NULL")),
        sa.Index("ix_outbox_processed_at", "processed_at",
                 postgresql_where=sa.text("processed_at IS NOT NULL"),
                 sqlite_where=sa.text("processed_at IS NOT NULL")),
        sa.UniqueConstraint("dedupe_key", name="uq_outbox_events_dedupe_key"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    topic: Mapped[str] = mapped_column(sa.String(64))
    post_id: Mapped[int | None] = mapped_column(sa.ForeignKey("posts.id", ondelete="SET NULL"),
                                                index=True)
    payload: Mapped[dict] = mapped_column(sa.JSON, default=dict)
    # who wrote it: a lock session's name (holder) from the scheduler, INSTANCE_NAME from an
    # editor's publish or takedown; the column keeps its name for the release running beside
    instance: Mapped[str] = mapped_column(sa.String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    processed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # what happened, named from the occurrence, not a counter: an ops alert's
    # ("ops.no_leader:<key>:<term>", written once fleet-wide) or a post's transition
    # (posts.outbox.event_key); webhook ids are derived from it
    dedupe_key: Mapped[str | None] = mapped_column(sa.String(200))
