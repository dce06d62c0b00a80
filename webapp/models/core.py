"""Typed SQLAlchemy models: users, posts, the outbox and the leadership record."""

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

from ..extensions import db


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


class UTCDateTime(sa.TypeDecorator):
    """Store aware datetimes as UTC (timestamptz on PostgreSQL) and read them back aware."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column; attach a time zone")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class User(db.Model):
    """A person who signs in: admin, editor or viewer."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(sa.String(254), unique=True)
    password_hash: Mapped[str] = mapped_column(sa.String(256))
    role: Mapped[str] = mapped_column(sa.String(16), default="editor")
    active: Mapped[bool] = mapped_column(default=True)
    timezone: Mapped[str] = mapped_column(sa.String(64), default="UTC", server_default="UTC")
    must_change_password: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    session_version: Mapped[int] = mapped_column(default=1, server_default="1")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    ROLES = ("admin", "editor", "viewer")
    RANK = {"viewer": 1, "editor": 2, "admin": 3}

    # Flask-Login
    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def is_active(self) -> bool:
        return self.active

    @property
    def is_anonymous(self) -> bool:
        return False

    def get_id(self) -> str:
        """Return the session id: user id and session version, so a reset logs out."""
        return f"{self.id}:{self.session_version}"

    def can(self, role: str) -> bool:
        """Return whether this user has at least role."""
        return self.active and self.RANK.get(self.role, 0) >= self.RANK[role]

    def set_password(self, password: str) -> None:
        """Hash and store a new password."""
        self.password_hash = generate_password_hash(password)

    def check_password(self, password: str) -> bool:
        """Return whether password matches the stored hash."""
        return check_password_hash(self.password_hash, password)


class LoginFailure(db.Model):
    """A failed sign-in, counted per address and per account to slow guessing down."""

    __tablename__ = "login_failures"
    __table_args__ = (sa.Index("ix_login_failures_email_at", "email", "at"),
                      sa.Index("ix_login_failures_address_at", "address", "at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(sa.String(254))
    address: Mapped[str] = mapped_column(sa.String(64))
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Post(db.Model):
    """A post with its publication schedule."""

    __tablename__ = "posts"
    __table_args__ = (
        sa.Index(
            "ix_posts_due",
            "publish_at",
            postgresql_where=sa.text("status = 'scheduled'"),
            sqlite_where=sa.text("status = 'scheduled'"),
        ),
        sa.Index(
            "ix_posts_expiring",
            "unpublish_at",
            postgresql_where=sa.text("status = 'published' AND unpublish_at IS NOT NULL"),
            sqlite_where=sa.text("status = 'published' AND unpublish_at IS NOT NULL"),
        ),
        sa.Index("ix_posts_status_published_at", "status", "published_at"),
        # the editors' list: newest first by id, per status, and title search (0003)
        sa.Index("ix_posts_status_id", "status", "id"),
        sa.Index("ix_posts_title_trgm", "title", postgresql_using="gin",
                 postgresql_ops={"title": "gin_trgm_ops"}),
    )

    STATUSES = ("draft", "scheduled", "published", "unpublished")

    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(sa.String(200))
    slug: Mapped[str] = mapped_column(sa.String(200), unique=True)
    body: Mapped[str] = mapped_column(sa.Text, default="")
    status: Mapped[str] = mapped_column(sa.String(16), default="draft")
    publish_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    unpublish_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    version: Mapped[int] = mapped_column(default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class OutboxEvent(db.Model):
    """An event written in the same transaction as the change it describes."""

    __tablename__ = "outbox_events"
    __table_args__ = (sa.Index("ix_outbox_pending", "id", "processed_at"),)

    id: Mapped[int] = mapped_column(sa.BigInteger().with_variant(sa.Integer, "sqlite"),
                                    primary_key=True)
    topic: Mapped[str] = mapped_column(sa.String(64))
    post_id: Mapped[int | None] = mapped_column(sa.ForeignKey("posts.id", ondelete="SET NULL"),
                                                index=True)
    payload: Mapped[dict] = mapped_column(sa.JSON, default=dict)
    instance: Mapped[str] = mapped_column(sa.String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    processed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class LeaderState(db.Model):
    """The current term, holder and heartbeat of one scheduler key."""

    __tablename__ = "leader_state"

    key: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    term: Mapped[int] = mapped_column(default=0)
    holder: Mapped[str] = mapped_column(sa.String(200), default="")
    holder_pid: Mapped[int | None]
    acquired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_work_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_result: Mapped[str] = mapped_column(sa.String(500), default="")
    step_down_requested: Mapped[bool] = mapped_column(default=False)


class LeaderEvent(db.Model):
    """One change of leadership: acquired, released, lost or evicted."""

    __tablename__ = "leader_events"
    __table_args__ = (sa.Index("ix_leader_events_key_at", "key", "at"),)

    id: Mapped[int] = mapped_column(sa.BigInteger().with_variant(sa.Integer, "sqlite"),
                                    primary_key=True)
    key: Mapped[int] = mapped_column(sa.BigInteger)
    kind: Mapped[str] = mapped_column(sa.String(16))
    term: Mapped[int] = mapped_column(default=0)
    holder: Mapped[str] = mapped_column(sa.String(200), default="")
    detail: Mapped[str] = mapped_column(sa.String(500), default="")
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
