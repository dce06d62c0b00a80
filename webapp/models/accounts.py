"""Model the people who sign in: users, failed sign-ins and API tokens."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

from ..extensions import db
from .types import UTCDateTime, utcnow


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
