"""Webhook endpoints as admins manage them: create (validated), list, switch, delete, redeliver.

The JSON API calls these too. The secret is stored because every body is signed
with it, but nothing here returns it after creation and nothing logs it. New secrets
have the Standard Webhooks form whsec_<base64>; secrets typed without the prefix are
still accepted (see signing.py for how they key the Standard Webhooks signature).
"""

import json
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from flask import current_app

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PLUGINS
from ..models import Release, WebhookDelivery, WebhookEndpoint
from ..ops import alerts, audit
from ..posts import review
from . import signing
from .base import TOPIC_HOOKS, ValidationError
from .net import UnsafeURL, encode_url, resolve

TOPICS = (*TOPIC_HOOKS, *review.TOPICS, Release.TOPIC, *alerts.OPS_TOPICS)
# each event as the webhooks page says it; the raw name is shown small beside it
LABELS = {
    "post.published": "A post goes live",
    "post.unpublished": "A post is taken down",
    "post.updated": "A live post's text changes",
    "post.submitted": "A post is submitted for review",
    "post.approved": "A post in review is approved",
    "post.returned": "A post in review is sent back with a note",
    "release.published": "A release goes live",
    "ops.no_leader": "Nobody is publishing (or running timers)",
    "ops.leader_evicted": "A stuck process was replaced",
    "ops.post_late": "A post is late",
    "ops.timer_paused": "A timer paused itself after failures",
    "ops.webhook_failing": "A webhook keeps failing",
    "ops.purge_failing": "A cache purge keeps failing",
}
FORMATS = ("standard", "slack")  # the event as JSON, or Slack's {"text": ...}
DEFAULT_TOPICS = (*TOPIC_HOOKS, Release.TOPIC)  # the form's first offer; ops alerts are opted into
MIN_SECRET = 16
MAX_SECRET = 200


class WebhookError(ValidationError):
    """A webhook setting Soloist refuses; .field names it (url, events or secret)."""


def new_secret() -> str:
    """Return a fresh random whsec_ secret to offer in the form (or return from the API)."""
    return signing.new_secret()


def check_url(url: str, allow_private: bool | None = None) -> str:
    """Return url in plain ASCII if it is http(s) and resolves only to allowed addresses."""
    url = (url or "").strip()
    if allow_private is None:
        allow_private = current_app.config["WEBHOOK_ALLOW_PRIVATE"]
    if not url:
        raise WebhookError({"url": "Give the URL to deliver to."})
    if len(url) > 2000:
        raise WebhookError({"url": "That URL is too long (2000 characters at most)."})
    try:
        url = encode_url(url)
        if len(url) > 2000:
            raise UnsafeURL("That URL is too long once encoded (2000 characters at most).")
        resolve(url, allow_private)
    except UnsafeURL as exc:
        raise WebhookError({"url": str(exc)}) from None
    return url


def _check_events(events: Iterable[str] | None) -> list[str]:
    chosen = [e for e in TOPICS if e in set(events or ())]
    unknown = sorted(set(events or ()) - set(TOPICS))
    if unknown:
        raise WebhookError({"events": f"Unknown event {unknown[0]}; events are "
                                      f"{', '.join(TOPICS)}."})
    if not chosen:
        raise WebhookError({"events": "Pick at least one event."})
    return chosen


def _check_secret(secret: str | None) -> str:
    secret = (secret or "").strip()
    if not MIN_SECRET <= len(secret) <= MAX_SECRET:
        raise WebhookError({"secret": f"Use a secret of {MIN_SECRET} to {MAX_SECRET} "
                                      "characters (the form offers a random one)."})
    low, high = signing.KEY_BYTES
    size = len(signing.whsec_key(secret) or b"")
    if secret.startswith(signing.PREFIX) and not low <= size <= high:
        raise WebhookError({"secret": f"A {signing.PREFIX} secret is the prefix and the base64 "
                                      f"of {low} to {high} random bytes; use the one offered, "
                                      "or a secret without the prefix."})
    return secret


def _check_format(payload_format: str | None) -> str:
    chosen = "standard" if payload_format is None else payload_format
    if chosen not in FORMATS:
        raise WebhookError({"payload_format": f"Choose a payload format: {', '.join(FORMATS)}."})
    return chosen


