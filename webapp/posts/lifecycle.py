"""A post's status: publish, unpublish, unschedule — by editors and by the publish leader
(a new time is a change of the post's schedule: changes.change_post).

Every status change is one conditional UPDATE (`move`) that only a post still
in the expected status matches, with its outbox rows in the same transaction.
So an editor's click and the leader's tick can never both win, and two
processes that both believe they lead can never publish a post twice.
"""

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import QueryableAttribute

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PLUGINS, PUBLISH
from ..models import Freeze, Post, Release, ReleaseItem, ScheduledChange
from ..ops import audit, freezes
from ..ops.metrics import observe_publish_lags
from ..site import state
from . import gate, revisions
from .edits import (
    TypedText,
    check_text,
    get_post,
    lock_post,
    refuse_stale_text,
    refusing_a_taken_slug,
    write_text,
)
from .errors import PostError, PublishingFrozen
from .outbox import write_outbox

SCHEDULABLE = ("draft", "scheduled", "unpublished")
BATCH_SIZE = 500


def move(conditions: list, values: dict, *also: QueryableAttribute[Any]) -> Sequence[sa.Row]:
    """Change the posts matching conditions, bumping their version; return (id, slug, title)

    and the columns also, if any, then the post's new version and its created_at (by name:
    what names the transition, see event_key).
    """
    return db.session.execute(
        sa.update(Post)
        .where(*conditions)
        .values(version=Post.version + 1, **values)
        .returning(Post.id, Post.slug, Post.title, *also, Post.version, Post.created_at)
        .execution_options(synchronize_session=False)
    ).all()


def _commit_moved(topic: str, moved: Sequence[sa.Row], now: datetime, writer: str) -> None:
    """Write the outbox rows of moved posts, wake the plugin leader for them, and commit.

    writer names who moved them: the publish leader's holder, or the editor's INSTANCE_NAME.

    Every move that comes here takes posts into or out of the public site: its pages'
    validators change in the same transaction (webapp.site.state).
    """
    if moved:
        write_outbox(topic, moved, now, writer)
        state.bump(now)
        wake_scheduler(PLUGINS.name)  # the outbox's hooks (webhooks, sitemap) at once
    db.session.commit()


# -- the publish leader ------------------------------------------------------------------

