"""Bearer tokens for the JSON API: shown once, stored as SHA-256, acting as their user.

A token is 256 random bits, so a plain SHA-256 is enough to store it safely (no
password stretching needed), and looking it up by hash leaks nothing useful.
The role is the user's current role, read on every request: demoting a user takes
effect on their tokens at once. A token does what asks a session for a fresh proof (the
dangerous actions of webapp.accounts.stepup) only when it was made to (dangerous_actions):
a script's everyday token, leaked, cannot add a webhook endpoint. A password change, a
reset or deactivation revokes them (webapp.accounts); a revoked token stays listed, with
when and why.
"""

import hashlib
import secrets
from datetime import timedelta

import sqlalchemy as sa

from ..db import rows_changed
from ..extensions import db
from ..models import ApiToken, User, utcnow
from ..ops import audit

PREFIX = "sol_"
TOUCH_EVERY = timedelta(minutes=1)  # how often last_used_at is written, at most


def hash_token(token: str) -> str:
    """Return the stored form of a token (or of a session's secret: 256 random bits too)."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(user: User, label: str = "", days: int | None = None,
                 dangerous: bool = False) -> str:
    """Create a token for user (expiring after days, if given; allowed the dangerous
    actions if dangerous) and return it once."""
    token = PREFIX + secrets.token_urlsafe(32)
    expires = utcnow() + timedelta(days=days) if days else None
    record = ApiToken(user_id=user.id, token_hash=hash_token(token), label=label[:100],
                      expires_at=expires, dangerous_actions=dangerous)
    db.session.add(record)
    db.session.flush()  # the audit row names the token's id and label, never the token
    audit.record("token.create", audit.target("token", record.id, record.label),
                 {"user": user.email, "label": record.label, "expires_at": expires}
                 | ({"dangerous_actions": True} if dangerous else {}))
    db.session.commit()
    return token


def user_for_token(token: str) -> User | None:
    """Return the active user a token belongs to, or None."""
    if not token.startswith(PREFIX) or len(token) > 200:
        return None
    now = utcnow()
    found = db.session.execute(
        sa.select(ApiToken, User).join(User, User.id == ApiToken.user_id)
        .where(ApiToken.token_hash == hash_token(token), ApiToken.revoked_at.is_(None),
               sa.or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > now))
    ).first()
    if found is None or not found.User.active:
        return None
    record, user = found
    user.api_token_id = record.id  # for the audit log: which token made a change
    user.api_token_dangerous = record.dangerous_actions  # for webapp.accounts.stepup
    if record.last_used_at is None or now - record.last_used_at > TOUCH_EVERY:
        record.last_used_at = now
        db.session.commit()
    return user


def revoke_tokens(user: User, why: str, only: int | None = None) -> int:
    """Revoke user's live tokens (or only the one with id only); return how many.

    The caller commits, with whatever change revokes them.
    """
    statement = sa.update(ApiToken).where(ApiToken.user_id == user.id,
                                          ApiToken.revoked_at.is_(None))
    if only is not None:
        statement = statement.where(ApiToken.id == only)
    return rows_changed(statement.values(revoked_at=utcnow(), revoked_why=why))


def list_tokens(user: User, limit: int = 50) -> list[ApiToken]:
    """Return user's tokens, live ones first, newest first."""
    return list(db.session.scalars(
        sa.select(ApiToken).where(ApiToken.user_id == user.id)
        .order_by(ApiToken.revoked_at.is_not(None), ApiToken.created_at.desc())
        .limit(limit)))
