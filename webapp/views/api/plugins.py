"""Serve the webhooks and timers endpoints of the JSON API."""

from flask import g, jsonify, url_for

from ... import timers
from ...accounts.stepup import step_up
from ...extensions import db
from ...models import Timer, TimerRun, WebhookDelivery, WebhookEndpoint
from ...plugins import endpoints
from ...plugins.base import ValidationError
from ...timefmt import iso
from ...timers import access
from .auth import api_role
from .blueprint import bp
from .errors import ApiError, created, invalid
from .inputs import json_body, text_field

DELIVERIES_LIMIT = 100


def webhook_json(endpoint: WebhookEndpoint) -> dict:
    """Return an endpoint as the API shows it: never its secret (see create_webhook)."""
    return {"id": endpoint.id, "url": endpoint.url, "description": endpoint.description,
            "events": list(endpoint.events or []), "active": endpoint.active,
            "created_at": iso(endpoint.created_at), "payload_format": endpoint.payload_format}


def delivery_json(delivery: WebhookDelivery) -> dict:
    """Return one webhook delivery and where it stands."""
    return {"id": delivery.id, "delivery_id": delivery.delivery_id, "topic": delivery.topic,
            "event_id": delivery.event_id, "status": delivery.status,
            "attempts": delivery.attempts, "response_status": delivery.response_status,
            "last_error": delivery.last_error, "next_attempt_at": iso(delivery.next_attempt_at),
            "last_attempt_at": iso(delivery.last_attempt_at),
            "delivered_at": iso(delivery.delivered_at), "created_at": iso(delivery.created_at)}


def run_json(run: TimerRun | None) -> dict | None:
    """Return one timer run, or None."""
    if run is None:
        return None
    return {"id": run.id, "status": run.status, "trigger": run.trigger,
            "scheduled_for": iso(run.scheduled_for), "started_at": iso(run.started_at),
            "finished_at": iso(run.finished_at), "duration_seconds": run.duration_seconds,
            "result": run.result, "error": run.error, "instance": run.instance}


def timer_json(timer: Timer, last: TimerRun | None = None) -> dict:
    """Return a timer, its schedule and its latest run."""
    return {"id": timer.id, "name": timer.name, "action": timer.qualified_action,
            "params": timer.params, "kind": timer.kind, "every": timer.every,
            "unit": timer.unit, "cron": timer.cron, "run_at": iso(timer.run_at),
            "timezone": timer.timezone, "paused": timer.paused,
            "paused_reason": timer.paused_reason, "next_run_at": iso(timer.next_run_at),
            "consecutive_failures": timer.consecutive_failures, "last_run": run_json(last)}


def _refusal(exc: ValidationError) -> ApiError:
    fields = dict(exc.errors)
    return ApiError(422, f"Invalid field: {exc.field}",
                    "; ".join(f"{k}: {v}" for k, v in fields.items()), fields=fields)


@bp.get("/webhooks")
@api_role("admin")
def list_webhooks():
    """List the webhook endpoints."""
    return jsonify(webhooks=[webhook_json(e) for e in endpoints.list_webhooks()])


@bp.post("/webhooks")
@api_role("admin")
@step_up
def create_webhook():
    """Register an endpoint: {url, events, secret?, description?, payload_format?} -> 201.

    Without a secret, a fresh whsec_ one is made and returned in this answer, never again.
    """
    data = json_body({"url", "events", "secret", "description", "payload_format"})
    url = text_field(data, "url", required=True)
    made = "secret" not in data
    secret = endpoints.new_secret() if made else text_field(data, "secret", required=True)
    description = text_field(data, "description")
    payload_format = text_field(data, "payload_format", default="standard")
    events = data.get("events")
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise invalid("events", 'must be a list of event names, e.g. ["post.published"]')
    try:
        endpoint = endpoints.create_webhook(url, events, secret, description, payload_format)
    except ValidationError as exc:
        raise _refusal(exc) from None
    shown = webhook_json(endpoint) | ({"secret": secret} if made else {})
    response, status = created(shown, url_for("api.webhook_deliveries", webhook_id=endpoint.id))
    response.headers["Cache-Control"] = "no-store"  # it may carry the only copy of the secret
    return response, status


@bp.get("/webhooks/<int:webhook_id>/deliveries")
@api_role("admin")
def webhook_deliveries(webhook_id: int):
    """List an endpoint's latest deliveries, newest first."""
    if db.session.get(WebhookEndpoint, webhook_id) is None:
        raise ApiError(404, "Not found", "No webhook has that id.")
    found = endpoints.deliveries(DELIVERIES_LIMIT, endpoint_id=webhook_id)
    return jsonify(deliveries=[delivery_json(d) for d in found])


@bp.get("/timers")
@api_role("editor")
def list_timers():
    """List every timer with its latest run."""
    return jsonify(timers=[timer_json(t, last) for t, last in timers.list_timers()])


@bp.post("/timers/<int:timer_id>/run")
@api_role("editor")
def run_timer(timer_id: int):
    """Queue a run now for the plugin leader -> 202 with the queued run."""
    timer = db.session.get(Timer, timer_id)
    if timer is None:
        raise ApiError(404, "Not found", "No timer has that id.")
    if not access.may_change(g.api_user, timer.plugin):
        raise ApiError(403, "Forbidden", access.refusal(timer.plugin))
    run = timers.queue_run_now(timer)
    return jsonify(timer=timer_json(timer), run=run_json(run)), 202
