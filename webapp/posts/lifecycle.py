"""A post's status: schedule, publish, unpublish — by editors and by the publish leader.

Every status change is one conditional UPDATE (`_move`) that only a post still
in the expected status matches, with its outbox rows in the same transaction.
So an editor's click and the leader's tick can never both win, and two
processes that both believe they lead can never publish a post twice.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import QueryableAttribute

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PLUGINS, PUBLISH
from ..models import Freeze, Post, ScheduledChange
from ..ops import audit, freezes
from ..ops.metrics import observe_publish_lags
from ..site import state
from . import revisions
from .edits import check_times, get_post
from .errors import PostError, PostNotFound, PublishingFrozen, StalePost
from .outbox import write_outbox

SCHEDULABLE = ("draft", "scheduled", "unpublished")
BATCH_SIZE = 500


def _move(conditions: list, values: dict, *also: QueryableAttribute[Any]) -> Sequence[sa.Row]:
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
    moved = _move([Post.id == due.c.id, Post.status == source, due_column <= now], values,
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
    moved = _move([Post.status == "scheduled", Post.publish_at <= now],
                  {"status": "draft", "updated_at": now})
    return [(row.id, row.title) for row in moved]


def next_due_reads() -> list[sa.ScalarSelect]:
    """Return the first publish_at, unpublish_at and change ahead, as scalar subqueries."""
    return [
        sa.select(sa.func.min(Post.publish_at)).where(Post.status == "scheduled")
        .scalar_subquery(),
        sa.select(sa.func.min(Post.unpublish_at))
        .where(Post.status == "published", Post.unpublish_at.is_not(None)).scalar_subquery(),
        sa.select(sa.func.min(ScheduledChange.apply_at)).scalar_subquery(),
    ]


def next_due() -> datetime | None:
    """Return the earliest publish_at or unpublish_at still ahead of the publish leader."""
    times = db.session.execute(sa.select(*next_due_reads())).one()
    db.session.rollback()
    return min((t for t in times if t is not None), default=None)


# -- editors --------------------------------------------------------------------------

def _locked(post_id: int, version: int) -> Post:
    """Return the post locked for update, or raise if it is gone or changed since version."""
    post = db.session.get(Post, post_id, with_for_update=True, populate_existing=True)
    if post is None:
        db.session.rollback()
        raise PostNotFound()
    if post.version != version:
        db.session.rollback()
        raise StalePost(post)
    return post


def schedule_post(post_id: int, version: int, publish_at: datetime,
                  unpublish_at: datetime | None) -> Post:
    """Schedule a post for publish_at (and optionally unpublish_at), waking the leader."""
    check_times(publish_at, unpublish_at)
    post = _locked(post_id, version)
    if post.status not in SCHEDULABLE:
        db.session.rollback()
        raise PostError({"form": "This post is published: unpublish it first, or set when it "
                                 "should be unpublished."})
    _audit_post("post.schedule", post, status="scheduled", publish_at=publish_at,
                unpublish_at=unpublish_at)
    post.status = "scheduled"
    post.publish_at = publish_at
    post.unpublish_at = unpublish_at
    post.version = (post.version or 0) + 1
    wake_scheduler(PUBLISH.name)  # delivered at commit: the leader sleeps until the new time
    db.session.commit()
    return post


def set_unpublish_time(post_id: int, version: int, unpublish_at: datetime | None) -> Post:
    """Set or clear when a published post is taken down, waking the leader."""
    check_times(None, unpublish_at)
    post = _locked(post_id, version)
    if post.status != "published":
        db.session.rollback()
        raise PostError({"form": f"This post is {post.status}, not published; nothing changed."})
    _audit_post("post.unpublish_time", post, unpublish_at=unpublish_at)
    post.unpublish_at = unpublish_at
    post.version += 1
    wake_scheduler(PUBLISH.name)
    db.session.commit()
    return post


def _audit_post(action: str, post: Post, **after) -> None:
    """Record an editor's change of post's schedule: each field as it was and will be."""
    before = {name: getattr(post, name) for name in after}
    audit.record(action, audit.target("post", post.id, post.title), audit.changes(before, after))


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
    moved = _move([Post.id == post_id, Post.status.in_(sources)], values)
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


def publish_now(post_id: int, instance: str = "", override_freeze: bool = False) -> None:
    """Publish a post at once, with its 'post.published' outbox row in the same transaction.

    A publishing freeze refuses it (PublishingFrozen) unless override_freeze (an admin's).
    """
    now = database_now()
    overridden = _unless_frozen(override_freeze)
    keep_expiry = sa.case((Post.unpublish_at > now, Post.unpublish_at), else_=None)
    moved = _move_one(post_id, SCHEDULABLE, {"status": "published", "published_at": now,
                                             "publish_at": now, "unpublish_at": keep_expiry,
                                             "updated_at": now}, "published")
    _audit_moved("post.publish", moved, "published", overridden)  # from any SCHEDULABLE
    revisions.mark_live([row.id for row in moved])
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
