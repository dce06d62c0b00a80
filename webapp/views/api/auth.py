"""Authenticate API requests by bearer token and check the token's role, before the body.

Everything that can refuse a request is decided from its headers, before its body is
read: no token or a malformed one (401), an address past its allowance of failed tokens
(429), an unknown, revoked or expired token (401), a role too low (403), an everyday token
on a dangerous action (403). A stranger's 10 MB upload is answered unread. The body is
then read whole with no transaction open, so a slow upload keeps none idle (the server
ends those idle for LEADER_STALE_SECONDS / 2).
"""

from collections.abc import Callable
from functools import wraps

from flask import current_app, g, request

from ...accounts import ratelimit, stepup, throttle
from ...accounts.security import client_address
from ...accounts.tokens import user_for_token
from ...extensions import db
from .errors import ApiError

PUBLIC = {"api.openapi"}  # the contract is readable before one has a token


def authenticate() -> None:
    """Accept a bearer token and nothing else (no session cookie): the before-request hook."""
    if request.endpoint in PUBLIC:
        return
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "Authentication required",
                       "Send an API token: Authorization: Bearer <token> (create one "
                       "under Settings, or with `flask --app webapp create-token EMAIL`).")
    g.api_user = _token_user(token.strip())
    view = current_app.view_functions.get(request.endpoint or "")
    check_role(getattr(view, "api_role", None))
    if stepup.needs_fresh_proof(view) and not stepup.token_may(g.api_user):
        raise ApiError(403, "Forbidden", stepup.TOKEN_REFUSAL)
    db.session.commit()  # the checks' transaction ends before a slow body arrives
    request.get_data(cache=True)


def _token_user(token: str):
    """Return the token's user; refuse an unknown one, and any once the address has sent
    too many unknown ones."""
    address = client_address()
    wait = ratelimit.wait_seconds("api-token", address)
    if wait:
        raise ApiError(429, "Too many requests",
                       "Too many unknown tokens came from this address: try again in "
                       f"{throttle.wait_message(wait)}.", headers={"Retry-After": str(wait)})
    user = user_for_token(token)
    if user is None:
        ratelimit.record("api-token", address)
        raise ApiError(401, "Invalid token", "That token is unknown, revoked, expired, or its "
                                             "user is deactivated.")
    return user


def check_role(role: str | None) -> None:
    """Refuse (403) a token whose user has a lower role than role (None: any role)."""
    if role is not None and not g.api_user.can(role):
        raise ApiError(403, "Forbidden", f"This needs the {role} role; the token's "
                                         f"user is {g.api_user.role}.")


def api_role(role: str) -> Callable:
    """Refuse the endpoint (403) to tokens whose user has a lower role (authenticate reads
    the role from the view, so the refusal comes before the body is read)."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(*args, **kwargs):
            check_role(role)
            return view(*args, **kwargs)

        wrapped.api_role = role  # type: ignore[attr-defined]
        return wrapped

    return decorator
