"""Model the people who sign in: users, their sessions, failed sign-ins and API tokens."""

from datetime import datetime

import sqlalchemy as sa
from flask import current_app
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

from ..extensions import Model
from .types import UTCDateTime, utcnow


def password_method() -> str:
    """Return the app's PASSWORD_HASH_METHOD: scrypt, unless a test app asks for a cheaper
    one (a check reads the method from the hash)."""
    return current_app.config["PASSWORD_HASH_METHOD"]


def hash_password(password: str) -> str:
    """Return password's hash, made with the app's method."""
    return generate_password_hash(password, password_method())


class User(Model):
    """A person who signs in: admin, editor, contributor or viewer."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(sa.String(254), unique=True)
    password_hash: Mapped[str] = mapped_column(sa.String(256))
    role: Mapped[str] = mapped_column(sa.String(16), default="editor")
    active: Mapped[bool] = mapped_column(default=True)
    timezone: Mapped[str] = mapped_column(sa.String(64), default="UTC", server_default="UTC")
    must_change_password: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # TOTP two-factor (webapp.accounts.totp): the secret encrypted with a key derived from
    # SECRET_KEY; on once confirmed with a typed code; the last time step a code was used
    totp_secret: Mapped[str | None] = mapped_column(sa.String(255))
    totp_on_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    totp_last_step: Mapped[int] = mapped_column(sa.BigInteger, default=0, server_default="0")

    ROLES = ("admin", "editor", "contributor", "viewer")
    # a contributor writes posts and submits them; only a reviewer (editor, admin) publishes
    RANK = {"viewer": 1, "contributor": 2, "editor": 3, "admin": 4}

    # what a request's user is beyond its row, set when it is loaded (no columns): its
    # browser's session (webapp.accounts.sessions) or its API token (webapp.accounts.tokens)
    __allow_unmapped__ = True
    session_secret: str = ""
    session_id: int | None = None
    api_token_id: int | None = None
    api_token_dangerous: bool = False

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
        """Return what Flask-Login keeps in the cookie: the secret of this browser's session.

        webapp.accounts.sessions sets it at sign-in; a user object loaded any other way has none.
        """
        return getattr(self, "session_secret", "")

    def can(self, role: str) -> bool:
        """Return whether this user has at least role."""
        return self.active and self.RANK.get(self.role, 0) >= self.RANK[role]

    def set_password(self, password: str) -> None:
        """Hash and store a new password."""
        self.password_hash = hash_password(password)

    def check_password(self, password: str) -> bool:
        """Return whether password matches the stored hash."""
        return check_password_hash(self.password_hash, password)


class LoginFailure(Model):
    """A failed sign-in, counted per address and per account to slow guessing down."""

    __tablename__ = "login_failures"
    __table_args__ = (sa.Index("ix_login_failures_email_at", "email", "at"),
                      sa.Index("ix_login_failures_address_at", "address", "at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(sa.String(254))
    address: Mapped[str] = mapped_column(sa.String(64))
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # the trusted browser the failure came from (its device cookie), if it sent one
    device_id: Mapped[int | None] = mapped_column(sa.Integer, index=True)


class RateLimitHit(Model):
    """One request counted against its address's allowance of some kind (webapp.accounts.
    ratelimit): a failed API token, an anonymous passkey challenge."""

    __tablename__ = "rate_limit_hits"
    __table_args__ = (sa.Index("ix_rate_limit_hits_kind_address_at", "kind", "address", "at"),
                      sa.Index("ix_rate_limit_hits_kind_at", "kind", "at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(32))
    address: Mapped[str] = mapped_column(sa.String(64))
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AccountPolicy(Model):
    """One row (id 1), written on the first change; absent, nobody must use two-factor."""

    __tablename__ = "account_policy"

    ROW = 1
    TWO_FACTOR = ("nobody", "admins", "everyone")  # who must sign in with a second factor

    id: Mapped[int] = mapped_column(primary_key=True)
    two_factor_required: Mapped[str] = mapped_column(sa.String(16), default="nobody",
                                                     server_default="nobody")


class Passkey(Model):
    """A WebAuthn credential (a passkey) a user registered: its public key, never a secret."""

    __tablename__ = "passkeys"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"),
                                         index=True)
    credential_id: Mapped[bytes] = mapped_column(sa.LargeBinary, unique=True)
    public_key: Mapped[bytes] = mapped_column(sa.LargeBinary)
    sign_count: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    name: Mapped[str] = mapped_column(sa.String(60), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class WebAuthnChallenge(Model):
    """A challenge handed to a browser for one ceremony: single-use, expiring, server-side."""

    __tablename__ = "webauthn_challenges"

    id: Mapped[int] = mapped_column(primary_key=True)
    challenge: Mapped[str] = mapped_column(sa.String(128), unique=True)  # base64url
    purpose: Mapped[str] = mapped_column(sa.String(16))  # "register" or "sign-in"
    user_id: Mapped[int | None] = mapped_column(sa.Integer)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RecoveryCode(Model):
    """A single-use code that stands in for the authenticator app: only its SHA-256 kept."""

    __tablename__ = "recovery_codes"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"),
                                         index=True)
    code_hash: Mapped[str] = mapped_column(sa.String(64))
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class UserDevice(Model):
    """A browser that signed in to an account: its device cookie holds a random secret, the
    server its SHA-256 (OWASP's device cookies). Failures from it count against it alone,
    so neither a stranger's guessing nor a list of addresses locks its owner out."""

    __tablename__ = "user_devices"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"),
                                         index=True)
    secret_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    user_agent: Mapped[str] = mapped_column(sa.String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class UserSession(Model):
    """A signed-in browser: the cookie holds a random secret, the server its SHA-256.

    Ending the row (sign-out, a password change or reset, deactivation, an admin) ends the
    session at once, whatever copies of the cookie exist.
    """

    __tablename__ = "user_sessions"
    __table_args__ = (sa.Index("ix_user_sessions_user_id_address", "user_id", "address"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"))
    secret_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    address: Mapped[str] = mapped_column(sa.String(64), default="")
    user_agent: Mapped[str] = mapped_column(sa.String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_why: Mapped[str] = mapped_column(sa.String(40), default="", server_default="")


class ApiToken(Model):
    """A bearer token for the JSON API; only its SHA-256 is stored, it acts as its user."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"),
                                         index=True)
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    label: Mapped[str] = mapped_column(sa.String(100), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_why: Mapped[str] = mapped_column(sa.String(40), default="", server_default="")
    # asked for when it was made (with a fresh proof): it may do what asks a session for a
    # step-up (webapp.accounts.stepup); an everyday token may not
    dangerous_actions: Mapped[bool] = mapped_column(default=False, server_default=sa.false())

    @property
    def state(self) -> str:
        """Return live, expired or revoked."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= utcnow():
            return "expired"
        return "live"
