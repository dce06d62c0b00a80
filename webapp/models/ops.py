"""Model what ops set on or record of the whole fleet: freezes, deploys, and the backfills a
release left to the fleet."""

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


class ReleaseBackfill(Model):
    """A migration's backfill the release began and the fleet finishes (webapp.ops.release.
    backfills): its statement, and how far its batches went."""

    __tablename__ = "release_backfills"

    name: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    table_name: Mapped[str] = mapped_column(sa.String(63))  # the rows it goes through
    key_column: Mapped[str] = mapped_column(sa.String(63))  # in this column's order
    statement: Mapped[str] = mapped_column(sa.Text)  # one batch: :after < key <= :upto
    batch: Mapped[int]  # rows a batch
    after_key: Mapped[int] = mapped_column(sa.BigInteger)  # every row up to it is done
    batches: Mapped[int] = mapped_column(default=0)
    began_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
