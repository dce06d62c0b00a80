"""Feed outbox events to the plugins' hooks: at least once, with the event id, off-request.

The plugin leader fans each new post.published / post.unpublished event out to
one hook_deliveries row per enabled plugin with that hook (UNIQUE per plugin and
event, so two leaders cannot double it) and marks the event processed in the
same transaction (the webhooks plugin's deliveries are written there too; ops.*
alerts, webapp.ops.alerts, go to webhook endpoints only, never to hooks).
Rows are then claimed in batches, with a claim token and the leader's (term, holder),
only while that is the plugin key's leadership (webapp.leadership.fence), and run in a
worker thread that holds no transaction while plugin code runs. Every write is fenced
by the claim, and each call starts with one (_start): a stale worker's late write
changes nothing and it starts no call. A new leadership takes the previous ones'
unfinished claims once their process is gone (or their lease is up), never while a
leader that handed over still runs them. A call past its maximum runtime is recorded
as timed out and retried; the count of attempts is kept, and past the limit the
delivery is failed and shown.
"""

import logging
import secrets
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import sqlalchemy as sa
from flask import current_app
from sqlalchemy.orm import QueryableAttribute

from ..db import for_update_skip_locked, insert_ignoring_conflicts, rows_changed
from ..extensions import db
from ..leadership.fence import Lead, gone
from ..models import HookDelivery, OutboxEvent, Release
from ..ops.alerts import OPS_TOPICS
from ..posts import review
from . import registry
from .base import TOPIC_HOOKS, HookEvent

log = logging.getLogger("soloist.plugins.hooks")

FAN_OUT_BATCH = 500
CLAIM_BATCH = 50
# review's steps and ops alerts go to webhooks only, never to hooks; the site's settings, a
# media file removed and the sitemap rebuilt to the cache purges only (webapp.plugins.purges)
PURGE_TOPICS = ("site.settings", "media.deleted", "sitemap.built")
FANNED_OUT = (*TOPIC_HOOKS, *review.TOPICS, Release.TOPIC, *OPS_TOPICS, *PURGE_TOPICS)
RETRY_MAX_SECONDS = 3600.0


class Event(Protocol):
    """What fan_out's also() reads of an outbox event: a HookEvent, or the row it read."""

    @property
    def id(self) -> int: ...
    @property
    def topic(self) -> str: ...
    @property
    def payload(self) -> dict | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def key(self) -> str | None: ...


def timeout() -> timedelta:
    """Return a hook call's maximum runtime."""
    return timedelta(seconds=current_app.config["HOOK_TIMEOUT_SECONDS"])


def new_claim() -> str:
    """Return a fresh claim token."""
    return secrets.token_hex(16)


def fan_out(now: datetime, enabled: set[str],
            also: Callable[[Sequence[Event]], None] | None = None) -> int:
    """Turn unprocessed outbox events into the enabled plugins' hook deliveries; return how many.

    also(events) adds more rows for the same (id, topic, payload, created_at, key) events in
    the same transaction.
    Finding none leaves the caller's read transaction open (it holds no row lock).
    """
    hooked = {name: set(p.hooks) for name, p in registry.plugins().items()
              if name in enabled and p.hooks}
    events = db.session.execute(for_update_skip_locked(
        sa.select(OutboxEvent.id, OutboxEvent.topic, OutboxEvent.payload, OutboxEvent.created_at,
                  OutboxEvent.dedupe_key.label("key"))
        .where(OutboxEvent.processed_at.is_(None), OutboxEvent.topic.in_(FANNED_OUT))
        .order_by(OutboxEvent.id).limit(FAN_OUT_BATCH))).all()
    if not events:
        return 0
    rows = [{"plugin": name, "hook": TOPIC_HOOKS[topic], "event_id": event_id,
             "status": "pending", "attempts": 0, "next_attempt_at": now, "instance": "",
             "last_error": "", "created_at": now}
            for event_id, topic, *_ in events
            for name, hooks in hooked.items() if TOPIC_HOOKS.get(topic) in hooks]
    if rows:
        db.session.execute(insert_ignoring_conflicts(HookDelivery, ["plugin", "event_id"]), rows)
    if also is not None:
        also(events)
    db.session.execute(sa.update(OutboxEvent).where(OutboxEvent.id.in_([e[0] for e in events]))
                       .values(processed_at=now))
    db.session.commit()
    return len(events)


def _theirs(lead: Lead) -> sa.ColumnElement[bool]:
    """A claim made under another leadership (an earlier one's, or a deposed one's)."""
    return lead.other(HookDelivery.claimed_term, HookDelivery.claimed_holder)


