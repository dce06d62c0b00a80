"""Purge the caches from the outbox, exactly like webhook deliveries.

Fan out: the plugin leader writes one cache_purges row per configured purger
(CACHE_PURGE) for each outbox event that changes what readers see, in the transaction
that marks the event processed (enqueue_events, hooks.fan_out's `also`), with the event's
surrogate keys (webapp.site.surrogate.event_keys; paths for a purge+http purger) and
hard for a takedown, soft otherwise. The rows carry the WAL position a standby must
replay first (webapp.ops.replica): a purge never leaves before a standby has its event.

Send: one sender per purger (send_purger, one worker thread each), so a dead CDN API
delays only its own purges. A sender claims a batch of its purger's due rows with a claim
token and the plugin key's leadership (webapp.leadership.fence), only while that leads,
counts the attempt, re-checks the claim and the leadership right before the request
(still_held), and purges every key of the batch in as few requests as the API allows
(hard if any of them is). Every write is fenced by the claim; a new leadership takes
another's claims once their process is gone or their lease is up. A failed batch is
retried every RETRY_SECONDS, not on a growing schedule like a webhook: it is one
small request a purger, and what readers see waits on it, so a cache that comes back is
purged within seconds (the cache's Retry-After is waited out if longer); the purger's
other waiting rows wait with it. A purge older than the caches' own lifetime
(SITE_SHARED_MAX_AGE_SECONDS) is given up as failed: every copy it would drop has expired
by itself. A purger failing FAILING_AFTER times in a row raises ops.purge_failing.
"""

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

import sqlalchemy as sa

from ..db import for_update_skip_locked, insert_ignoring_conflicts
from ..extensions import db
from ..leadership.fence import Lead, gone
from ..models import CachePurge, OutboxEvent, Post, Release
from ..ops import replica
from ..site import purgers, surrogate
from .hooks import Event, new_claim

log = logging.getLogger("soloist.plugins.purges")

# a takedown, a file removed: no stale copy may be served
HARD = ("post.unpublished", "media.deleted")
# a live post edited, its scheduled change swapped in or a revision restored: post.updated
TOPICS = ("post.published", "post.unpublished", "post.updated", "site.settings",
          "media.deleted", "sitemap.built", Release.TOPIC)
CLAIM_BATCH = 100
LEASE = timedelta(seconds=purgers.TIMEOUT_SECONDS * 3 + 10)  # a batch's requests and a margin
FAILING_AFTER = 3


# -- fan out --------------------------------------------------------------------------

def _old_slug(event: Event) -> str | None:
    """Return a post.updated event's slug before it, when the event changed it (else None)."""
    payload = event.payload or {}
    if event.topic != "post.updated" or "slug" not in payload:
        return None
    before = db.session.scalar(
        sa.select(OutboxEvent.payload).where(OutboxEvent.post_id == payload.get("post_id"),
                                             OutboxEvent.topic.like("post.%"),
                                             OutboxEvent.id < event.id)
        .order_by(OutboxEvent.id.desc()).limit(1))
    old = (before or {}).get("slug")
    return old if old != payload["slug"] else None


def _in_release(event: Event) -> bool:
    """Return whether event is one item's of a release: the release's own event purges
    every item's keys at once (one purge a release, not one an item)."""
    return event.topic != Release.TOPIC and "release_id" in (event.payload or {})


def _published() -> int:
    return db.session.scalar(sa.select(sa.func.count()).where(Post.status == "published")) or 0


def _rows(event: Event, configured: dict, published: Callable[[], int]) -> list[dict]:
    payload = event.payload or {}
    old_slug = _old_slug(event)
    keys = surrogate.event_keys(event.topic, payload, old_slug is not None)
    return [{"purger": name, "event_id": event.id, "topic": event.topic,
             "keys": " ".join(purgers.targets(purger, keys, payload, old_slug, published)),
             "hard": event.topic in HARD or bool(payload.get("unpublished")),
             "status": "pending", "attempts": 0,
             "next_attempt_at": event.created_at, "last_error": "",
             "created_at": event.created_at}
            for name, purger in configured.items()]


