"""Device cookies: a browser that signed in to an account keeps its own allowance of tries.

OWASP's "slow down online guessing attacks with device cookies": a successful sign-in
gives the browser a cookie naming a device row (its id and a random secret; the server
keeps the secret's SHA-256). A failed sign-in from a browser that sends a valid one for the
account it tries counts against that device alone (webapp.accounts.throttle), so neither a
stranger guessing from elsewhere nor a list of stolen addresses locks the owner's own
browser out, on any network. Without one, today's per-address and per-account limits hold.

Devices are revoked with the user's sessions (a password change keeps the browser that
made it; a reset or deactivation keeps none) and listed with them under Settings.
"""

import hmac
import secrets
from datetime import timedelta

import sqlalchemy as sa
from flask import after_this_request, request

from ..db import rows_changed
from ..extensions import db
from ..models import User, UserDevice, utcnow
from .tokens import hash_token

COOKIE = "soloist_device"
MAX_AGE = timedelta(days=365)


def presented(email: str) -> UserDevice | None:
    """Return the live device the request's cookie names, if it is email's account's."""
    found = _cookie_device()
    if found is None:
        return None
    owner = db.session.get(User, found.user_id)
    return found if owner is not None and owner.email == email else None


def _cookie_device() -> UserDevice | None:
    raw = request.cookies.get(COOKIE, "")
    device_id, _, secret = raw.partition(".")
    if not (device_id.isascii() and device_id.isdigit() and len(device_id) <= 12 and secret):
        return None
    found = db.session.get(UserDevice, int(device_id))
    if found is None or found.revoked_at is not None:
        return None
    if not hmac.compare_digest(found.secret_hash, hash_token(secret)):
        return None
    return found


def remember(user: User, user_agent: str) -> UserDevice:
    """After a successful sign-in: stamp the browser's device, or give it one (the cookie is
    set on the response); return it. The caller commits."""
    found = _cookie_device()
    if found is not None and found.user_id == user.id:
        found.last_used_at = utcnow()
        return found
    secret = secrets.token_urlsafe(32)
    device = UserDevice(user_id=user.id, secret_hash=hash_token(secret),
                        user_agent=user_agent[:200])
    db.session.add(device)
    db.session.flush()
    value = f"{device.id}.{secret}"

    @after_this_request
    def set_cookie(response):
        response.set_cookie(COOKIE, value, max_age=int(MAX_AGE.total_seconds()),
                            httponly=True, samesite="Lax", secure=request.is_secure,
                            path="/")
        return response

    return device


def listed(user: User) -> list[UserDevice]:
    """Return the user's trusted browsers, the most recently used first."""
    return list(db.session.scalars(
        sa.select(UserDevice).where(UserDevice.user_id == user.id,
                                    UserDevice.revoked_at.is_(None))
        .order_by(UserDevice.last_used_at.desc())))


def revoke_all(user: User, keep_current: bool = False) -> int:
    """Revoke the user's devices (all, or all but the browser of this request); the caller
    commits. Return how many."""
    where = sa.and_(UserDevice.user_id == user.id, UserDevice.revoked_at.is_(None))
    current = _cookie_device() if keep_current else None
    if current is not None and current.user_id == user.id:
        where = sa.and_(where, UserDevice.id != current.id)
    return rows_changed(sa.update(UserDevice).where(where).values(
        revoked_at=utcnow()))
