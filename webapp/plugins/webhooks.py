"""Built-in plugin: deliver post.published / post.unpublished to admins' webhook endpoints.

Its hooks queue one delivery per subscribed endpoint (UNIQUE per endpoint and
event) with a fixed body and a delivery id that stays the same across retries,
then try to send it at once. The `deliver` timer sends what is due again:
failures wait base × 2^(attempt-1) before the next try, and after the last
attempt the delivery is `failed` until an admin redelivers it. Every request
carries X-Soloist-Event, X-Soloist-Delivery and X-Soloist-Signature
(sha256= HMAC of the body with the endpoint's secret).
"""

import hashlib
import hmac
import http.client
import json
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import sqlalchemy as sa
from flask import current_app

from ..db import clock, database_now, for_update_skip_locked, insert_ignoring_conflicts
from ..extensions import db
from ..models import WebhookDelivery, WebhookEndpoint
from .base import HookEvent, Plugin, RunContext
from .hooks import backoff
from .net import UnsafeURL, post

log = logging.getLogger("soloist.plugins.webhooks")

TIMEOUT_SECONDS = 10.0
MAX_ATTEMPTS = 6
RETRY_SECONDS = 30.0
CLAIM_BATCH = 10

plugin = Plugin("webhooks", "Webhooks",
                "POSTs signed JSON to the endpoints admins configure when posts are "
                "published or unpublished, with retries and redelivery.")
plugin.default_timer("deliver", "deliver", name="Webhooks: deliver and retry",
                     every=(1, "minutes"), max_runtime_seconds=600)


def sign(secret: str, body: bytes) -> str:
    """Return the X-Soloist-Signature value for body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _setting(name: str, default: float) -> float:
    return float(current_app.config.get(name, default))


@plugin.hook("on_publish")
def on_publish(event: HookEvent) -> None:
    """Queue and send this event to its endpoints."""
    if enqueue(event):
        deliver_due(clock(database_now()), _setting("WEBHOOK_TIMEOUT_SECONDS", TIMEOUT_SECONDS)
                    * CLAIM_BATCH, event_id=event.id)


plugin.hook("on_unpublish")(on_publish)


@plugin.action("deliver", help="Send the webhook deliveries that are due (retries included).")
def deliver(ctx: RunContext) -> str:
    counts = deliver_due(clock(ctx.started_at), max(ctx.time_left() - 30, 1.0))
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "nothing due"


def enqueue(event: HookEvent) -> int:
    """Queue one delivery of event per active endpoint subscribed to it; return how many."""
    endpoints = [e for e in db.session.scalars(
        sa.select(WebhookEndpoint).where(WebhookEndpoint.active)) if event.topic in e.events]
    rows = []
    for endpoint in endpoints:
        delivery_id = str(uuid.uuid4())
        body = {"delivery": delivery_id, "event": event.topic, "event_id": event.id,
                "created_at": event.created_at.isoformat(), "data": event.payload}
        rows.append({"delivery_id": delivery_id, "endpoint_id": endpoint.id,
                     "event_id": event.id, "topic": event.topic, "status": "pending",
                     "body": json.dumps(body, sort_keys=True, separators=(",", ":")),
                     "attempts": 0, "next_attempt_at": event.created_at, "last_error": "",
                     "created_at": event.created_at})
    if rows:
        db.session.execute(insert_ignoring_conflicts(WebhookDelivery, ["endpoint_id",
                                                                       "event_id"]), rows)
    db.session.commit()
    return len(rows)


def _claimable(now: datetime):
    lease = timedelta(seconds=_setting("WEBHOOK_TIMEOUT_SECONDS", TIMEOUT_SECONDS) + 60)
    return sa.or_(
        sa.and_(WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= now),
        sa.and_(WebhookDelivery.status == "sending", WebhookDelivery.claimed_at < now - lease),
    )


def claim(now: datetime, event_id: int | None = None) -> list[int]:
    """Claim up to a batch of due deliveries; return their ids."""
    query = (sa.select(WebhookDelivery.id).where(_claimable(now))
             .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id).limit(CLAIM_BATCH))
    if event_id is not None:
        query = query.where(WebhookDelivery.event_id == event_id)
    ids = list(db.session.scalars(for_update_skip_locked(query)))
    claimed = list(db.session.scalars(
        sa.update(WebhookDelivery).where(WebhookDelivery.id.in_(ids), _claimable(now))
        .values(status="sending", claimed_at=now).returning(WebhookDelivery.id))) if ids else []
    db.session.commit()
    return sorted(claimed)


def deliver_due(now: Callable[[], datetime], budget: float,
                event_id: int | None = None) -> dict[str, int]:
    """Send due deliveries until none is left or budget seconds have passed."""
    counts = {"delivered": 0, "retrying": 0, "failed": 0}
    start = now()
    while (now() - start).total_seconds() < budget:
        ids = claim(now(), event_id)
        if not ids:
            break
        for delivery_id in ids:
            counts[attempt(delivery_id, now)] += 1
    return counts


def attempt(delivery_id: int, now: Callable[[], datetime]) -> str:
    """Send one claimed delivery once; record and return delivered, retrying or failed."""
    delivery = db.session.get(WebhookDelivery, delivery_id)
    endpoint = db.session.get(WebhookEndpoint, delivery.endpoint_id)
    body, topic = delivery.body.encode(), delivery.topic
    headers = {"X-Soloist-Event": topic, "X-Soloist-Delivery": delivery.delivery_id}
    url, active = endpoint.url, endpoint.active
    if active:
        headers["X-Soloist-Signature"] = sign(endpoint.secret, body)
    db.session.rollback()  # hold no transaction while the receiver answers
    timeout = _setting("WEBHOOK_TIMEOUT_SECONDS", TIMEOUT_SECONDS)
    status, error, final = None, "", False
    try:
        if not active:
            raise UnsafeURL("The endpoint is switched off.")
        status = post(url, body, headers, timeout,
                      bool(current_app.config.get("WEBHOOK_ALLOW_PRIVATE", False)))
        if not 200 <= status < 300:
            error = f"The receiver answered HTTP {status}."
    except UnsafeURL as exc:
        error, final = f"Not sent: {exc}", True
    except TimeoutError:
        error = f"No answer within {timeout:g} s."
    except (OSError, http.client.HTTPException) as exc:
        error = f"{type(exc).__name__}: {exc}"
    if error:
        log.info("webhook delivery %s to endpoint %s failed: %s", delivery_id,
                 delivery.endpoint_id, error)
    return _record(delivery_id, status, error, final, now())


def _record(delivery_id: int, status: int | None, error: str, final: bool,
            at: datetime) -> str:
    delivery = db.session.get(WebhookDelivery, delivery_id)
    delivery.attempts += 1
    delivery.last_attempt_at = at
    delivery.response_status = status
    delivery.last_error = error[:500]
    delivery.claimed_at = None
    if not error:
        delivery.status, delivery.delivered_at, delivery.next_attempt_at = "delivered", at, None
    elif final or delivery.attempts >= int(_setting("WEBHOOK_MAX_ATTEMPTS", MAX_ATTEMPTS)):
        delivery.status, delivery.next_attempt_at = "failed", None
    else:
        delivery.status = "pending"
        delivery.next_attempt_at = at + backoff(delivery.attempts,
                                                _setting("WEBHOOK_RETRY_SECONDS", RETRY_SECONDS))
    db.session.commit()
    return {"delivered": "delivered", "failed": "failed"}.get(delivery.status, "retrying")
