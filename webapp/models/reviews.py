"""Model a post's review: who wrote it for review, where it stands, the reviewer's note."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import UTCDateTime, utcnow


class PostReview(Model):
    """A post's place in review (one row a post, made when a contributor starts it or anyone
    submits it); no row: the post was never in review.

    state: "draft" (a contributor's, not submitted), "in_review", "changes_requested" (sent
    back with note), "approved" (scheduled or published by a reviewer).
    """

    __tablename__ = "post_reviews"
    __table_args__ = (sa.Index("ix_post_reviews_state", "state"),)

    STATES = ("draft", "in_review", "changes_requested", "approved")

    post_id: Mapped[int] = mapped_column(sa.ForeignKey("posts.id", ondelete="CASCADE"),
                                         primary_key=True)
    state: Mapped[str] = mapped_column(sa.String(20), default="draft")
    # the writer: a contributor edits only the posts whose row names them
    author_id: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id", ondelete="SET NULL"),
                                                  index=True)
    author: Mapped[str] = mapped_column(sa.String(254), default="")
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    reviewer_id: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id",
                                                                  ondelete="SET NULL"))
    reviewer: Mapped[str] = mapped_column(sa.String(254), default="")
    reviewed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    note: Mapped[str] = mapped_column(sa.Text, default="")  # the reviewer's, when sent back
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
