"""Built-in plugin: deliver post events and ops alerts to admins' webhook endpoints.

Fan out, then send. The plugin leader writes one delivery per subscribed endpoint
in the same transaction that marks the outbox event processed (enqueue_events),
with a fixed body and a delivery id that stays the same across retries. The ids come
from what happened (event_key: the post, its transition and version; an alert's
occurrence), never from a sequence, so a publication that a lossy failover undid
and the new primary redid carries the same webhook-id and event_id, and the
receiver drops it.

Where the primary streams to a standby, a delivery is claimed only once a standby has
replayed its event's commit (webapp.ops.replica: the fan-out stamps a WAL position on
the rows; a lossy failover then undoes only publications no receiver heard of).

Senders work per endpoint (send_endpoint, one worker thread each), so a slow or
dead receiver delays only itself. Each attempt is a claim: the delivery is marked
sending with a fresh claim token and the leader's (term, holder)
(webapp.leadership.fence), only while that is the plugin key's leadership, and
counted. Every write of the sender is fenced by that claim, so a stale sender
(after a failover, or past its lease) changes nothing, and the sender re-checks the
claim and the leadership right before it sends (webapp.plugins.webhook_sends). A new
leadership takes the previous ones' unfinished claims once their process is gone or
their lease has run out, never while a leader that handed over still sends them.
Retries and the endpoint's own back-off are webapp.plugins.webhook_sends'; after the
last attempt the delivery is `failed` until an admin redelivers it. Requests carry
X-Soloist-Event, X-Soloist-Delivery and Standard Webhooks' signed headers (and, with
WEBHOOK_LEGACY_SIGNATURE, the deprecated X-Soloist-Signature: sha256= HMAC of the body
alone, replayable). An endpoint's payload_format "slack" gets Slack's
{"text": ...} instead of the event as JSON, signed the same way. ops.webhook_failing
about an endpoint never goes to it.
"""

import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from flask import current_app

from ..db import (
    clock,
    database_now,
    for_update_skip_locked,
    insert_ignoring_conflicts,
    rows_changed,
)
from ..extensions import db
from ..leadership.fence import Lead, gone
from ..models import WebhookDelivery, WebhookEndpoint
from ..ops import alerts, replica
from .base import Plugin, RunContext
from .hooks import Event, new_claim
from .webhook_sends import Claim, Pause, attempt

# uuid5 namespace of Soloist's webhook ids (fixed forever: receivers keep the ids they saw)
ID_NAMESPACE = uuid.UUID("7d0f4b8e-3c1a-5e2b-9f64-a1c2d3e4f501")
LEASE_MARGIN = 10.0  # seconds past the send's timeout before its claim may be taken again

plugin = Plugin("webhooks", "Webhooks",
                "POSTs signed JSON to the endpoints admins configure when posts are "
                "published or unpublished, with retries and redelivery.")
plugin.default_timer("deliver", "deliver", name="Webhooks: deliver and retry",
                     every=(1, "minutes"), max_runtime_seconds=600)


@plugin.action("deliver", help="Send the webhook deliveries that are due (retries included).")
def deliver(ctx: RunContext) -> str:
    counts = deliver_due(clock(database_now()), max(ctx.time_left() - 30, 1.0), ctx.lead,
                         ctx.pause)
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "nothing due"


# -- fan out --------------------------------------------------------------------------

def enqueue_events(events: Iterable[Event]) -> int:
    """Add one delivery per active endpoint subscribed to each event (no commit).

    events are outbox rows or HookEvents (id, topic, payload, created_at, key), read in
    this transaction: its WAL position, stamped on the rows, is past their commits, and
    the rows wait until a standby has replayed it (webapp.ops.replica). Two events with
    the same key are one event: its second delivery is not written.
    """
    endpoints = list(db.session.scalars(sa.select(WebhookEndpoint).where(WebhookEndpoint.active)))
    rows = [_row(event, endpoint) for event in events for endpoint in endpoints
            if event.topic in endpoint.events and not _about(event, endpoint)]
    if rows:  # no conflict target: (endpoint, event) and the derived delivery id alike
        lsn = replica.stamp()
        for row in rows:
            row["replica_lsn"] = lsn
        db.session.execute(insert_ignoring_conflicts(WebhookDelivery, None), rows)
    return len(rows)


def _about(event: Event, endpoint: WebhookEndpoint) -> bool:
    """Return whether event says endpoint is failing (it would go nowhere, or loop)."""
    return (event.topic == "ops.webhook_failing"
            and (event.payload or {}).get("endpoint_id") == endpoint.id)


