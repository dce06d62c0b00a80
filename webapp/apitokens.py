"""Bearer tokens for the JSON API: shown once, stored as SHA-256, acting as their user.

A token is 256 random bits, so a plain SHA-256 is enough to store it safely (no
password stretching needed), and looking it up by hash leaks nothing useful.
The role is the user's current role, read on every request: demoting or
deactivating a user takes effect on their tokens at once.
"""

import hashlib
import secrets
from datetime import timedelta

import sqlalchemy as sa

from .extensions import db
from .models import ApiToken, User, utcnow

PREFIX = "sol_"
TOUCH_EVERY = timedelta(minutes=1)  # how often last_used_at is written, at most


def hash_token(token: str) -> str:
    """Return the stored form of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(user: User, label: str = "") -> str:
    """Create a token for user and return it; only its hash is kept."""
    token = PREFIX + secrets.token_urlsafe(32)
    db.session.add(ApiToken(user_id=user.id, token_hash=hash_token(token), label=label[:100]))
    db.session.commit()
    return token


def user_for_token(token: str) -> User | None:
    """Return the active user a token belongs to, or None."""
    if not token.startswith(PREFIX) or len(token) > 200:
        return None
    found = db.session.execute(
        sa.select(ApiToken, User).join(User, User.id == ApiToken.user_id)
        .where(ApiToken.token_hash == hash_token(token))
    ).first()
    if found is None or not found.User.active:
        return None
    record, user = found
    now = utcnow()
    if record.last_used_at is None or now - record.last_used_at > TOUCH_EVERY:
        record.last_used_at = now
        db.session.commit()
    return user


def revoke_tokens(user: User) -> int:
    """Delete every token of user; return how many there were."""
    result = db.session.execute(sa.delete(ApiToken).where(ApiToken.user_id == user.id))
    db.session.commit()
    return result.rowcount
