"""Re-export the typed models, one module per concept; import them from here."""

from .accounts import (
    AccountPolicy,
    ApiToken,
    LoginFailure,
    Passkey,
    RateLimitHit,
    RecoveryCode,
    User,
    UserDevice,
    UserSession,
    WebAuthnChallenge,
)
from .audit import AuditEvent
from .autosaves import PostAutosave
from .leadership import LeaderEvent, LeaderState, ProcessVersion
from .media import MediaFile, MediaVariant
from .ops import Deploy, Freeze, ReleaseBackfill
from .plugins import HookDelivery, PluginDocument, PluginState
from .posts import OutboxEvent, Post
from .previews import PreviewLink
from .purges import CachePurge
from .releases import Release, ReleaseItem
from .reviews import PostReview
from .revisions import PostRevision, ScheduledChange
from .site import SiteState
from .timers import Timer, TimerRun
from .types import UTCDateTime, utcnow
from .webhooks import WebhookDelivery, WebhookEndpoint

__all__ = [
    "AccountPolicy",
    "ApiToken",
    "AuditEvent",
    "CachePurge",
    "Deploy",
    "Freeze",
    "HookDelivery",
    "LeaderEvent",
    "LeaderState",
    "LoginFailure",
    "MediaFile",
    "MediaVariant",
    "Passkey",
    "RateLimitHit",
    "WebAuthnChallenge",
    "RecoveryCode",
    "UserDevice",
    "OutboxEvent",
    "PluginDocument",
    "PluginState",
    "Post",
    "PostAutosave",
    "PostReview",
    "PostRevision",
    "PreviewLink",
    "Release",
    "ReleaseBackfill",
    "ReleaseItem",
    "ProcessVersion",
    "ScheduledChange",
    "SiteState",
    "Timer",
    "TimerRun",
    "UTCDateTime",
    "User",
    "UserSession",
    "WebhookDelivery",
    "WebhookEndpoint",
    "utcnow",
]
