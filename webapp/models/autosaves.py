"""Model an editor's unsaved text kept by the server: the draft of a draft."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import BigId, UTCDateTime, utcnow


class PostAutosave(Model):
    """The text one user typed into a post's form (or New post's: post_id None), not saved.

    It belongs to the user who typed it and is never a version of the post: base_version and
    base_digest name the post's version and text it was typed on, so it can say when the
    post moved on since. Saving the post deletes it.
    """

    __tablename__ = "post_autosaves"
    __table_args__ = (sa.UniqueConstraint("user_id", "post_id",
                                          name="uq_post_autosaves_user_id_post_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"))
    post_id: Mapped[int | None] = mapped_column(sa.ForeignKey("posts.id", ondelete="CASCADE"))
    base_version: Mapped[int | None] = mapped_column()
    base_digest: Mapped[str] = mapped_column(sa.String(32), default="")
    title: Mapped[str] = mapped_column(sa.Text, default="")
    slug: Mapped[str] = mapped_column(sa.Text, default="")
    body: Mapped[str] = mapped_column(sa.Text, default="")
    publish_at: Mapped[str] = mapped_column(sa.String(64), default="")  # as typed (New post)
    zone: Mapped[str] = mapped_column(sa.String(64), default="")
    saved_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
