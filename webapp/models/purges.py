"""Model cache purges: one outbox event's surrogate keys for one configured purger."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import BigId, UTCDateTime, utcnow


class CachePurge(Model):
    """The keys one event makes stale, to purge from one cache (a CACHE_PURGE entry)."""

    __tablename__ = "cache_purges"
    __table_args__ = (
        sa.UniqueConstraint("purger", "event_id", name="uq_cache_purges_purger_event"),
        # each purger's due purges, however long another purger's queue
        sa.Index("ix_cache_purges_purger_pending", "purger", "next_attempt_at",
                 postgresql_where=sa.text("status = 'pending'"),
                 sqlite_where=sa.text("status = 'pending'")),
        sa.Index("ix_cache_purges_status", "status"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    # the purger's URL as configured, credentials left out (webapp.site.purgers.name)
    purger: Mapped[str] = mapped_column(sa.String(300))
    event_id: Mapped[int | None] = mapped_column(
        BigId, sa.ForeignKey("outbox_events.id", ondelete="SET NULL"), index=True)
    topic: Mapped[str] = mapped_column(sa.String(64))
    keys: Mapped[str] = mapped_column(sa.Text)  # space-separated surrogate keys
    hard: Mapped[bool] = mapped_column(default=False)  # a takedown: no stale copy served
    status: Mapped[str] = mapped_column(sa.String(16), default="pending")  # sending done failed
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    claim: Mapped[str] = mapped_column(sa.String(32), default="", server_default="")
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    claimed_term: Mapped[int] = mapped_column(default=0, server_default="0")
    claimed_holder: Mapped[str] = mapped_column(sa.String(200), default="", server_default="")
    last_error: Mapped[str] = mapped_column(sa.String(500), default="", server_default="")
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # the WAL position a standby must replay first (webapp.ops.replica); NULL: none streams
    replica_lsn: Mapped[int | None] = mapped_column(sa.BigInteger)
