"""Model webhooks: admins' receiving endpoints and each event's delivery to one."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import BigId, UTCDateTime, utcnow


class WebhookEndpoint(Model):
    """An admin's webhook receiver; the secret signs bodies and is never shown again."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(sa.String(2000))
    description: Mapped[str] = mapped_column(sa.String(200), default="")
    events: Mapped[list] = mapped_column(sa.JSON, default=list)
    secret: Mapped[str] = mapped_column(sa.String(200))
    active: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # a failing endpoint: its failed attempts in a row, the last error, and when it may be
    # tried again (its own back-off, so a dead receiver is never tried faster)
    failures: Mapped[int] = mapped_column(default=0, server_default="0")
    last_error: Mapped[str] = mapped_column(sa.String(500), default="", server_default="")
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    retry_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the body sent: "standard" (the event as JSON) or "slack" ({"text": ...})
    payload_format: Mapped[str] = mapped_column(sa.String(16), default="standard",
                                                server_default="standard")

    def __repr__(self) -> str:  # never the secret
        return f"<WebhookEndpoint {self.id} {self.url}>"


class WebhookDelivery(Model):
    """One event for one endpoint: a fixed body and id, retried with backoff."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        sa.UniqueConstraint("endpoint_id", "event_id", name="uq_webhook_deliveries_endpoint_event"),
        sa.Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        # each endpoint's first pending delivery, however long its queue
        sa.Index("ix_webhook_deliveries_endpoint_pending", "endpoint_id", "next_attempt_at",
                 postgresql_where=sa.text("status = 'pending'"),
                 sqlite_where=sa.text("status = 'pending'")),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    delivery_id: Mapped[str] = mapped_column(sa.String(36), unique=True)
    endpoint_id: Mapped[int] = mapped_column(
        sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), index=True)
    # indexed: deleting an outbox event looks up its deliveries to set this NULL
    event_id: Mapped[int | None] = mapped_column(
        BigId, sa.ForeignKey("outbox_events.id", ondelete="SET NULL"), index=True)
    topic: Mapped[str] = mapped_column(sa.String(64))
    body: Mapped[str] = mapped_column(sa.Text)
    status: Mapped[str] = mapped_column(sa.String(16), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the sender's claim: only the claim's own writes count (a stale sender changes nothing)
    claim: Mapped[str] = mapped_column(sa.String(32), default="", server_default="")
    claimed_term: Mapped[int] = mapped_column(default=0, server_default="0")
    # the lock session name beside the term: a reissued term number fences nothing in
    claimed_holder: Mapped[str] = mapped_column(sa.String(200), default="", server_default="")
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    response_status: Mapped[int | None]
    last_error: Mapped[str] = mapped_column(sa.String(500), default="")
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # the WAL position (bytes from 0/0) a standby must replay before it is sent:
    # past its event's commit (webapp.ops.replica); NULL when nothing streams
    replica_lsn: Mapped[int | None] = mapped_column(sa.BigInteger)
