"""Model the audit log: one row per change a person or a token made, written with it."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import BigId, UTCDateTime, utcnow


class AuditEvent(Model):
    """Who changed what, when, from where and how (web, api, cli); never a secret.

    actor keeps the email even after the user is deleted (actor_id is then NULL).
    detail is JSON text of what changed, e.g. {"title": ["old", "new"]}.
    """

    __tablename__ = "audit_events"
    __table_args__ = (sa.Index("ix_audit_events_at", "at"),
                      sa.Index("ix_audit_events_actor_at", "actor", "at"),
                      sa.Index("ix_audit_events_action_at", "action", "at"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    actor_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("users.id", ondelete="SET NULL"))
    actor: Mapped[str] = mapped_column(sa.String(254), default="")
    via: Mapped[str] = mapped_column(sa.String(8))
    token_id: Mapped[int | None]  # which API token; no foreign key: the row outlives it
    address: Mapped[str] = mapped_column(sa.String(64), default="")
    action: Mapped[str] = mapped_column(sa.String(40))
    target: Mapped[str] = mapped_column(sa.String(300), default="")
    detail: Mapped[str] = mapped_column(sa.Text, default="{}")

    VIAS = ("web", "api", "cli")
