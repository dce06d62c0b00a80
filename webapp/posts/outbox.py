"""The outbox rows a post's transitions write, named by what happened (see event_key)."""

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa

from ..db import is_postgres
from ..extensions import db
from ..models import OutboxEvent, Post


def event_key(topic: str, row: sa.Row | Post) -> str:
    """Return the name of a post's transition: the post, the topic and its version after it.

    Not the outbox's sequence id: after a lossy failover the database can redo a
    publication the receivers already got, and the redone one must carry the same key
    (webhooks derive their ids from it) while a new publication (after an unpublish or an
    edit: a new version) gets a new one. created_at tells apart two posts given the same
    id by a sequence that went back in time.
    """
    created = row.created_at.astimezone(UTC).isoformat(timespec="microseconds")
    return f"{topic}:post:{row.id}:{created}:v{row.version}"


# one statement and one parameter whatever the batch's size, its plan cached like any other
PG_INSERT_SQL = sa.text("""
INSERT INTO outbox_events (topic, post_id, instance, created_at, dedupe_key, payload)
SELECT r.topic, r.post_id, r.instance, r.created_at, r.dedupe_key, r.payload::json
FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(topic text, post_id bigint, instance text,
                                                   created_at timestamptz, dedupe_key text,
                                                   payload jsonb)
""")


def write_outbox(topic: str, rows: Sequence[sa.Row | Post], now: datetime, writer: str,
                 release: int | None = None) -> None:
    """Add one outbox event per row lifecycle.move returned to the current transaction.

    writer fills the events' instance column (models.OutboxEvent says what it holds);
    release, the id of the release that moved them (their caches are purged once, by the
    release's own event: webapp.plugins.purges).

    On PostgreSQL one INSERT for the whole batch: a list of parameters is sent as one
    INSERT a row (psycopg's executemany), so whatever a statement costs (a statement
    trigger, a round trip) was paid 500 times by a batch of 500.
    """
    events = [{"topic": topic, "post_id": row.id, "instance": writer, "created_at": now,
               "dedupe_key": event_key(topic, row),
               "payload": {"post_id": row.id, "slug": row.slug, "title": row.title,
                           "at": now.isoformat(),
                           **({"release_id": release} if release is not None else {})}}
              for row in rows]
    if not events:
        return
    if is_postgres():
        db.session.execute(PG_INSERT_SQL, {"rows": json.dumps(events, default=str)})
    else:
        db.session.execute(sa.insert(OutboxEvent), events)
