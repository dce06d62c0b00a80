"""Sign-in sessions, roles checked on the server, and limits on password guessing."""

from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from urllib.parse import urlsplit

import sqlalchemy as sa
from flask import Flask, abort, request
from flask.sessions import SecureCookieSessionInterface
from flask_login import current_user
from werkzeug.middleware.proxy_fix import ProxyFix

from .extensions import csrf, db, login_manager
from .models import LoginFailure, User, utcnow

FAILURE_WINDOW = timedelta(minutes=15)
MAX_FAILURES_PER_ACCOUNT = 5
MAX_FAILURES_PER_ADDRESS = 20


def init_app(app: Flask) -> None:
    """Set up Flask-Login, CSRF protection and safe session cookies."""
    login_manager.init_app(app)
    login_manager.login_view = "auth.login"
    login_manager.login_message = "Please sign in to see that page."
    login_manager.login_message_category = "info"
    csrf.init_app(app)
    app.config.setdefault("SESSION_COOKIE_HTTPONLY", True)
    app.config.setdefault("SESSION_COOKIE_SAMESITE", "Lax")
    app.config.setdefault("REMEMBER_COOKIE_HTTPONLY", True)
    app.config.setdefault("REMEMBER_COOKIE_SAMESITE", "Lax")
    app.config.setdefault("WTF_CSRF_TIME_LIMIT", None)  # tied to the session instead
    app.session_interface = SessionInterface()
    if app.config.get("TRUST_PROXY_HOPS"):
        hops = app.config["TRUST_PROXY_HOPS"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=0)


class SessionInterface(SecureCookieSessionInterface):
    """Mark the session cookie Secure whenever the request came over HTTPS."""

    def get_cookie_secure(self, app: Flask) -> bool:
        # behind the platform's router, ProxyFix has applied X-Forwarded-Proto already
        return bool(app.config.get("SESSION_COOKIE_SECURE") or request.is_secure)


@login_manager.user_loader
def load_user(session_id: str) -> User | None:
    """Return the signed-in user if the session is still valid."""
    user_id, _, version = session_id.partition(":")
    if not user_id.isdigit():
        return None
    user = db.session.get(User, int(user_id))
    if user is None or not user.active or str(user.session_version) != version:
        return None
    return user


def role_required(role: str) -> Callable:
    """Refuse the view to anonymous users (sign in) and to lower roles (403)."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            if not current_user.is_authenticated:
                return login_manager.unauthorized()
            if not current_user.can(role):
                abort(403)
            return view(*args, **kwargs)

        return wrapped

    return decorator


def is_safe_next(target: str | None) -> bool:
    """Accept only local paths for next= (no scheme, no host, no //, no backslash)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return False
    if "\\" in target or any(ord(c) < 32 for c in target):
        return False
    parts = urlsplit(target)
    return not parts.scheme and not parts.netloc


def client_address() -> str:
    """Return the client's address (ProxyFix has already trusted the router's header)."""
    return (request.remote_addr or "unknown")[:64]


def too_many_failures(email: str, address: str) -> bool:
    """Return whether sign-in is locked for this account or address for now."""
    since = utcnow() - FAILURE_WINDOW
    per_account = db.session.scalar(sa.select(sa.func.count()).where(
        LoginFailure.email == email, LoginFailure.at >= since))
    per_address = db.session.scalar(sa.select(sa.func.count()).where(
        LoginFailure.address == address, LoginFailure.at >= since))
    return per_account >= MAX_FAILURES_PER_ACCOUNT or per_address >= MAX_FAILURES_PER_ADDRESS


def record_failure(email: str, address: str) -> None:
    """Remember one failed sign-in."""
    db.session.add(LoginFailure(email=email[:254], address=address))
    db.session.commit()


def clear_failures(email: str) -> None:
    """Forget an account's failures after it signs in."""
    db.session.execute(sa.delete(LoginFailure).where(LoginFailure.email == email))
    db.session.commit()
