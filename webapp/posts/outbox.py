"""The outbox rows a post's transitions write, named by what happened (see event_key)."""

from datetime import UTC, datetime

import sqlalchemy as sa

from ..extensions import db
from ..models import OutboxEvent


def event_key(topic: str, row: sa.Row) -> str:
    """Return the name of a post's transition: the post, the topic and its version after it.

    Not the outbox's sequence id: after a lossy failover the database can redo a
    publication the receivers already got, and the redone one must carry the same key
    (webhooks derive their ids from it) while a new publication (after an unpublish or an
    edit: a new version) gets a new one. created_at tells apart two posts given the same
    id by a sequence that went back in time.
    """
    created = row.created_at.astimezone(UTC).isoformat(timespec="microseconds")
    return f"{topic}:post:{row.id}:{created}:v{row.version}"


def write_outbox(topic: str, rows: list[sa.Row], now: datetime, instance: str) -> None:
    """Add one outbox event per row _move returned to the current transaction.

    One INSERT for the whole batch: a list of parameters is sent as one INSERT a row
    (psycopg's executemany), so whatever a statement costs (a statement trigger, a round
    trip) was paid 500 times by a batch of 500.
    """
    if not rows:
        return
    db.session.execute(sa.insert(OutboxEvent).values([
        {"topic": topic, "post_id": row.id, "instance": instance, "created_at": now,
         "dedupe_key": event_key(topic, row),
         "payload": {"post_id": row.id, "slug": row.slug, "title": row.title,
                     "at": now.isoformat()}}
        for row in rows
    ]))
