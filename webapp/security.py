"""Sign-in sessions, roles checked on the server, and limits on password guessing."""

import re
import secrets
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from urllib.parse import urlsplit

import sqlalchemy as sa
from flask import Flask, abort, redirect, request, url_for
from flask.sessions import SecureCookieSessionInterface
from flask_login import current_user
from werkzeug.middleware.proxy_fix import ProxyFix

from .extensions import csrf, db, login_manager
from .models import LoginFailure, User, utcnow

FAILURE_WINDOW = timedelta(minutes=15)
MAX_FAILURES_PER_ACCOUNT = 5
MAX_FAILURES_PER_ADDRESS = 20
UPLOAD_LIMIT = 2 * 1024 * 1024
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def init_app(app: Flask) -> None:
    """Set up Flask-Login, CSRF protection and safe session cookies."""
    login_manager.init_app(app)
    login_manager.login_view = "auth.login"
    login_manager.login_message = "Please sign in to see that page."
    login_manager.login_message_category = "info"
    csrf.init_app(app)
    # Flask's defaults already hold these keys (SameSite None, a 500 kB form field limit),
    # so setdefault would keep them: replace Flask's defaults unless configured otherwise
    _replace_default(app, "SESSION_COOKIE_SAMESITE", None, "Lax")
    _replace_default(app, "MAX_CONTENT_LENGTH", None, UPLOAD_LIMIT)
    # a post body may be 200 kB; percent-encoded form data can triple that
    _replace_default(app, "MAX_FORM_MEMORY_SIZE", 500_000, UPLOAD_LIMIT)
    app.config["SESSION_COOKIE_HTTPONLY"] = True
    app.config.setdefault("REMEMBER_COOKIE_HTTPONLY", True)
    app.config.setdefault("REMEMBER_COOKIE_SAMESITE", "Lax")
    app.config.setdefault("WTF_CSRF_TIME_LIMIT", None)  # tied to the session instead
    app.session_interface = SessionInterface()
    app.before_request(refuse_nul_characters)
    app.before_request(require_new_password)
    if app.config.get("TRUST_PROXY_HOPS"):
        hops = app.config["TRUST_PROXY_HOPS"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=0)


def _replace_default(app: Flask, name: str, flask_default: object, value: object) -> None:
    if app.config.get(name) == flask_default:
        app.config[name] = value


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
        def wrapped(*args, **kwargs):
            if not current_user.is_authenticated:
                if request.headers.get("HX-Request"):
                    abort(401)  # a polled fragment keeps its content and says it lost touch
                return login_manager.unauthorized()
            if not current_user.can(role):
                abort(403)
            return view(*args, **kwargs)

        return wrapped

    return decorator


def require_new_password():
    """Send a user whose password an admin set to the settings page until they change it."""
    if (current_user.is_authenticated and current_user.must_change_password
            and request.endpoint not in PASSWORD_CHANGE_ENDPOINTS
            and request.blueprint != "site" and not request.path.startswith("/api/")):
        if request.headers.get("HX-Request"):
            abort(401)
        return redirect(url_for("auth.settings"))
    return None


PASSWORD_CHANGE_ENDPOINTS = {"auth.settings", "auth.logout", "auth.login", "static"}

NUL_REFUSED = ("Text with a NUL character (\\0) cannot be saved or searched for: remove it "
               "and try again.")


def refuse_nul_characters():
    """Refuse a form or query with a NUL character, which PostgreSQL text cannot hold.

    The JSON API checks its own bodies and names the field (views/api/).
    """
    if request.path.startswith("/api/"):
        return None
    for values in (request.args, request.form):
        if any("\x00" in value for _, value in values.items(multi=True)):
            from .views.errors import render_error

            return render_error(400, NUL_REFUSED)
    return None


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


# Accounts -------------------------------------------------------------------------------

MAX_USER_ID = 2**31 - 1  # users.id is an INTEGER: a larger id in a URL names nobody


def find_user(email: str) -> User | None:
    """Return the user with this (lower-case) email, if any."""
    return db.session.scalar(sa.select(User).where(User.email == email))


def get_user(user_id: int) -> User | None:
    """Return the user with this id, if any."""
    return db.session.get(User, user_id) if 0 < user_id <= MAX_USER_ID else None


def list_users() -> list[User]:
    """Return every user, by email."""
    return list(db.session.scalars(sa.select(User).order_by(User.email)))


class AccountError(ValueError):
    """An account change was refused; errors maps a form field (or "form") to why."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors


def one_time_password() -> str:
    """Return a random password for an admin to hand over once."""
    return secrets.token_urlsafe(12)


def create_account(email: str, role: str) -> tuple[User, str]:
    """Create an active user with a one-time password they must change; return both."""
    email = email.strip().lower()
    errors = {}
    if not EMAIL.match(email) or len(email) > 254:
        errors["email"] = "Type an email address, like ada@example.com."
    elif db.session.scalar(sa.select(User.id).where(User.email == email)) is not None:
        errors["email"] = "A user with this email exists already."
    if role not in User.ROLES:
        errors["role"] = "Pick admin, editor or viewer."
    if errors:
        raise AccountError(errors)
    password = one_time_password()
    # no time zone yet: the first sign-in takes the browser's
    user = User(email=email, role=role, active=True, timezone="", must_change_password=True)
    user.set_password(password)
    db.session.add(user)
    try:
        db.session.commit()
    except sa.exc.IntegrityError:
        db.session.rollback()
        raise AccountError({"email": "A user with this email exists already."}) from None
    return user, password


def reset_password(user: User) -> str:
    """Give user a new one-time password and end their sessions; return the password."""
    password = one_time_password()
    user.set_password(password)
    user.must_change_password = True
    user.session_version += 1
    db.session.commit()
    return password


def change_role(user: User, role: str) -> None:
    """Change user's role, never leaving the site without an active admin."""
    if role not in User.ROLES:
        raise AccountError({"role": "Pick admin, editor or viewer."})
    if role != "admin":
        _keep_an_admin(user, "change the role of")
    user.role = role
    db.session.commit()


def set_active(user: User, active: bool) -> None:
    """Activate or deactivate user (ending their sessions), keeping an active admin."""
    if not active:
        _keep_an_admin(user, "deactivate")
        user.session_version += 1
    user.active = active
    db.session.commit()


def _keep_an_admin(user: User, action: str) -> None:
    """Refuse to take away the last active admin (rows locked against a concurrent change)."""
    if not (user.active and user.role == "admin"):
        return
    admins = db.session.scalars(
        sa.select(User.id).where(User.role == "admin", User.active.is_(True))
        .with_for_update()).all()
    if set(admins) <= {user.id}:
        db.session.rollback()
        raise AccountError({"form": f"You cannot {action} the last active admin: make another "
                                    "user an admin first."})
