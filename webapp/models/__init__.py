"""Typed SQLAlchemy models, one module per area; import them from here."""

from .core import (
    LeaderEvent,
    LeaderState,
    LoginFailure,
    OutboxEvent,
    Post,
    User,
    UTCDateTime,
    utcnow,
)
from .ops import *  # noqa: F403  (API tokens and ops actions: the "Leader view" work)
from .plugins import *  # noqa: F403  (plugins, timers, webhooks: the "Plugins" work)

__all__ = [
    "LeaderEvent",
    "LeaderState",
    "LoginFailure",
    "OutboxEvent",
    "Post",
    "User",
    "UTCDateTime",
    "utcnow",
]