def _stale_claim(now: datetime, lead: Lead, ended: Sequence[str]) -> sa.ColumnElement[bool]:
    """A running claim another may take: its holder's process is gone, or its lease is up.

    Another leadership's batch whose process lives is left alone (a leader that handed
    over runs it to its end); past the lease, only its calls not yet started are taken:
    one in flight is timed out by expire(), never started twice beside itself.
    """
    lease = now - timeout() - timedelta(seconds=30)  # a worker that vanished in this term
    return sa.or_(sa.and_(_theirs(lead), HookDelivery.claimed_holder.in_(list(ended))),
                  sa.and_(HookDelivery.claimed_at < lease, HookDelivery.started_at.is_(None)))


def _claimable(now: datetime, lead: Lead, ended: Sequence[str] = ()) -> sa.ColumnElement[bool]:
    return sa.or_(
        sa.and_(HookDelivery.status == "pending", HookDelivery.next_attempt_at <= now),
        sa.and_(HookDelivery.status == "running", _stale_claim(now, lead, ended)),
    )


def _gone(lead: Lead) -> list[str]:
    """Return the holders of other leaderships' running claims whose process has ended."""
    return gone(db.session.scalars(
        sa.select(HookDelivery.claimed_holder).distinct()
        .where(HookDelivery.status == "running", _theirs(lead))))


def claim(plugin: str, now: datetime, holder: str,
          lead: Lead | None = None) -> tuple[str, list[int]]:
    """Claim a batch of due deliveries for one plugin, if lead leads; return the claim, ids."""
    lead = Lead() if lead is None else lead
    claimable = _claimable(now, lead, _gone(lead))
    ids = list(db.session.scalars(for_update_skip_locked(
        sa.select(HookDelivery.id).where(HookDelivery.plugin == plugin, claimable)
        .order_by(HookDelivery.id).limit(CLAIM_BATCH))))
    if not ids:
        db.session.rollback()
        return "", []
    token = new_claim()
    claimed = list(db.session.scalars(
        sa.update(HookDelivery)
        .where(HookDelivery.id.in_(ids), claimable, lead.holds())
        .values(status="running", claimed_at=now, instance=holder[:200], claim=token,
                started_at=None, **lead.mark())
        .returning(HookDelivery.id)))
    db.session.commit()
    return token, sorted(claimed)


def plugins_with_due_work(now: datetime, lead: Lead, enabled: set[str]) -> list[str]:
    """Return the enabled plugins that have hook deliveries to run now."""
    return sorted(db.session.scalars(
        sa.select(HookDelivery.plugin)
        .where(_claimable(now, lead, _gone(lead)), HookDelivery.plugin.in_(enabled))
        .distinct()))


def _fenced(delivery_id: int, token: str) -> sa.Update:
    return sa.update(HookDelivery).where(HookDelivery.id == delivery_id,
                                         HookDelivery.claim == token,
                                         HookDelivery.status == "running")


def _start(delivery_id: int, token: str, at: datetime) -> HookEvent | None:
    """Mark the call started (an attempt) and load its event; None if the claim is gone."""
    started = rows_changed(_fenced(delivery_id, token).values(
        started_at=at, attempts=HookDelivery.attempts + 1))
    db.session.commit()
    if not started:
        return None
    event = db.session.scalar(
        sa.select(OutboxEvent).join(HookDelivery, HookDelivery.event_id == OutboxEvent.id)
        .where(HookDelivery.id == delivery_id))
    found = None if event is None else HookEvent(
        event.id, event.topic, event.post_id, dict(event.payload or {}), event.created_at,
        event.dedupe_key)
    db.session.rollback()  # plugin code runs with no transaction and no connection held
    return found


def run_batch(plugin_name: str, ids: list[int], now: Callable[[], datetime],
              token: str = "") -> None:
    """Call the plugin's hooks for the claimed deliveries, recording each outcome."""
    plugin = registry.plugins().get(plugin_name)
    for delivery_id in ids:
        hook = db.session.scalar(sa.select(HookDelivery.hook).where(
            HookDelivery.id == delivery_id))
        event = _start(delivery_id, token, now())
        if event is None:
            return  # the claim was taken over (a new term, or timed out): stop here
        try:
            if plugin is None or hook not in plugin.hooks:
                raise LookupError(f"plugin {plugin_name} has no {hook} hook loaded")
            plugin.hooks[hook](event)
        except Exception as exc:  # a failing hook is retried, never fatal
            db.session.rollback()
            log.warning("hook %s.%s failed for event %s: %s", plugin_name, hook, event.id, exc)
            _failed(delivery_id, token, f"{type(exc).__name__}: {exc}", now())
        else:
            _done(delivery_id, token, now())


def _done(delivery_id: int, token: str, at: datetime) -> None:
    db.session.execute(_fenced(delivery_id, token).values(
        status="done", done_at=at, last_error="", claim=""))
    db.session.commit()


