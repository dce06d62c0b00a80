"""The publish scheduler's work: publish due posts, unpublish expired ones.

Every write is fenced: a conditional UPDATE that only a still-scheduled (or
still-published) post matches, with its outbox rows in the same transaction, so
two processes that both believe they lead can never publish a post twice.
"""

from datetime import datetime

import sqlalchemy as sa

from ..extensions import db
from ..models import OutboxEvent, Post
from .keys import PLUGINS, PUBLISH
from .work import record_work, wake_scheduler

BATCH_SIZE = 500


def _transition(now: datetime, source: str, target: str, due_column, topic: str, limit: int,
                instance: str) -> list[int]:  # noqa: ANN001
    """Move up to limit due posts from source to target status, with outbox rows; commit."""
    due = (
        sa.select(Post.id)
        .where(Post.status == source, due_column <= now)
        .order_by(due_column, Post.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .cte("due")  # a CTE runs once; an IN (subquery) may be re-scanned past its LIMIT
    )
    values = {"status": target, "updated_at": now, "version": Post.version + 1}
    if target == "published":
        values["published_at"] = now
    moved = db.session.execute(
        sa.update(Post)
        .where(Post.id == due.c.id, Post.status == source, due_column <= now)
        .values(**values)
        .returning(Post.id, Post.slug, Post.title)
        .execution_options(synchronize_session=False)
    ).all()
    if moved:
        write_outbox(topic, moved, now, instance)
        wake_scheduler(PLUGINS.name)  # the plugin leader's hooks (webhooks, sitemap) at once
    db.session.commit()
    return [row[0] for row in moved]


def write_outbox(topic: str, rows, now: datetime, instance: str) -> None:  # noqa: ANN001
    """Add one outbox event per (post id, slug, title) row to the current transaction."""
    db.session.execute(sa.insert(OutboxEvent), [
        {"topic": topic, "post_id": pid, "instance": instance, "created_at": now,
         "payload": {"post_id": pid, "slug": slug, "title": title, "at": now.isoformat()}}
        for pid, slug, title in rows
    ])


def publish_due(now: datetime, limit: int = BATCH_SIZE, instance: str = "") -> list[int]:
    """Publish up to limit scheduled posts whose publish_at has come; return their ids."""
    return _transition(now, "scheduled", "published", Post.publish_at, "post.published",
                       limit, instance)


def unpublish_expired(now: datetime, limit: int = BATCH_SIZE, instance: str = "") -> list[int]:
    """Unpublish up to limit published posts whose unpublish_at has come; return their ids."""
    return _transition(now, "published", "unpublished", Post.unpublish_at, "post.unpublished",
                       limit, instance)


def next_due() -> datetime | None:
    """Return the earliest publish_at or unpublish_at still ahead of the scheduler."""
    first_publish = sa.select(sa.func.min(Post.publish_at)).where(Post.status == "scheduled")
    first_expiry = sa.select(sa.func.min(Post.unpublish_at)).where(
        Post.status == "published", Post.unpublish_at.is_not(None)
    )
    times = [db.session.scalar(first_publish), db.session.scalar(first_expiry)]
    db.session.rollback()
    known = [t for t in times if t is not None]
    return min(known) if known else None


def tick(now: datetime, instance: str = "") -> datetime | None:
    """Do one unit of publish work at now; return when the next one is due."""
    published = publish_due(now, BATCH_SIZE, instance)
    unpublished = unpublish_expired(now, BATCH_SIZE, instance)
    if published or unpublished:
        record_work(PUBLISH.value, now, f"published {len(published)}, "
                                        f"unpublished {len(unpublished)}")
    if len(published) == BATCH_SIZE or len(unpublished) == BATCH_SIZE:
        return now
    return next_due()


def schedule(post: Post, publish_at: datetime, unpublish_at: datetime | None = None) -> None:
    """Mark post scheduled and wake the publish leader when the transaction commits."""
    post.status = "scheduled"
    post.publish_at = publish_at
    post.unpublish_at = unpublish_at
    post.version = (post.version or 0) + 1
    wake_scheduler(PUBLISH.name)
