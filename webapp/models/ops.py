"""Models for ops: API tokens (the "Leader view" work)."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .core import UTCDateTime, utcnow

__all__: list[str] = ["ApiToken"]


class ApiToken(db.Model):
    """A bearer token for the JSON API; only its SHA-256 is stored, it acts as its user."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"),
                                         index=True)
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    label: Mapped[str] = mapped_column(sa.String(100), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