def event_key(event: Event) -> str:
    """Return the name of what the event says happened, the source of its webhook ids.

    The outbox row's dedupe key (a post's transition, an alert's occurrence: every row
    written since keys exist has one). A row without one (older, or written by hand) is
    named by its id, time and payload: stable across its retries and redeliveries.
    """
    key = getattr(event, "key", None)
    if key:
        return key
    payload = json.dumps(event.payload or {}, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(payload.encode()).hexdigest()[:32]
    return f"outbox:{event.id}:{event.created_at.astimezone(UTC).isoformat()}:{digest}"


def event_uuid(key: str) -> str:
    """Return the event id a body carries: the same for every endpoint and every redo."""
    return str(uuid.uuid5(ID_NAMESPACE, key))


def delivery_uuid(key: str, endpoint: WebhookEndpoint) -> str:
    """Return the delivery id (X-Soloist-Delivery, webhook-id) of an event to an endpoint."""
    return str(uuid.uuid5(ID_NAMESPACE, f"{key}|endpoint:{endpoint.id}:{endpoint.url}"))


def _row(event: Event, endpoint: WebhookEndpoint) -> dict:
    key = event_key(event)
    delivery_id = delivery_uuid(key, endpoint)
    body = {"delivery": delivery_id, "event": event.topic, "event_id": event_uuid(key),
            "created_at": event.created_at.isoformat(), "data": event.payload}
    if endpoint.payload_format == "slack":  # Slack's incoming webhooks read "text" only
        body = {"text": alerts.text(event.topic, dict(event.payload or {}))}
    return {"delivery_id": delivery_id, "endpoint_id": endpoint.id, "event_id": event.id,
            "topic": event.topic, "status": "pending",
            "body": json.dumps(body, sort_keys=True, separators=(",", ":")), "attempts": 0,
            "next_attempt_at": event.created_at, "last_error": "",
            "created_at": event.created_at}


def enqueue(event: Event) -> int:
    """Queue one delivery of event per active endpoint subscribed to it; return how many."""
    count = enqueue_events([event])
    db.session.commit()
    return count


# -- claims ---------------------------------------------------------------------------

def _lease() -> timedelta:
    """Return how long a claim lasts in its own term (the send's timeout, and a margin)."""
    return timedelta(seconds=current_app.config["WEBHOOK_TIMEOUT_SECONDS"] + LEASE_MARGIN)


def _due(now: datetime) -> sa.ColumnElement[bool]:
    """A pending delivery whose time has come, and whose event a standby has (or the bound)."""
    return sa.and_(WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= now,
                   replica.passes(WebhookDelivery.replica_lsn, WebhookDelivery.created_at, now))


def _theirs(lead: Lead) -> sa.ColumnElement[bool]:
    """A claim made under another leadership (an earlier one's, or a deposed one's)."""
    return lead.other(WebhookDelivery.claimed_term, WebhookDelivery.claimed_holder)


def _stale(now: datetime, lead: Lead, ended: Sequence[str] = ()) -> sa.ColumnElement[bool]:
    """A claim another sender may take: its lease has run out, or its holder's process is gone.

    Another leadership's claim whose process lives is left alone until its lease ends: a
    leader that handed over (a deploy's SIGTERM) is still sending it, and sends it once.
    """
    return sa.and_(WebhookDelivery.status == "sending", sa.or_(
        WebhookDelivery.claimed_at < now - _lease(),
        sa.and_(_theirs(lead), WebhookDelivery.claimed_holder.in_(list(ended)))))


def _claimable(now: datetime, lead: Lead, ended: Sequence[str] = ()) -> sa.ColumnElement[bool]:
    return sa.or_(_due(now), _stale(now, lead, ended))


def _gone(lead: Lead) -> list[str]:
    """Return the holders of other leaderships' claims in flight whose process has ended."""
    return gone(db.session.scalars(
        sa.select(WebhookDelivery.claimed_holder).distinct()
        .where(WebhookDelivery.status == "sending", _theirs(lead))))


def lapsed(endpoint_id: int, now: datetime) -> bool:
    """Return whether the endpoint's sender has held a claim past its lease (it is stuck)."""
    return db.session.scalar(sa.select(WebhookDelivery.id).where(
        WebhookDelivery.endpoint_id == endpoint_id, WebhookDelivery.status == "sending",
        WebhookDelivery.claimed_at < now - _lease()).limit(1)) is not None


def _ready(now: datetime) -> sa.ColumnElement[bool]:
    """An endpoint that is not backing off."""
    return sa.or_(WebhookEndpoint.retry_at.is_(None), WebhookEndpoint.retry_at <= now)


def _first(*where: sa.ColumnElement[bool]) -> sa.ScalarSelect:
    """Return the endpoint's first next_attempt_at among where: one index entry, not its queue."""
    return (sa.select(sa.func.min(WebhookDelivery.next_attempt_at))
            .where(WebhookDelivery.endpoint_id == WebhookEndpoint.id, *where)
            .correlate(WebhookEndpoint).scalar_subquery())


def endpoints_due(now: datetime, lead: Lead) -> list[int]:
    """Return the endpoints with a delivery to send now, oldest waiting first (per endpoint)."""
    stale, due = _first(_stale(now, lead, _gone(lead))), _first(_due(now))
    return list(db.session.scalars(
        sa.select(WebhookEndpoint.id)
        .where(_ready(now), sa.or_(stale.is_not(None), due.is_not(None)))
        .order_by(sa.func.coalesce(stale, due), WebhookEndpoint.id)))  # claims go oldest first


def claim_next(endpoint_id: int, now: datetime, lead: Lead) -> Claim | None:
    """Claim the endpoint's next due delivery as one counted attempt, if lead leads."""
    claimable = _claimable(now, lead, _gone(lead))
    found = db.session.scalar(for_update_skip_locked(
        sa.select(WebhookDelivery.id).where(WebhookDelivery.endpoint_id == endpoint_id,
                                            claimable)
        .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id).limit(1)))
    if found is None:
        db.session.rollback()
        return None
    token = new_claim()
    claimed = rows_changed(
        sa.update(WebhookDelivery)
        .where(WebhookDelivery.id == found, claimable, lead.holds())
        .values(status="sending", claimed_at=now, claim=token, **lead.mark(),
                attempts=WebhookDelivery.attempts + 1))
    db.session.commit()
    return Claim(found, token, lead) if claimed else None


