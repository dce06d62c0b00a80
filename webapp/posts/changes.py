"""Change a post's text and schedule together, in one transaction: all of it or nothing.

The one way in for both: the JSON API's PATCH, the editor's schedule and unpublish-time
forms (with the text typed beside them) and the calendar's move. Saving the text and then
the schedule in two transactions would keep the new text when the schedule is refused,
or when the publish leader moves the post in between; here the row is locked once, every
part is checked against it, and one commit writes them all (with their audit rows).
"""

from collections.abc import Callable
from datetime import datetime

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PUBLISH
from ..models import Post
from ..ops import audit
from . import gate
from .edits import (
    TypedText,
    check_text,
    check_times,
    lock_post,
    refuse_stale_text,
    refusing_a_taken_slug,
    write_text,
)
from .errors import PostError, StalePost
from .lifecycle import SCHEDULABLE
from .unsaved import forget

Approval = Callable[[Post, datetime], None]


def change_post(post_id: int, version: int, text: TypedText | None,
                times: dict[str, datetime | None], approval: Approval | None = None) -> Post:
    """Save new text and/or times against version, or raise and write nothing.

    times holds publish_at and/or unpublish_at as sent: a moment, or None to clear it.
    text carries the version it was typed on (the API's: version; an editor's page may have
    refreshed its publication panel since, see TypedText). Someone else's newer text is
    refused first (StaleText), then any change since version (StalePost).

    A publish time from someone whose posts need review is refused (gate.NeedsReview)
    unless approval is given: a reviewer's, written in this transaction (post, now), which
    may refuse it all too (webapp.posts.review).
    """
    fields = check_text(post_id, text) if text is not None else None
    if approval is None and times.get("publish_at") is not None:
        gate.refuse_going_live(post_id, "publish_at")
    now = database_now()  # before the lock: reading the clock ends a transaction
    post = lock_post(post_id)
    gate.refuse_edit(post)
    if text is not None and fields is not None:
        refuse_stale_text(post, text, fields)
    try:
        if post.version != version:
            raise StalePost(post)
        _change_times(post, times, now, "post.approve" if approval else "post.schedule")
        post.version += 1
        post.updated_at = now
        if approval is not None:
            approval(post, now)
    except PostError:
        db.session.rollback()
        raise
    with refusing_a_taken_slug():
        if fields is not None:
            write_text(post, fields, now)
            forget(post_id)  # the saver's autosave: saved now
        db.session.commit()
    return post


def _change_times(post: Post, times: dict[str, datetime | None], now: datetime,
                  scheduling: str = "post.schedule") -> None:
    """Apply a new or cleared publish time, or a new or cleared unpublish time, to post
    (a new publish time audited as scheduling: a reviewer's is their approval)."""
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
        _set(post, scheduling, status="scheduled", publish_at=times["publish_at"],
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
    before = {name: getattr(post, name) for name in values}
    audit.record(action, audit.target("post", post.id, post.title),
                 audit.changes(before, values))
    for name, value in values.items():
        setattr(post, name, value)
    wake_scheduler(PUBLISH.name)