def _failed(delivery_id: int, token: str, error: str, at: datetime) -> bool:
    """Record a failed attempt: retry with back-off, or fail past the limit (fenced)."""
    attempts = db.session.scalar(sa.select(HookDelivery.attempts).where(
        HookDelivery.id == delivery_id)) or 0
    values: dict[str, Any] = {"last_error": error[:500], "claim": "", "started_at": None}
    if attempts >= current_app.config["HOOK_MAX_ATTEMPTS"]:
        values["status"] = "failed"
    else:
        values["status"] = "pending"
        values["next_attempt_at"] = at + backoff(attempts, current_app.config["RETRY_SECONDS"])
    done = rows_changed(_fenced(delivery_id, token).values(**values))
    db.session.commit()
    return bool(done)


def expire(now: datetime) -> list[str]:
    """Record hook calls past their maximum runtime as timed out; return their plugins.

    The rest of a timed-out batch goes back to pending without an attempt counted.
    """
    late = db.session.execute(sa.select(HookDelivery.id, HookDelivery.claim, HookDelivery.plugin)
                              .where(HookDelivery.status == "running",
                                     HookDelivery.started_at < now - timeout())).all()
    plugins = []
    limit = timeout().total_seconds()
    for delivery_id, token, plugin in late:
        if _failed(delivery_id, token, f"Timed out: the hook ran past {limit:g} s.", now):
            db.session.execute(sa.update(HookDelivery).where(
                HookDelivery.claim == token, HookDelivery.status == "running",
                HookDelivery.started_at.is_(None)).values(status="pending", claim=""))
            db.session.commit()
            plugins.append(plugin)
    return plugins


def backoff(attempts: int, base: float) -> timedelta:
    """Return the wait before the next attempt: base, 2×base, 4×base … up to an hour."""
    return timedelta(seconds=min(base * 2 ** max(attempts - 1, 0), RETRY_MAX_SECONDS))


def due_reads(lead: Lead, enabled: Collection[str]) -> list[sa.ColumnElement]:
    """Return what due() reads, as scalar subqueries for one SELECT with others' reads."""
    mine = HookDelivery.plugin.in_(enabled)
    running = HookDelivery.status == "running"

    def first(column: QueryableAttribute[Any], *where: sa.ColumnElement) -> sa.ScalarSelect:
        return sa.select(sa.func.min(column)).where(*where).scalar_subquery()

    return [
        sa.exists().where(OutboxEvent.processed_at.is_(None), OutboxEvent.topic.in_(FANNED_OUT)),
        first(HookDelivery.next_attempt_at, HookDelivery.status == "pending", mine),
        first(HookDelivery.started_at, running, mine),
        first(HookDelivery.claimed_at, running, mine),
        sa.exists().where(running, mine, _theirs(lead)),
        first(HookDelivery.started_at, running),  # any plugin's: expire() times them all out
    ]


def due(now: datetime, values: Sequence) -> tuple[datetime | None, bool]:
    """Return when hook work is next due, and whether work that time omits waits now.

    values are due_reads'. Due: now when events wait, else a retry or a timeout. Waiting
    now anyway: a claim to take over (another leadership's, or past its lease) or a late call.
    """
    waiting, retry, started, claimed, earlier_term, any_started = values
    times = [t for t in (retry, started and started + timeout()) if t is not None]
    if waiting:
        times.append(now)
    lease = now - timeout() - timedelta(seconds=30)  # as _stale_claim
    late = any_started is not None and any_started < now - timeout()
    stale = earlier_term or (claimed is not None and claimed < lease)
    return min(times, default=None), bool(late or stale)


def health() -> dict[str, dict]:
    """Return, per plugin, its hook deliveries waiting and failed, and the latest failure."""
    counts = db.session.execute(
        sa.select(HookDelivery.plugin, HookDelivery.status, sa.func.count())
        .where(HookDelivery.status.in_(("pending", "running", "failed")))
        .group_by(HookDelivery.plugin, HookDelivery.status)).all()
    found: dict[str, dict] = {}
    for plugin, status, count in counts:
        entry = found.setdefault(plugin, {"waiting": 0, "failed": 0, "last_failure": None})
        entry["failed" if status == "failed" else "waiting"] += count
    for plugin, entry in found.items():
        if entry["failed"]:
            entry["last_failure"] = db.session.execute(
                sa.select(HookDelivery.event_id, HookDelivery.attempts, HookDelivery.last_error,
                          HookDelivery.created_at)
                .where(HookDelivery.plugin == plugin, HookDelivery.status == "failed")
                .order_by(HookDelivery.id.desc()).limit(1)).one()
    return found