def _transition(now: datetime, source: str, target: str,
                due_column: QueryableAttribute[datetime | None], topic: str, limit: int,
                holder: str) -> list[int]:
    """Move up to limit due posts from source to target status, with outbox rows; commit."""
    due = (
        sa.select(Post.id)
        .where(Post.status == source, due_column <= now)
        .order_by(due_column, Post.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .cte("due")  # a CTE runs once; an IN (subquery) may be re-scanned past its LIMIT
    )
    values = {"status": target, "updated_at": now}
    if target == "published":
        values["published_at"] = now
    moved = move([Post.id == due.c.id, Post.status == source, due_column <= now], values,
                 due_column)
    if target == "published":
        revisions.mark_live([row.id for row in moved])
    _commit_moved(topic, moved, now, holder)
    if target == "published":
        observe_publish_lags((now - row[3]).total_seconds() for row in moved)
    return [row[0] for row in moved]


def publish_due(now: datetime, limit: int = BATCH_SIZE, holder: str = "") -> list[int]:
    """Publish up to limit scheduled posts whose publish_at has come; return their ids."""
    return _transition(now, "scheduled", "published", Post.publish_at, "post.published",
                       limit, holder)


def unpublish_expired(now: datetime, limit: int = BATCH_SIZE, holder: str = "") -> list[int]:
    """Unpublish up to limit published posts whose unpublish_at has come; return their ids."""
    return _transition(now, "published", "unpublished", Post.unpublish_at, "post.unpublished",
                       limit, holder)


def hold_due(now: datetime) -> list[tuple[int, str]]:
    """Take scheduled posts already due back to drafts, keeping their time; return them.

    A publishing freeze's "hold" on resume: an editor decides about each. The caller
    commits (with the end of the freeze).
    """
    moved = move([Post.status == "scheduled", Post.publish_at <= now],
                 {"status": "draft", "updated_at": now})
    return [(row.id, row.title) for row in moved]


def came_due(now: datetime) -> list[tuple[int, str]]:
    """Return the scheduled posts already due (id, title), first due first: what a publishing
    freeze's "publish" on resume lets go."""
    return [(row.id, row.title) for row in db.session.execute(
        sa.select(Post.id, Post.title).where(Post.status == "scheduled", Post.publish_at <= now)
        .order_by(Post.publish_at, Post.id))]


def next_due_reads() -> list[sa.ScalarSelect]:
    """Return the first publish_at, unpublish_at, change and release ahead, as scalar
    subqueries."""
    return [
        sa.select(sa.func.min(Post.publish_at)).where(Post.status == "scheduled")
        .scalar_subquery(),
        sa.select(sa.func.min(Post.unpublish_at))
        .where(Post.status == "published", Post.unpublish_at.is_not(None)).scalar_subquery(),
        sa.select(sa.func.min(ScheduledChange.apply_at)).scalar_subquery(),
        sa.select(sa.func.min(Release.release_at)).where(Release.status == "scheduled")
        .scalar_subquery(),
    ]


def next_release_of(post_id: QueryableAttribute[int]) -> sa.ScalarSelect:
    """Return when the next release that changes post_id's page goes (one naming the post,
    or changing the site's settings), as a scalar subquery."""
    return (sa.select(sa.func.min(Release.release_at))
            .join(ReleaseItem, ReleaseItem.release_id == Release.id)
            .where(Release.status == "scheduled",
                   sa.or_(ReleaseItem.post_id == post_id, ReleaseItem.kind == "settings"))
            .scalar_subquery())


def next_due() -> datetime | None:
    """Return the earliest publish_at or unpublish_at still ahead of the publish leader."""
    times = db.session.execute(sa.select(*next_due_reads())).one()
    db.session.rollback()
    return min((t for t in times if t is not None), default=None)


# -- editors --------------------------------------------------------------------------

def _audit_moved(action: str, moved: Sequence[sa.Row], status: list[str] | str,
                 overridden: Freeze | None = None) -> None:
    """Record an editor's status change of the one post moved (and the freeze overridden)."""
    for row in moved:
        target = audit.target("post", row.id, row.title)
        audit.record(action, target, {"status": status})
        if overridden is not None:
            freezes.record_override(overridden, target, action)


def _unless_frozen(override: bool) -> Freeze | None:
    """Refuse a change of visibility while publishing is frozen, unless overridden.

    Return the freeze overridden, if any. The caller checks that only an admin overrides.
    """
    row = freezes.holding("publishing")
    if row is not None and not override:
        db.session.rollback()
        raise PublishingFrozen(row)
    return row


def _move_one(post_id: int, sources: tuple[str, ...], values: dict,
              wanted: str) -> Sequence[sa.Row]:
    """Move one post out of sources, or raise a refusal saying what it is now."""
    moved = move([Post.id == post_id, Post.status.in_(sources)], values)
    if not moved:
        db.session.rollback()
        post = get_post(post_id)
        raise PostError({"form": f"This post is {post.status} now, so it cannot be {wanted}; "
                                 "nothing changed."})
    return moved


def unschedule_post(post_id: int) -> None:
    """Take a scheduled post back to draft."""
    now = database_now()
    moved = _move_one(post_id, ("scheduled",), {"status": "draft", "publish_at": None,
                                                "unpublish_at": None, "updated_at": now},
                      "unscheduled")
    _audit_moved("post.unschedule", moved, ["scheduled", "draft"])
    db.session.commit()


def publish_now(post_id: int, instance: str = "", override_freeze: bool = False,
                text: TypedText | None = None,
                approval: Callable[[Post, datetime], None] | None = None) -> None:
    """Publish a post at once, with its 'post.published' outbox row in the same transaction.

    text: what the editor typed beside the button, published with it or not at all (refused
    as the Save button refuses it). A publishing freeze refuses it all (PublishingFrozen)
    unless override_freeze (an admin's). Someone whose posts need review is refused
    (gate.NeedsReview) unless approval, a reviewer's, is given: it is written in this
    transaction with the post as published (post, now) and may refuse it all too.
    """
    fields = check_text(post_id, text) if text is not None else None
    if approval is None:
        gate.refuse_going_live(post_id)
    now = database_now()
    overridden = _unless_frozen(override_freeze)
    if text is not None and fields is not None:
        post = lock_post(post_id)
        gate.refuse_edit(post)
        refuse_stale_text(post, text, fields)
        write_text(post, fields, now)  # published below, or rolled back with it
    keep_expiry = sa.case((Post.unpublish_at > now, Post.unpublish_at), else_=None)
    with refusing_a_taken_slug():
        moved = _move_one(post_id, SCHEDULABLE, {"status": "published", "published_at": now,
                                                 "publish_at": now, "unpublish_at": keep_expiry,
                                                 "updated_at": now}, "published")
        _audit_moved("post.approve" if approval else "post.publish", moved, "published",
                     overridden)  # from any SCHEDULABLE; a reviewer's publish is their approval
        revisions.mark_live([row.id for row in moved])
        if approval is not None:
            post = get_post(post_id)
            db.session.refresh(post)  # as moved
            approval(post, now)
        wake_scheduler(PUBLISH.name)  # it may carry an unpublish time
        _commit_moved("post.published", moved, now, instance)


def unpublish_post(post_id: int, instance: str = "", override_freeze: bool = False) -> None:
    """Take a published post down, with its 'post.unpublished' outbox row (freeze: as above)."""
    now = database_now()
    overridden = _unless_frozen(override_freeze)
    moved = _move_one(post_id, ("published",), {"status": "unpublished", "unpublish_at": None,
                                               "updated_at": now}, "unpublished")
    _audit_moved("post.unpublish", moved, ["published", "unpublished"], overridden)
    _commit_moved("post.unpublished", moved, now, instance)
