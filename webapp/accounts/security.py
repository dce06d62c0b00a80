"""Sign-in cookies, roles checked on the server, safe next= targets and client addresses."""

from collections.abc import Callable
from functools import wraps
from urllib.parse import urlsplit

from flask import Flask, Response, abort, flash, redirect, request, url_for
from flask.sessions import SecureCookieSessionInterface
from flask_login import current_user
from werkzeug.middleware.proxy_fix import ProxyFix

from ..extensions import login_manager
from ..models import User
from .sessions import lifetimes, load_session
from .throttle import address_bucket

UPLOAD_LIMIT = 2 * 1024 * 1024


def init_app(app: Flask) -> None:
    """Set up sign-in's pages and prompts and safe session cookies (Flask-Login and CSRF
    protection are bound first, by create_app)."""
    from .emails import shown

    app.add_template_filter(shown, "email_shown")
    login_manager.login_view = "auth.login"
    login_manager.login_message = "Please sign in to see that page."
    login_manager.login_message_category = "info"
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
    # the cookie outlives a browser restart as long as the server-side session may
    app.config["PERMANENT_SESSION_LIFETIME"] = max(
        lifetimes(role, app.config)[1] for role in User.ROLES)
    app.session_interface = SessionInterface()
    app.before_request(require_new_password)
    app.before_request(require_two_factor)


def trust_proxy_hops(app: Flask) -> None:
    """Take the client's address and scheme from the last TRUST_PROXY_HOPS routers'
    X-Forwarded-For and -Proto (WSGI), never from a header the client sent itself."""
    if app.config["TRUST_PROXY_HOPS"]:
        hops = app.config["TRUST_PROXY_HOPS"]
        proxied = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=0)
        app.wsgi_app = proxied  # type: ignore[method-assign]


def _replace_default(app: Flask, name: str, flask_default: object, value: object) -> None:
    if app.config.get(name) == flask_default:
        app.config[name] = value


class SessionInterface(SecureCookieSessionInterface):
    """Mark the session cookie Secure over HTTPS; never put it on an answer caches may share."""

    def get_cookie_secure(self, app: Flask) -> bool:
        # behind the platform's router, ProxyFix has applied X-Forwarded-Proto already
        return bool(app.config["SESSION_COOKIE_SECURE"] or request.is_secure)

    def save_session(self, app: Flask, session, response: Response) -> None:
        """Save the session, but not onto a response a shared cache may keep and replay.

        The permanent session is re-sent on every response to keep it alive: a public page
        (the feed, the icon, static files, their 304s) skips that refresh, the next admin
        page does it. A public response that changed the session becomes private instead.
        """
        if shared_cache_may_keep(response):
            if not session.modified:
                return
            response.headers["Cache-Control"] = "private, no-cache"
        super().save_session(app, session, response)


def shared_cache_may_keep(response: Response) -> bool:
    """Return whether a CDN or proxy may store response (Cache-Control public or s-maxage)."""
    control = response.cache_control
    return bool(control.public or control.s_maxage is not None)


@login_manager.user_loader
def load_user(secret: str) -> User | None:
    """Return the signed-in user while their server-side session is live."""
    return load_session(secret, active=request.headers.get(POLL_HEADER) != "1")


# sent by static/js/soloist.js on the requests of an element that polls (hx-trigger
# "every …"): a page refreshing itself is not its user at work, so it does not hold off the
# idle timeout. The client could leave it out, but only to keep its own session shorter.
POLL_HEADER = "X-Soloist-Poll"


def role_required(role: str) -> Callable:
    """Refuse the view to anonymous users (sign in) and to lower roles (403)."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(*args, **kwargs):
            return refusal(role) or view(*args, **kwargs)

        setattr(wrapped, "required_role", role)  # noqa: B010 (the menu shows its link to it)
        return wrapped

    return decorator


def required_role(view: Callable) -> str:
    """Return the role a view declared with role_required."""
    return getattr(view, "required_role")  # noqa: B009 (set by role_required)


def refusal(role: str) -> Response | None:
    """Return the sign-in page for an anonymous user, refuse (403) a lower role; else None."""
    if not current_user.is_authenticated:
        if request.headers.get("HX-Request"):
            abort(401)  # a polled fragment keeps its content and says it lost touch
        return login_manager.unauthorized()
    if not current_user.can(role):
        abort(403)
    return None


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


def require_two_factor():
    """Send a user the policy says must use a second factor to set one up, until they have
    (the two-factor pages, sign-out and the public site stay open)."""
    if not current_user.is_authenticated or request.blueprint in ("site", "two_factor") \
            or request.endpoint in PASSWORD_CHANGE_ENDPOINTS or \
            request.path.startswith("/api/") or current_user.must_change_password:
        return None
    from . import passkeys, totp

    if totp.is_on(current_user) or not totp.required_for(current_user) or \
            passkeys.has_any(current_user):
        return None
    if request.headers.get("HX-Request"):
        abort(401)
    flash("Your account must use two-factor sign-in: set it up to go on.", "info")
    return redirect(url_for("two_factor.index"))

def is_safe_next(target: str | None) -> bool:
    """Accept only local paths for next= (no scheme, no host, no //, no backslash)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return False
    if "\\" in target or any(ord(c) < 32 for c in target):
        return False
    parts = urlsplit(target)
    return not parts.scheme and not parts.netloc


def client_address() -> str:
    """Return the client's address, an IPv6 client's /64 (ProxyFix applied the router's)."""
    return address_bucket(request.remote_addr or "unknown")
