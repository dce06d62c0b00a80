"""Model what ops set on or record of the whole fleet: freezes, and deploys."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import UTCDateTime, utcnow


class Freeze(Model):
    """Publishing or timers paused by an admin, with why; the row goes on resume."""

    __tablename__ = "freezes"

    scope: Mapped[str] = mapped_column(sa.String(16), primary_key=True)  # publishing, timers
    reason: Mapped[str] = mapped_column(sa.String(500))
    frozen_by: Mapped[str] = mapped_column(sa.String(254))
    frozen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # publishing only: what posts that came due meanwhile do on resume (publish, hold)
    on_resume: Mapped[str] = mapped_column(sa.String(16), default="publish")


class Deploy(Model):
    """A release the release phase recorded: which version, from where, and when."""

    __tablename__ = "deploys"
    __table_args__ = (sa.Index("ix_deploys_at", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    version: Mapped[str] = mapped_column(sa.String(200))
    source: Mapped[str] = mapped_column(sa.String(40))  # the variable it came from, or git
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # what its release cost (webapp.ops.release.report); None: recorded without migrating
    release_seconds: Mapped[float | None]
    release_wait_seconds: Mapped[float | None]  # the longest the fleet waited behind it
    release_report: Mapped[str | None] = mapped_column(sa.Text)  # JSON: each migration
