"""Webhooks (admins only): endpoints, the delivery log, and redelivery."""

from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_login import current_user
from markupsafe import Markup

from ..accounts.security import role_required
from ..accounts.stepup import step_up
from ..extensions import db
from ..models import WebhookDelivery, WebhookEndpoint
from ..plugins import endpoints
from ..plugins.webhook_sends import in_words

bp = Blueprint("webhooks", __name__, url_prefix="/admin/webhooks")

bp.add_app_template_filter(in_words, "in_words")


@bp.app_template_filter("event_label")
def event_label(topic: str) -> Markup:
    """Say an event in words, its raw name small beside it (what a receiver reads)."""
    return Markup('{} <span class="mono small muted">{}</span>').format(
        endpoints.LABELS.get(topic, topic), topic)


# the form holds a fresh secret (or echoes the one typed): never kept by a browser or proxy
NO_STORE = {"Cache-Control": "no-store"}


def _page(form: dict, errors: dict, status: int = 200):
    hooks = endpoints.list_webhooks()
    return render_template("webhooks/index.html", endpoints=hooks, form=form, errors=errors,
                           deliveries=endpoints.deliveries(), topics=endpoints.TOPICS,
                           urls={e.id: e.url for e in hooks}), status, NO_STORE


@bp.get("/")
@role_required("admin")
def index():
    """List endpoints and recent deliveries, with a form offering a fresh secret."""
    return _page({"url": "", "description": "", "events": list(endpoints.DEFAULT_TOPICS),
                  "secret": endpoints.new_secret(), "payload_format": "standard"}, {})


@bp.post("/")
@role_required("admin")
@step_up
def create():
    """Add an endpoint; its secret is not shown again."""
    form: dict[str, Any] = {"url": request.form.get("url", "").strip(),
                            "description": request.form.get("description", "").strip(),
                            "events": request.form.getlist("events"),
                            "secret": request.form.get("secret", ""),
                            "payload_format": request.form.get("payload_format", "standard")}
    try:
        endpoints.create_webhook(form["url"], form["events"], form["secret"],
                                 form["description"], form["payload_format"])
    except endpoints.WebhookError as exc:
        db.session.rollback()
        return _page(form, exc.errors, 422)
    flash("Webhook added. Its secret is not shown again: keep the copy you made.", "success")
    return redirect(url_for("webhooks.index"), code=303)


def _endpoint_or_404(endpoint_id: int) -> WebhookEndpoint:
    endpoint = db.session.get(WebhookEndpoint, endpoint_id)
    if endpoint is None:
        abort(404)
    return endpoint


@bp.post("/<int:endpoint_id>/<any(enable, disable):change>")
@role_required("admin")
@step_up
def switch(endpoint_id: int, change: str):
    """Switch an endpoint on or off."""
    endpoints.set_active(_endpoint_or_404(endpoint_id), change == "enable")
    flash(f"Webhook switched {'on' if change == 'enable' else 'off'}.", "success")
    return redirect(url_for("webhooks.index"), code=303)


@bp.post("/<int:endpoint_id>/test")
@role_required("admin")
def send_test(endpoint_id: int):
    """Send the endpoint a signed ping now."""
    try:
        delivery = endpoints.send_test(_endpoint_or_404(endpoint_id), current_user.email)
    except endpoints.WebhookError as exc:
        flash(exc.errors["form"], "error")
    else:
        flash(f"Test event sent (delivery {delivery.delivery_id}): its result shows under "
              "Recent deliveries in a moment.", "success")
    return redirect(url_for("webhooks.index"), code=303)


@bp.post("/<int:endpoint_id>/delete")
@role_required("admin")
def delete(endpoint_id: int):
    """Delete an endpoint and its deliveries."""
    endpoints.delete_webhook(_endpoint_or_404(endpoint_id))
    flash("Webhook deleted.", "success")
    return redirect(url_for("webhooks.index"), code=303)


@bp.post("/deliveries/<int:delivery_id>/redeliver")
@role_required("admin")
def redeliver(delivery_id: int):
    """Send a delivery again (same delivery id and body)."""
    delivery = db.session.get(WebhookDelivery, delivery_id)
    if delivery is None:
        abort(404)
    endpoints.redeliver(delivery)
    flash("Redelivery queued.", "success")
    return redirect(url_for("webhooks.index"), code=303)
