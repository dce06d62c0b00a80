"""Posts: every write (editors' and the publish leader's) and every read, in one place.

Every function checks its input before writing and writes in one transaction,
so bad input changes nothing. The text is edited in `edits`, the status moves
in `lifecycle` (one fenced conditional UPDATE for editors and the leader
alike), text and schedule change together in `changes` (the forms and the API
alike), the reading side is in `queries`, and `previews` makes the links that show a
draft to someone without an account, `releases` holds many changes that go live as one
(`release_apply`: the leader's one transaction). The modules lend each other public names only;
what the rest of the house may use is exported here. It may import the bottom of the house,
leadership (keys, for wake-ups), ops (audit, metrics) and site (the version readers'
validators follow, bumped in the same transaction); nothing that builds on posts
(plugins, timers, scheduling, views). `autosaves` keeps an editor's unsaved text beside a
post; `conflicts` says who saved a post since a form opened, and what changed.
"""

from . import autosaves, conflicts, gate, release_preview, releases, review, revisions
from .changes import change_post
from .edits import (
    MAX_BODY_BYTES,
    MAX_ID,
    MAX_SLUG,
    MAX_TITLE,
    PostFields,
    TypedText,
    check_fields,
    check_times,
    content_digest,
    create_post,
    get_post,
    is_slug,
    restore_revision,
    slugify,
    update_post,
)
from .errors import (
    PostError,
    PostNotFound,
    PublishingFrozen,
    PublishTimeInPast,
    SlugTaken,
    StalePost,
    StaleText,
)
from .gate import NeedsReview
from .lifecycle import (
    BATCH_SIZE,
    SCHEDULABLE,
    came_due,
    hold_due,
    next_due,
    next_due_reads,
    publish_due,
    publish_now,
    unpublish_expired,
    unpublish_post,
    unschedule_post,
    write_outbox,
)
from .pending import (
    ChangeState,
    cancel_change,
    pending_change,
    schedule_change,
    upcoming_changes,
)
from .pending import apply_due as apply_due_changes
from .previews import (
    SHAREABLE,
    Preview,
    create_link,
    live_links,
    preview_for_token,
    revoke_link,
)
from .queries import (
    COUNT_CAP,
    LISTING,
    PUBLISHED_POST_VALIDATORS,
    PostPage,
    api_page,
    hidden_post,
    late,
    list_posts,
    listing,
    lists_change_at,
    published_by_slug,
    published_page,
    published_post,
    recently_published,
    status_counts,
    upcoming,
)
from .release_apply import apply_due as apply_due_releases

__all__ = [
    "BATCH_SIZE", "COUNT_CAP", "MAX_BODY_BYTES", "MAX_ID", "MAX_SLUG", "MAX_TITLE",
    "LISTING", "PUBLISHED_POST_VALIDATORS", "SCHEDULABLE", "SHAREABLE",
    "PostError", "PostFields", "PostNotFound", "PostPage", "PublishingFrozen",
    "PublishTimeInPast", "SlugTaken", "StalePost", "StaleText", "TypedText", "ChangeState",
    "apply_due_changes", "apply_due_releases", "autosaves", "cancel_change", "conflicts", "gate",
    "NeedsReview", "pending_change", "release_preview", "releases", "review", "revisions",
    "schedule_change", "upcoming_changes",
    "api_page", "came_due", "change_post", "check_fields", "check_times", "content_digest",
    "create_link",
    "create_post", "get_post", "hidden_post", "hold_due", "is_slug", "late", "list_posts",
    "listing", "lists_change_at", "live_links",
    "next_due", "next_due_reads", "preview_for_token", "Preview", "publish_due",
    "publish_now",
    "published_by_slug", "published_page", "published_post",
    "recently_published", "revoke_link",
    "slugify", "status_counts", "unpublish_expired", "unpublish_post",
    "unschedule_post", "upcoming", "update_post", "restore_revision", "write_outbox",
]
