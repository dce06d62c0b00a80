"""The end of a sign-in, however it was proved (a password and its second step, a passkey):
the browser trusted, a fresh session started."""

import secrets

from flask import request, session
from flask_login import login_user

from ..extensions import db
from ..models import User
from . import devices, sessions, stepup, throttle


def start(user: User, address: str, device_id: int | None, method: str) -> None:
    """Forget this browser's failures (the audit log keeps them), trust it (its device
    cookie), start a fresh server-side session and cookie for user (no fixation).

    method says how it was proved ("password + totp"): the session's audit row keeps it with
    the browser, and its last step is the session's latest proof.
    """
    throttle.clear_failures(user.email, address, device_id)
    if user.must_change_password:  # a one-time password opens this session, then no other
        user.set_password(secrets.token_urlsafe(32))  # (this one chooses the real one)
    agent = request.headers.get("User-Agent", "")
    device = devices.remember(user, sessions.header_text(agent))
    db.session.commit()
    session.clear()
    session.permanent = True
    sessions.start_session(user, address, agent, {"method": method, "device": device.id,
                                                  "known_device": device.id == device_id})
    login_user(user)
    stepup.proved(method.rsplit(" + ", 1)[-1])


def start_without_password(user: User, address: str, method: str) -> None:
    """Start the session of a sign-in proved another way than the password (a passkey)."""
    trusted = devices.presented(user.email)
    start(user, address, trusted.id if trusted else None, method)