def enqueue_events(events: Iterable[Event]) -> int:
    """Add one purge per configured purger for each event readers see (no commit)."""
    configured = purgers.configured()
    if not configured:
        return 0
    published = cache(_published)  # read once a batch, and only for a plain PURGE
    rows = [row for event in events if event.topic in TOPICS and not _in_release(event)
            for row in _rows(event, configured, published)]
    if rows:
        lsn = replica.stamp()  # after the events were read: see webapp.ops.replica
        for row in rows:
            row["replica_lsn"] = lsn
        db.session.execute(insert_ignoring_conflicts(CachePurge, ["purger", "event_id"]), rows)
    return len(rows)


# -- claims ---------------------------------------------------------------------------

def _due(now: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(CachePurge.status == "pending", CachePurge.next_attempt_at <= now,
                   replica.passes(CachePurge.replica_lsn, CachePurge.created_at, now))


def theirs(lead: Lead) -> sa.ColumnElement[bool]:
    return lead.other(CachePurge.claimed_term, CachePurge.claimed_holder)


def _stale(now: datetime, lead: Lead, ended: Sequence[str] = ()) -> sa.ColumnElement[bool]:
    """A claim another sender may take: its lease is up, or its holder's process is gone."""
    return sa.and_(CachePurge.status == "sending", sa.or_(
        CachePurge.claimed_at < now - LEASE,
        sa.and_(theirs(lead), CachePurge.claimed_holder.in_(list(ended)))))


def _gone(lead: Lead) -> list[str]:
    return gone(db.session.scalars(sa.select(CachePurge.claimed_holder).distinct().where(
        CachePurge.status == "sending", theirs(lead))))


def purgers_due(now: datetime, lead: Lead, names: Iterable[str]) -> list[str]:
    """Return the purgers among names with purges to send now (or a claim to take over)."""
    claimable = sa.or_(_due(now), _stale(now, lead, _gone(lead)))
    return sorted(db.session.scalars(sa.select(CachePurge.purger).distinct().where(
        CachePurge.purger.in_(list(names)), claimable)))


def lapsed(purger: str, now: datetime) -> bool:
    """Return whether the purger's sender has held a claim past its lease (it is stuck)."""
    return db.session.scalar(sa.select(CachePurge.id).where(
        CachePurge.purger == purger, CachePurge.status == "sending",
        CachePurge.claimed_at < now - LEASE).limit(1)) is not None


@dataclass(frozen=True)
class Batch:
    """One claimed attempt at some of a purger's purges: only writes with token count."""

    purger: str
    token: str
    ids: tuple[int, ...]
    lead: Lead


def claim(purger: str, now: datetime, lead: Lead) -> Batch | None:
    """Claim a batch of the purger's due purges as one counted attempt, if lead leads."""
    claimable = sa.or_(_due(now), _stale(now, lead, _gone(lead)))
    ids = list(db.session.scalars(for_update_skip_locked(
        sa.select(CachePurge.id).where(CachePurge.purger == purger, claimable)
        .order_by(CachePurge.id).limit(CLAIM_BATCH))))
    if not ids:
        db.session.rollback()
        return None
    token = new_claim()
    claimed = db.session.scalars(
        sa.update(CachePurge).where(CachePurge.id.in_(ids), claimable, lead.holds())
        .values(status="sending", claimed_at=now, claim=token, **lead.mark(),
                attempts=CachePurge.attempts + 1)
        .returning(CachePurge.id)).all()
    db.session.commit()
    return Batch(purger, token, tuple(sorted(claimed)), lead) if claimed else None


def mine(batch: Batch) -> sa.ColumnElement[bool]:
    return sa.and_(CachePurge.id.in_(batch.ids), CachePurge.claim == batch.token,
                   CachePurge.status == "sending")


def still_held(batch: Batch, at: datetime) -> list[tuple[str, bool]]:
    """Re-check the claim at the moment of the purge; return the rows' (keys, hard) it holds.

    A fenced write, the leadership included; rows whose leadership has ended are handed
    back (pending, the attempt not counted) for the successor.
    """
    held = db.session.execute(
        sa.update(CachePurge).where(mine(batch), batch.lead.holds()).values(claimed_at=at)
        .returning(CachePurge.keys, CachePurge.hard)).all()
    if not held:
        db.session.execute(sa.update(CachePurge).where(mine(batch)).values(
            status="pending", claim="", attempts=CachePurge.attempts - 1))
    db.session.commit()
    return [(keys, hard) for keys, hard in held]
