"""Authenticate API requests by bearer token and check the token's role."""

from collections.abc import Callable
from functools import wraps

from flask import g, request

from ...accounts.tokens import user_for_token
from .errors import ApiError

PUBLIC = {"api.openapi"}  # the contract is readable before one has a token


def authenticate() -> None:
    """Accept a bearer token and nothing else (no session cookie): the before-request hook."""
    if request.endpoint in PUBLIC:
        return
    # Read the whole body before the token query opens a transaction: a slow upload must not
    # keep one idle (the server ends those after DB_IDLE_IN_TRANSACTION_SECONDS).
    request.get_data(cache=True)
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "Authentication required",
                       "Send an API token: Authorization: Bearer <token> (create one "
                       "under Settings, or with `flask --app webapp create-token EMAIL`).")
    user = user_for_token(token.strip())
    if user is None:
        raise ApiError(401, "Invalid token", "That token is unknown, revoked, expired, or its "
                                             "user is deactivated.")
    g.api_user = user


def api_role(role: str) -> Callable:
    """Refuse the endpoint (403) to tokens whose user has a lower role."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(*args, **kwargs):
            if not g.api_user.can(role):
                raise ApiError(403, "Forbidden", f"This needs the {role} role; the token's "
                                                 f"user is {g.api_user.role}.")
            return view(*args, **kwargs)

        return wrapped

    return decorator
