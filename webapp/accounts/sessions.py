"""Sign-in sessions that live on the server, so that they can end.

The cookie (signed by Flask) carries a random 256-bit secret; the server keeps its
SHA-256 in user_sessions. Signing out, a password change or reset, deactivation or an
admin ends the row, and every copy of the cookie stops working at once. A guessed or
leaked SECRET_KEY alone no longer opens an account: forging a cookie needs a live secret.
"""

import secrets
import unicodedata
from datetime import timedelta

import sqlalchemy as sa
from flask import current_app

from ..db import rows_changed
from ..extensions import db
from ..models import User, UserSession, utcnow
from ..ops import audit
from .tokens import hash_token

TOUCH_EVERY = timedelta(minutes=1)  # how often last_seen_at is written, at most
KNOWN_FOR = timedelta(days=30)  # an address that signed in this recently is the owner's

SIGNED_OUT = "signed out"
PASSWORD_CHANGED = "password changed"
PASSWORD_RESET = "password reset by an admin"
DEACTIVATED = "user deactivated"
ENDED_BY_ADMIN = "ended by an admin"
ENDED_BY_USER = "ended by its user"
EXPIRED = "expired"


def header_text(raw: str) -> str:
    """Return a request header's text as its sender wrote it: WSGI hands headers over as
    Latin-1, so UTF-8 bytes arrive as mojibake ("Ã©" for "é"); decode them as UTF-8 when
    they are, and write any control or invisible character as its code point."""
    try:
        text = raw.encode("latin-1").decode("utf-8")
    except UnicodeError:
        text = raw
    return "".join(f"U+{ord(c):04X}" if unicodedata.category(c) in ("Cc", "Cf") else c
                   for c in text)


def start_session(user: User, address: str, user_agent: str,
                  proof: dict | None = None) -> str:
    """Record a new session for user and return its secret (for the cookie only); proof
    says how the user proved themselves (the method, the browser), for the audit log."""
    secret = secrets.token_urlsafe(32)
    record = UserSession(user_id=user.id, secret_hash=hash_token(secret),
                         address=address[:64], user_agent=header_text(user_agent)[:200])
    db.session.add(record)
    db.session.flush()  # the audit row names the session's id (never its secret)
    audit.record("session.start", audit.target("session", record.id, user.email),
                 {**(proof or {}), "user_agent": record.user_agent}, actor=user)
    db.session.commit()
    user.session_secret = secret
    return secret


def load_session(secret: str, active: bool = True) -> User | None:
    """Return the active user of a live session, or None; an expired session is ended.

    active says the request is the user's doing (not a page polling by itself): only then
    does it count as use, so a tab left open on a live page still idles out.
    """
    if not secret or len(secret) > 100:
        return None
    found = db.session.execute(
        sa.select(UserSession, User).join(User, User.id == UserSession.user_id)
        .where(UserSession.secret_hash == hash_token(secret),
               UserSession.ended_at.is_(None))).first()
    if found is None or not found.User.active:
        return None
    record, user = found
    now = utcnow()
    if expired(record, user.role, now):
        _end(sa.true(), [record.id], EXPIRED)
        db.session.commit()
        return None
    if active and now - record.last_seen_at > TOUCH_EVERY:
        record.last_seen_at = now
        db.session.commit()
    user.session_secret = secret
    user.session_id = record.id
    return user


def lifetimes(role: str, config=None) -> tuple[timedelta, timedelta]:
    """Return how long a session of role may sit idle, and may last in all."""
    config = current_app.config if config is None else config
    if role == "admin":
        return (timedelta(minutes=config["ADMIN_SESSION_IDLE_MINUTES"]),
                timedelta(hours=config["ADMIN_SESSION_MAX_HOURS"]))
    return (timedelta(hours=config["SESSION_IDLE_HOURS"]),
            timedelta(days=config["SESSION_MAX_DAYS"]))


def expired(record: UserSession, role: str, now) -> bool:
    """Return whether a session of a user with role has ended by itself at now.

    The user's role now decides: an editor made admin keeps a session only while it is
    within an admin's limits.
    """
    idle, lifetime = lifetimes(role)
    return now - record.last_seen_at > idle or now - record.created_at > lifetime


def end_session(secret: str, why: str = SIGNED_OUT) -> None:
    """End the session with this secret (sign-out)."""
    where = UserSession.secret_hash == hash_token(secret)
    ended = db.session.execute(sa.select(UserSession.id, User.email).join(User).where(
        where, UserSession.ended_at.is_(None))).first()
    if ended is not None and _end(where, [ended.id], why):
        audit.record("session.end", audit.target("session", ended.id, ended.email),
                     {"why": why})
    db.session.commit()


def end_sessions(user: User, why: str, *, keep: str | None = None,
                 only: int | None = None) -> int:
    """End user's live sessions (all, all but keep's, or only the one with id only).

    The caller commits, with whatever change ends them (a new password, deactivation).
    """
    where = UserSession.user_id == user.id
    if keep:
        where = sa.and_(where, UserSession.secret_hash != hash_token(keep))
    return _end(where, None if only is None else [only], why)


def _end(where, ids: list[int] | None, why: str) -> int:
    """End the live sessions matching where (and ids); return how many ended."""
    statement = sa.update(UserSession).where(where, UserSession.ended_at.is_(None))
    if ids is not None:
        statement = statement.where(UserSession.id.in_(ids))
    return rows_changed(statement.values(ended_at=utcnow(), ended_why=why))


def list_sessions(user: User, limit: int = 20) -> list[UserSession]:
    """Return user's sessions, live ones first, newest first."""
    return list(db.session.scalars(
        sa.select(UserSession).where(UserSession.user_id == user.id)
        .order_by(UserSession.ended_at.is_not(None), UserSession.last_seen_at.desc())
        .limit(limit)))


def is_known_address(email: str, address: str) -> bool:
    """Return whether the account with email signed in from address in the last 30 days."""
    return db.session.scalar(
        sa.select(UserSession.id).join(User, User.id == UserSession.user_id)
        .where(User.email == email, UserSession.address == address,
               UserSession.created_at >= utcnow() - KNOWN_FOR).limit(1)) is not None
