"""Feed outbox events to the plugins' hooks: at least once, with the event id, off-request.

The plugin leader fans each new post.published / post.unpublished event out to
one hook_deliveries row per enabled plugin with that hook (UNIQUE per plugin and
event, so two leaders cannot double it) and marks the event processed in the
same transaction. Rows are then claimed in batches and run in a worker thread;
a failed hook is retried with backoff, and a claim whose worker vanished is
taken again after a lease, so a hook may see an event twice but never zero times.
"""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

import sqlalchemy as sa
from flask import current_app

from ..db import for_update_skip_locked, insert_ignoring_conflicts
from ..extensions import db
from ..models import HookDelivery, OutboxEvent
from . import registry
from .base import TOPIC_HOOKS, HookEvent

log = logging.getLogger("soloist.plugins.hooks")

FAN_OUT_BATCH = 500
CLAIM_BATCH = 50
LEASE = timedelta(minutes=5)
MAX_ATTEMPTS = 10
RETRY_BASE_SECONDS = 5.0
RETRY_MAX_SECONDS = 3600.0


def fan_out(now: datetime) -> int:
    """Turn unprocessed outbox events into hook deliveries; return how many events."""
    hooked = {name: set(p.hooks) for name, p in registry.enabled_plugins().items() if p.hooks}
    events = db.session.execute(for_update_skip_locked(
        sa.select(OutboxEvent.id, OutboxEvent.topic)
        .where(OutboxEvent.processed_at.is_(None), OutboxEvent.topic.in_(TOPIC_HOOKS))
        .order_by(OutboxEvent.id).limit(FAN_OUT_BATCH))).all()
    if not events:
        db.session.rollback()
        return 0
    rows = [{"plugin": name, "hook": TOPIC_HOOKS[topic], "event_id": event_id,
             "status": "pending", "attempts": 0, "next_attempt_at": now, "instance": "",
             "last_error": "", "created_at": now}
            for event_id, topic in events
            for name, hooks in hooked.items() if TOPIC_HOOKS[topic] in hooks]
    if rows:
        db.session.execute(insert_ignoring_conflicts(HookDelivery, ["plugin", "event_id"]), rows)
    db.session.execute(sa.update(OutboxEvent).where(OutboxEvent.id.in_([e[0] for e in events]))
                       .values(processed_at=now))
    db.session.commit()
    return len(events)


def _claimable(now: datetime):
    return sa.or_(
        sa.and_(HookDelivery.status == "pending", HookDelivery.next_attempt_at <= now),
        sa.and_(HookDelivery.status == "running", HookDelivery.claimed_at < now - LEASE),
    )


def claim(plugin: str, now: datetime, instance: str) -> list[int]:
    """Claim a batch of due deliveries for one plugin; return their ids."""
    ids = list(db.session.scalars(for_update_skip_locked(
        sa.select(HookDelivery.id).where(HookDelivery.plugin == plugin, _claimable(now))
        .order_by(HookDelivery.id).limit(CLAIM_BATCH))))
    if not ids:
        db.session.rollback()
        return []
    claimed = list(db.session.scalars(
        sa.update(HookDelivery)
        .where(HookDelivery.id.in_(ids), _claimable(now))
        .values(status="running", claimed_at=now, instance=instance[:200])
        .returning(HookDelivery.id)))
    db.session.commit()
    return sorted(claimed)


def plugins_with_due_work(now: datetime) -> list[str]:
    """Return the enabled plugins that have hook deliveries to run now."""
    names = set(db.session.scalars(
        sa.select(HookDelivery.plugin).where(_claimable(now)).distinct()))
    db.session.rollback()
    return sorted(names & set(registry.enabled_plugins()))


def run_batch(plugin_name: str, ids: list[int], now: Callable[[], datetime]) -> None:
    """Call the plugin's hooks for the claimed deliveries, recording each outcome."""
    plugin = registry.plugins().get(plugin_name)
    for delivery_id in ids:
        delivery = db.session.get(HookDelivery, delivery_id)
        event = delivery and db.session.get(OutboxEvent, delivery.event_id)
        db.session.rollback()
        if event is None:
            continue  # trimmed meanwhile
        try:
            if plugin is None or delivery.hook not in plugin.hooks:
                raise LookupError(f"plugin {plugin_name} has no {delivery.hook} hook loaded")
            plugin.hooks[delivery.hook](HookEvent(event.id, event.topic, event.post_id,
                                                  dict(event.payload or {}), event.created_at))
        except Exception as exc:  # a failing hook is retried, never fatal
            db.session.rollback()
            log.warning("hook %s.%s failed for event %s: %s", plugin_name, delivery.hook,
                        event.id, exc)
            _failed(delivery_id, f"{type(exc).__name__}: {exc}", now())
        else:
            _done(delivery_id, now())


def _done(delivery_id: int, at: datetime) -> None:
    db.session.execute(sa.update(HookDelivery).where(HookDelivery.id == delivery_id).values(
        status="done", done_at=at, attempts=HookDelivery.attempts + 1, last_error=""))
    db.session.commit()


def _failed(delivery_id: int, error: str, at: datetime) -> None:
    delivery = db.session.get(HookDelivery, delivery_id)
    delivery.attempts += 1
    delivery.last_error = error[:500]
    if delivery.attempts >= current_app.config.get("HOOK_MAX_ATTEMPTS", MAX_ATTEMPTS):
        delivery.status = "failed"
    else:
        delivery.status = "pending"
        delivery.next_attempt_at = at + backoff(delivery.attempts, current_app.config.get(
            "HOOK_RETRY_SECONDS", RETRY_BASE_SECONDS))
    db.session.commit()


def backoff(attempts: int, base: float) -> timedelta:
    """Return the wait before the next attempt: base, 2×base, 4×base … up to an hour."""
    return timedelta(seconds=min(base * 2 ** max(attempts - 1, 0), RETRY_MAX_SECONDS))


def next_due(now: datetime, enabled: set[str]) -> datetime | None:
    """Return when hook work is next due: now when events wait, else the next retry."""
    waiting = db.session.scalar(sa.select(OutboxEvent.id).where(
        OutboxEvent.processed_at.is_(None), OutboxEvent.topic.in_(TOPIC_HOOKS)).limit(1))
    mine = HookDelivery.plugin.in_(enabled)
    retry = db.session.scalar(sa.select(sa.func.min(HookDelivery.next_attempt_at)).where(
        HookDelivery.status == "pending", mine))
    lease = db.session.scalar(sa.select(sa.func.min(HookDelivery.claimed_at)).where(
        HookDelivery.status == "running", mine))
    db.session.rollback()
    times = [t for t in (retry, lease and lease + LEASE) if t is not None]
    if waiting is not None:
        times.append(now)
    return min(times) if times else None
