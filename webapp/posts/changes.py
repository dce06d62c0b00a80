"""Change a post's text and schedule together, in one transaction: all of it or nothing.

The JSON API's PATCH may send both. Saving the text and then the schedule in two
transactions would keep the new text when the schedule is refused, or when the
publish leader moves the post in between; here the row is locked once, every part is
checked against it, and one commit writes them all (with their audit rows).
"""

from datetime import datetime

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PUBLISH
from ..models import Post
from ..ops import audit
from ..site import state
from . import revisions
from .edits import (
    SLUG_TAKEN,
    _commit_or_slug_taken,
    _slug_taken,
    _text_changes,
    check_fields,
    updated,
)
from .errors import PostError
from .lifecycle import SCHEDULABLE, _audit_post, _locked, check_times


def change_post(post_id: int, version: int, text: tuple[str, str, str] | None,
                times: dict[str, datetime | None]) -> Post:
    """Save new (title, slug, body) and/or times against version, or raise and write nothing.

    times holds publish_at and/or unpublish_at as sent: a moment, or None to clear it.
    """
    fields = check_fields(*text) if text is not None else None
    now = database_now()  # before the lock: reading the clock ends a transaction
    if fields is not None and _slug_taken(fields.slug, except_id=post_id):
        raise PostError(dict(SLUG_TAKEN))
    post = _locked(post_id, version)
    try:
        _change_times(post, times, now)
    except PostError:
        db.session.rollback()
        raise
    text_changed = fields is not None and (fields.title, fields.body) != (post.title, post.body)
    if fields is not None:
        audit.record("post.edit", audit.target("post", post.id, fields.title),
                     _text_changes(post, fields))
        post.title, post.slug, post.body = fields.title, fields.slug, fields.body
        if post.status == "published":  # under the row lock: readers see the new text
            state.bump(now)
    if text_changed:
        revisions.keep(post.id, post.title, post.body, "edit", post.status == "published")
    post.version += 1
    post.updated_at = now
    if text_changed and post.status == "published":
        db.session.flush()
        updated([post], now)
    _commit_or_slug_taken()
    return post


def _change_times(post: Post, times: dict[str, datetime | None], now: datetime) -> None:
    """Apply a new or cleared publish time, or a new or cleared unpublish time, to post."""
    if "publish_at" in times and times["publish_at"] is None:
        if times.get("unpublish_at") is not None:
            raise PostError({"unpublish_at": "An unpublish time needs a publish time, and "
                                             "publish_at clears it."})
        if post.status == "scheduled":  # back to draft
            _set(post, "post.unschedule", status="draft", publish_at=None, unpublish_at=None)
    elif "publish_at" in times:
        if post.status not in SCHEDULABLE:
            raise PostError({"publish_at": "The post is published already."})
        unpublish_at = times.get("unpublish_at", post.unpublish_at)
        check_times(times["publish_at"], unpublish_at, now)
        _set(post, "post.schedule", status="scheduled", publish_at=times["publish_at"],
             unpublish_at=unpublish_at)
    elif "unpublish_at" in times:
        _change_unpublish_time(post, times["unpublish_at"], now)


def _change_unpublish_time(post: Post, unpublish_at: datetime | None, now: datetime) -> None:
    """Set or clear when a published or scheduled post is taken down."""
    if unpublish_at is not None and post.status not in ("published", "scheduled"):
        raise PostError({"unpublish_at": f"An unpublish time needs a publish time: the post "
                                         f"is {post.status}, so send publish_at too."})
    if post.status == "published":
        check_times(None, unpublish_at, now)
        _set(post, "post.unpublish_time", unpublish_at=unpublish_at)
    elif post.status == "scheduled":
        check_times(None, unpublish_at, now)
        if (unpublish_at is not None and post.publish_at is not None
                and unpublish_at <= post.publish_at):
            raise PostError({"unpublish_at": "The unpublish time must come after the post's "
                                             "publish time."})
        _set(post, "post.schedule", unpublish_at=unpublish_at)
    # a draft or an unpublished post has no unpublish time to clear


def _set(post: Post, action: str, **values) -> None:
    """Record action with what changes, change post, and wake the publish leader at commit."""
    _audit_post(action, post, **values)
    for name, value in values.items():
        setattr(post, name, value)
    wake_scheduler(PUBLISH.name)
