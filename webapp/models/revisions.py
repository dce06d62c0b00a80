"""Model a post's kept versions and the one change to a live post that waits for its time."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import BigId, UTCDateTime, utcnow


class PostRevision(Model):
    """One version of a post's title and body: who wrote it, when, and whether readers saw it.

    Every save writes one (the newest is the post's current text), so "the version a save
    replaced" is the one before it. was_live marks a version the public site showed: those
    are kept by housekeeping whatever REVISIONS_KEEP says.
    """

    __tablename__ = "post_revisions"
    __table_args__ = (sa.Index("ix_post_revisions_post_id_id", "post_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    post_id: Mapped[int] = mapped_column(sa.ForeignKey("posts.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(sa.String(200))
    body: Mapped[str] = mapped_column(sa.Text, default="")
    author_id: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id", ondelete="SET NULL"))
    author: Mapped[str] = mapped_column(sa.String(254), default="")  # the name as it was
    # what made it: "create", "edit", "restore" (of restored_from), "change" (scheduled), "import"
    reason: Mapped[str] = mapped_column(sa.String(16), default="edit")
    restored_from: Mapped[int | None] = mapped_column(sa.BigInteger)
    was_live: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ScheduledChange(Model):
    """New text for a published post, swapped in by the publish leader at apply_at, once.

    base_digest names the text it was written against: when the live post's text has
    changed since, the change says so before it goes out (it still goes, as written).
    """

    __tablename__ = "scheduled_changes"
    __table_args__ = (sa.Index("ix_scheduled_changes_apply_at", "apply_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    post_id: Mapped[int] = mapped_column(sa.ForeignKey("posts.id", ondelete="CASCADE"),
                                         unique=True)  # one pending change a post
    title: Mapped[str] = mapped_column(sa.String(200))
    body: Mapped[str] = mapped_column(sa.Text, default="")
    apply_at: Mapped[datetime] = mapped_column(UTCDateTime)
    base_version: Mapped[int] = mapped_column()
    base_digest: Mapped[str] = mapped_column(sa.String(32))
    author_id: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id", ondelete="SET NULL"))
    author: Mapped[str] = mapped_column(sa.String(254), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
