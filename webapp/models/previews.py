"""Model preview links: an unguessable, expiring, revocable link to a post not yet public."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import UTCDateTime, utcnow


class PreviewLink(Model):
    """A link that shows a draft or scheduled post to anyone holding it, until it ends.

    Only the token's SHA-256 is stored: the link is shown once, when it is made. It shows
    the post as it stands, or, with revision_id (a scheduled_changes id), the change a live
    post will take at its time.
    """

    __tablename__ = "preview_links"

    id: Mapped[int] = mapped_column(primary_key=True)
    post_id: Mapped[int] = mapped_column(sa.ForeignKey("posts.id", ondelete="CASCADE"),
                                         index=True)
    revision_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    created_by_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # the housekeeping trim deletes links some days after they end
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