# -- sending --------------------------------------------------------------------------

def send_endpoint(endpoint_id: int, lead: Lead, now: Callable[[], datetime],
                  budget: float, pause: Pause = None) -> dict[str, int]:
    """Send one endpoint's due deliveries in turn until none is left, it fails, or budget ends.

    pause is the scheduler's sleep, for waits on a standby (webhook_sends.attempt).
    """
    counts = {"delivered": 0, "retrying": 0, "failed": 0, "stale": 0}
    start = now()
    while (now() - start).total_seconds() < budget:
        claim = claim_next(endpoint_id, now(), lead)
        if claim is None:
            break
        result = attempt(claim, now, pause)
        counts[result] += 1
        if result == "stale" or (result != "delivered" and backing_off(endpoint_id, now())):
            break  # its other deliveries wait out the endpoint's back-off with it
    return counts


def deliver_due(now: Callable[[], datetime], budget: float,
                lead: Lead | None = None, pause: Pause = None) -> dict[str, int]:
    """Send every endpoint's due deliveries, one endpoint after another (the timer's way).

    lead is the leadership the sends are claimed under (the current one if not given).
    """
    lead = Lead.current() if lead is None else lead
    totals = {"delivered": 0, "retrying": 0, "failed": 0, "stale": 0}
    start = now()
    due = endpoints_due(now(), lead)
    db.session.rollback()
    for endpoint_id in due:
        left = budget - (now() - start).total_seconds()
        if left <= 0:
            break
        for key, value in send_endpoint(endpoint_id, lead, now, left, pause).items():
            totals[key] += value
    return totals


def backing_off(endpoint_id: int, at: datetime) -> bool:
    """Return whether the endpoint waits out its back-off (or has a stale sender's write)."""
    retry_at = db.session.scalar(sa.select(WebhookEndpoint.retry_at).where(
        WebhookEndpoint.id == endpoint_id))
    db.session.rollback()
    return retry_at is not None and retry_at > at


def due_reads(lead: Lead) -> list[sa.ColumnElement]:
    """Return what due() reads, as scalar subqueries for one SELECT with others' reads."""
    pending = WebhookDelivery.status == "pending"
    held = replica.held(WebhookDelivery.replica_lsn)
    first = _first(pending, ~held)  # or the endpoint's back-off, if later
    later = sa.case((WebhookEndpoint.retry_at > first, WebhookEndpoint.retry_at), else_=first)
    sending = WebhookDelivery.status == "sending"
    return [sa.select(sa.func.min(later)).scalar_subquery(),
            sa.select(sa.func.min(WebhookDelivery.claimed_at)).where(sending).scalar_subquery(),
            sa.exists().where(sending, _theirs(lead)),
            sa.select(sa.func.min(WebhookDelivery.created_at)).where(pending, held)
            .scalar_subquery()]


def due(values: Sequence, now: datetime) -> tuple[datetime | None, bool]:
    """Return when a send or a lapsed claim is next due, and whether another leader's waits.

    Deliveries held for a standby are looked at again soon, never at once (no spin).
    """
    first, claimed, earlier_term, held_since = values
    times = [t for t in (first, claimed and claimed + _lease()) if t is not None]
    if held_since is not None:
        times.append(replica.next_look(now, held_since))
    return min(times, default=None), bool(earlier_term)


def held_for_replica(now: datetime) -> int:
    """Return how many deliveries wait for a standby to replay their event now."""
    return db.session.scalar(sa.select(sa.func.count()).where(
        WebhookDelivery.status == "pending",
        ~replica.passes(WebhookDelivery.replica_lsn, WebhookDelivery.created_at, now))) or 0
