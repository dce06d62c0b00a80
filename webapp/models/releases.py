"""Model releases: a named set of changes that go live together at one time."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import UTCDateTime, utcnow


class Release(Model):
    """A named set of items the publish leader applies in one transaction at release_at.

    status: scheduled (editable), held (came due in a publishing freeze that holds: editable,
    goes only once given a new time), published (applied once: result says what it did),
    cancelled. version counts the edits, so two editors cannot overwrite each other.
    """

    __tablename__ = "releases"
    __table_args__ = (
        sa.Index("ix_releases_due", "release_at",
                 postgresql_where=sa.text("status = 'scheduled'"),
                 sqlite_where=sa.text("status = 'scheduled'")),
    )

    STATUSES = ("scheduled", "held", "published", "cancelled")
    TOPIC = "release.published"  # its outbox event and webhook, beside each item's own

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200))
    release_at: Mapped[datetime] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(sa.String(16), default="scheduled")
    version: Mapped[int] = mapped_column(default=1)
    author_id: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id", ondelete="SET NULL"))
    author: Mapped[str] = mapped_column(sa.String(254), default="")
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # what it did when it went: {"published": [ids], "unpublished": [...], "changed": [...],
    # "settings": bool, "skipped": [{"post_id", "kind", "why"}]}
    result: Mapped[dict | None] = mapped_column(sa.JSON)
    # its preview link (the site as it will be): the token's SHA-256 only, shown once
    preview_hash: Mapped[str | None] = mapped_column(sa.String(64), unique=True)
    preview_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class ReleaseItem(Model):
    """One change of a release: publish, unpublish or change a post, or the site's settings.

    A change carries the post's new title and body; settings the site's new name and
    description (None: as it is). A post is in a release once.
    """

    __tablename__ = "release_items"
    __table_args__ = (
        sa.UniqueConstraint("release_id", "post_id", name="uq_release_items_post"),
        sa.Index("ix_release_items_post_id", "post_id"),
    )

    KINDS = ("publish", "unpublish", "change", "settings")

    id: Mapped[int] = mapped_column(primary_key=True)
    release_id: Mapped[int] = mapped_column(sa.ForeignKey("releases.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(sa.String(16))
    post_id: Mapped[int | None] = mapped_column(sa.ForeignKey("posts.id", ondelete="CASCADE"))
    title: Mapped[str | None] = mapped_column(sa.String(200))
    body: Mapped[str | None] = mapped_column(sa.Text)
    site_name: Mapped[str | None] = mapped_column(sa.String(100))
    site_description: Mapped[str | None] = mapped_column(sa.String(300))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