def create_webhook(url: str, events: Iterable[str], secret: str,
                   description: str = "", payload_format: str = "standard") -> WebhookEndpoint:
    """Validate and store an endpoint; raise WebhookError naming the field."""
    errors: dict[str, str] = {}
    values: dict = {}
    fields: list[tuple[str, Callable[[Any], object], object]] = [
        ("url", check_url, url), ("events", _check_events, events),
        ("secret", _check_secret, secret), ("payload_format", _check_format, payload_format)]
    for name, check, raw in fields:
        try:
            values[name] = check(raw)
        except WebhookError as exc:
            errors.update(exc.errors)
    if len(description or "") > 200:
        errors["description"] = "Keep the description under 200 characters."
    if errors:
        raise WebhookError(errors)
    endpoint = WebhookEndpoint(description=(description or "").strip(), active=True, **values)
    db.session.add(endpoint)
    db.session.flush()  # the audit row names the new endpoint's id; never its secret
    audit.record("webhook.create", _target(endpoint), {"url": endpoint.url,
                                                        "events": endpoint.events})
    db.session.commit()
    return endpoint


def _target(endpoint: WebhookEndpoint) -> str:
    return audit.target("webhook", endpoint.id, endpoint.url)


def list_webhooks() -> list[WebhookEndpoint]:
    """Return every endpoint, oldest first."""
    return list(db.session.scalars(sa.select(WebhookEndpoint).order_by(WebhookEndpoint.id)))


def set_active(endpoint: WebhookEndpoint, active: bool) -> None:
    """Switch an endpoint on or off (off: new events are not queued for it)."""
    audit.record("webhook.enable" if active else "webhook.disable", _target(endpoint),
                 {"active": [endpoint.active, active]})
    endpoint.active = active
    db.session.commit()


def delete_webhook(endpoint: WebhookEndpoint) -> None:
    """Delete an endpoint and its delivery log."""
    audit.record("webhook.delete", _target(endpoint), {"url": endpoint.url,
                                                        "events": endpoint.events})
    db.session.delete(endpoint)
    db.session.commit()


PING = "ping"  # a test event from the webhooks page: signed and sent like any other


def send_test(endpoint: WebhookEndpoint, by: str) -> WebhookDelivery:
    """Queue a signed ping to endpoint, sent at once by the plugin leader; audited.

    Its body has the shape of every event's (Slack's {"text": ...} for a Slack endpoint),
    under a fresh id: testing twice sends twice. A switched-off endpoint is refused.
    """
    if not endpoint.active:
        raise WebhookError({"form": "This webhook is switched off: switch it on to test it."})
    now = database_now()
    delivery_id, event_id = str(uuid.uuid4()), str(uuid.uuid4())
    data = {"message": "A test event from Soloist's webhooks page: this endpoint receives "
                       "Soloist's events.", "sent_by": by}
    body = {"delivery": delivery_id, "event": PING, "event_id": event_id,
            "created_at": now.isoformat(), "data": data}
    if endpoint.payload_format == "slack":
        body = {"text": f"Soloist test event: this endpoint works (sent by {by})."}
    delivery = WebhookDelivery(delivery_id=delivery_id, endpoint_id=endpoint.id, topic=PING,
                               body=json.dumps(body, sort_keys=True, separators=(",", ":")),
                               status="pending", attempts=0, next_attempt_at=now,
                               last_error="", created_at=now)
    db.session.add(delivery)
    db.session.flush()
    audit.record("webhook.test", audit.target("webhook", endpoint.id, endpoint.url),
                 {"delivery_id": delivery_id})
    wake_scheduler(PLUGINS.name)  # at commit: the plugin leader sends it at once
    db.session.commit()
    return delivery


def deliveries(limit: int = 100, endpoint_id: int | None = None) -> list[WebhookDelivery]:
    """Return the latest deliveries, newest first."""
    query = sa.select(WebhookDelivery).order_by(WebhookDelivery.id.desc()).limit(limit)
    if endpoint_id is not None:
        query = query.where(WebhookDelivery.endpoint_id == endpoint_id)
    return list(db.session.scalars(query))


def redeliver(delivery: WebhookDelivery, now: datetime | None = None) -> None:
    """Send a delivery again, same id and body, with a fresh retry budget.

    Honoured whatever its status, an attempt in flight (sending) too: its claim is
    cleared in the same UPDATE, so that attempt's outcome, when it comes, changes nothing
    (it may still reach the receiver; the same webhook-id lets it drop one of the two).
    """
    delivery_id, was = delivery.id, delivery.status
    now = now or database_now()  # before the changes: on PostgreSQL it ends a transaction
    db.session.execute(
        sa.update(WebhookDelivery).where(WebhookDelivery.id == delivery_id)
        .values(status="pending", attempts=0, next_attempt_at=now, claimed_at=None, claim="")
        .execution_options(synchronize_session="fetch"))
    audit.record("webhook.redeliver", audit.target("delivery", delivery_id, delivery.topic),
                 {"endpoint": delivery.endpoint_id, "delivery_id": delivery.delivery_id,
                  "status": [was, "pending"]})
    wake_scheduler(PLUGINS.name)  # at commit: the plugin leader sends it at once
    db.session.commit()
