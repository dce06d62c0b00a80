"""Scheduled changes: new text for a live post, swapped in by the publish leader at its time.

A published post carries at most one pending change (editors write, edit and cancel it
here). At its time the publish leader swaps it in exactly once, fenced like publishing:
the change row is taken FOR UPDATE SKIP LOCKED and deleted, the post is updated with the
text of the change it holds (a version bump), and the post.updated outbox row, the revision
and the public pages' validators are written in the same transaction.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PUBLISH
from ..models import Post, ScheduledChange
from ..ops import audit
from ..site import state
from . import gate, revisions
from .edits import check_fields, content_digest, get_post, updated
from .errors import PostError, PublishTimeInPast
from .lifecycle import move


@dataclass(frozen=True)
class ChangeState:
    """A pending change as the editor sees it: the row, and whether the post moved on since."""

    change: ScheduledChange
    outdated: bool  # the live text changed after this change was written against it


def change_of(post_id: int, lock: bool = False) -> ScheduledChange | None:
    """Return the post's pending change row, if it has one (lock: FOR UPDATE, to write it)."""
    query = sa.select(ScheduledChange).where(ScheduledChange.post_id == post_id)
    return db.session.scalar(query.with_for_update() if lock else query)


def pending_change(post: Post) -> ChangeState | None:
    """Return the post's pending change, if it has one."""
    change = change_of(post.id)
    if change is None:
        return None
    return ChangeState(change, change.base_digest != content_digest(post.title, post.slug,
                                                                   post.body))


def check_apply_time(post: Post, apply_at: datetime, now: datetime) -> None:
    """Refuse a time that has passed, or one at or after the post comes down."""
    if apply_at <= now:
        raise PublishTimeInPast(apply_at, field="apply_at")
    if post.unpublish_at is not None and apply_at >= post.unpublish_at:
        raise PostError({"apply_at": "The post is unpublished before then: pick a time before "
                                     "its unpublish time, or change that first."})


def schedule_change(post_id: int, title: str, body: str, apply_at: datetime,
                    change_id: int | None = None) -> ScheduledChange:
    """Write (or, with change_id, edit) the pending change of a published post.

    Raise PostError naming each bad field; a change_id that is gone (swapped in or
    cancelled meanwhile) is refused rather than scheduled again.
    """
    post = get_post(post_id)
    gate.refuse_edit(post)  # a contributor's: never on a live post
    errors: dict[str, str] = {}
    try:
        fields = check_fields(title, post.slug, body)
    except PostError as exc:
        errors.update(exc.errors)
    now = database_now()
    if post.status != "published":
        errors["form"] = (f"This post is {post.status}: a scheduled change is for a live post. "
                          "Edit the text itself instead.")
    else:
        try:
            check_apply_time(post, apply_at, now)
        except PostError as exc:
            errors.update(exc.errors)
    if errors:
        raise PostError(errors)
    if (fields.title, fields.body) == (post.title, post.body):
        raise PostError({"body": "This is the text the post has now: change something first."})
    existing = change_of(post_id, lock=True)
    if change_id is not None and (existing is None or existing.id != change_id):
        db.session.rollback()
        raise PostError({"form": "That scheduled change went out or was cancelled meanwhile; "
                                 "nothing was saved. Your text is kept below."})
    if change_id is None and existing is not None:
        db.session.rollback()
        raise PostError({"form": "This post has a scheduled change already: edit or cancel it."})
    author_id, name = revisions.author_now()
    change = existing or ScheduledChange(post_id=post_id)
    before = {"apply_at": existing.apply_at} if existing else {}
    change.title, change.body, change.apply_at = fields.title, fields.body, apply_at
    change.base_version = post.version
    change.base_digest = content_digest(post.title, post.slug, post.body)
    change.author_id, change.author = author_id, name[:254]
    db.session.add(change)
    detail: dict[str, Any] = audit.changes(before, {"apply_at": apply_at}) if existing else {
        "apply_at": apply_at}
    detail["body"] = audit.text_size(fields.body)
    audit.record("post.change_edit" if existing else "post.change_schedule",
                 audit.target("post", post.id, post.title), detail)
    wake_scheduler(PUBLISH.name)  # delivered at commit: the leader sleeps until the time
    db.session.commit()
    return change


def cancel_change(post_id: int) -> None:
    """Drop the post's pending change, or raise PostError if it has none (any more)."""
    post = get_post(post_id)
    gone = db.session.execute(sa.delete(ScheduledChange).where(
        ScheduledChange.post_id == post_id).returning(ScheduledChange.apply_at)).all()
    if not gone:
        db.session.rollback()
        raise PostError({"form": "There is no scheduled change to cancel: it went out already "
                                 "or was cancelled."})
    audit.record("post.change_cancel", audit.target("post", post.id, post.title),
                 {"apply_at": gone[0].apply_at})
    db.session.commit()


# -- the publish leader ------------------------------------------------------------------

def apply_due(now: datetime, limit: int, holder: str = "") -> list[tuple[int, float]]:
    """Swap in up to limit changes whose time has come; commit; return (post id, lag s).

    A batch is a handful of statements whatever its size: the changes are taken (locked)
    first, then their posts are updated in one statement that reads each one's new text
    from its change, the changes deleted in another, and the revisions and events added
    together (an UPDATE and a flush a change took 3.4 s for 2,000 due at once).
    """
    due = {change.post_id: change for change in db.session.scalars(
        sa.select(ScheduledChange).where(ScheduledChange.apply_at <= now)
        .order_by(ScheduledChange.apply_at, ScheduledChange.id).limit(limit)
        .with_for_update(skip_locked=True))}
    if not due:
        db.session.commit()
        return []
    taken = ScheduledChange.id.in_([change.id for change in due.values()])
    text = {column: sa.select(getattr(ScheduledChange, column))
            .where(taken, ScheduledChange.post_id == Post.id).scalar_subquery()
            for column in ("title", "body")}
    moved = move([Post.id.in_(list(due))], {**text, "updated_at": now}, Post.status)
    db.session.execute(sa.delete(ScheduledChange).where(taken)
                       .execution_options(synchronize_session=False))
    for row in moved:
        change = due[row.id]
        revisions.keep(row.id, change.title, change.body, "change", row.status == "published",
                       (change.author_id, change.author), at=now)
    done = [(row.id, (now - due[row.id].apply_at).total_seconds()) for row in moved]
    live = [row for row in moved if row.status == "published"]
    if live:
        updated(live, now, holder)
        state.bump(now)
    db.session.commit()
    return done


def next_change_read() -> sa.ScalarSelect:
    """Return the first apply_at ahead, as a scalar subquery (see lifecycle.next_due_reads)."""
    return sa.select(sa.func.min(ScheduledChange.apply_at)).scalar_subquery()


def changes_with_posts() -> sa.Select:
    """Return the read of scheduled changes as (apply_at, post id, post title), soonest first."""
    return (sa.select(ScheduledChange.apply_at, Post.id, Post.title)
            .join(Post, Post.id == ScheduledChange.post_id)
            .order_by(ScheduledChange.apply_at, Post.id))


def upcoming_changes(limit: int = 10) -> Sequence[sa.Row]:
    """Return the next scheduled changes (apply_at, post id, post title), soonest first."""
    return db.session.execute(changes_with_posts().limit(limit)).all()
