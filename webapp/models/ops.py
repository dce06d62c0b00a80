"""Model what ops set on the whole fleet: freezes of publishing or of timers."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import UTCDateTime, utcnow


class Freeze(db.Model):
    """Publishing or timers paused by an admin, with why; the row goes on resume."""

    __tablename__ = "freezes"

    scope: Mapped[str] = mapped_column(sa.String(16), primary_key=True)  # publishing, timers
    reason: Mapped[str] = mapped_column(sa.String(500))
    frozen_by: Mapped[str] = mapped_column(sa.String(254))
    frozen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # publishing only: what posts that came due meanwhile do on resume (publish, hold)
    on_resume: Mapped[str] = mapped_column(sa.String(16), default="publish")
