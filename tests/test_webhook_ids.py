"""Webhook ids come from what happened: a publication redone after a lossy failover carries
the same webhook-id and event_id, so the receiver drops it; a new publication gets new ones."""

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from webapp import posts
from webapp.extensions import db
from webapp.models import HookDelivery, OutboxEvent, Post, WebhookDelivery
from webapp.plugins import hooks, webhooks
from webapp.plugins.endpoints import create_webhook, redeliver
from webapp.scheduling import publish

SECRET = "s3cret-for-the-receiver-only"
T0 = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)  # ahead: schedulable
TOPICS = ["post.published", "post.unpublished", "ops.webhook_failing"]


@pytest.fixture
def endpoints(app):
    """Two endpoints (private addresses allowed), the app's context pushed."""
    app.config.update(WEBHOOK_ALLOW_PRIVATE=True)
    with app.app_context():
        yield [create_webhook(f"http://127.0.0.1:9/{name}", TOPICS, SECRET).id
               for name in ("a", "b")]


def fan_out(now: datetime) -> list[tuple[int, str, str]]:
    """Fan the outbox out as the plugin leader does; return (endpoint, delivery id, event id)."""
    hooks.fan_out(now, {"webhooks"}, webhooks.enqueue_events)
    rows = db.session.execute(sa.select(WebhookDelivery.endpoint_id, WebhookDelivery.delivery_id,
                                        WebhookDelivery.body)
                              .order_by(WebhookDelivery.id)).all()
    return [(endpoint, delivery, json.loads(body)["event_id"]) for endpoint, delivery, body in rows]


def lose_the_publication(post_id: int, version: int) -> None:
    """What a lossy failover does: the publication's commit never reached the new primary."""
    for model in (WebhookDelivery, HookDelivery, OutboxEvent):
        db.session.execute(sa.delete(model))
    db.session.execute(sa.update(Post).where(Post.id == post_id).values(
        status="scheduled", version=version, published_at=None))
    db.session.commit()


def scheduled_post(now: datetime) -> Post:
    return posts.create_post("Hello", "hello", "", now + timedelta(hours=1))


def test_a_publication_redone_after_a_lossy_failover_carries_the_same_ids(endpoints):
    post = scheduled_post(T0)
    post_id, version = post.id, post.version
    due = T0 + timedelta(hours=1)
    publish.tick(due)
    first = fan_out(due)
    assert len(first) == 2 and len({event for *_, event in first}) == 1  # one event, 2 ids
    lose_the_publication(post_id, version)
    publish.tick(due + timedelta(seconds=3))  # the new primary's leader publishes it again
    again = fan_out(due + timedelta(seconds=3))
    assert again == first
    assert db.session.scalar(sa.select(OutboxEvent.id)) != 1  # the sequence moved on anyway


def test_a_republication_after_an_unpublish_is_a_new_event_with_new_ids(endpoints):
    post = scheduled_post(T0)
    publish.tick(T0 + timedelta(hours=1))
    published = fan_out(T0)
    posts.unpublish_post(post.id)
    posts.publish_now(post.id)
    later = fan_out(T0)
    assert len(later) == 6
    ids = {delivery for _, delivery, _ in later}
    events = [event for *_, event in later]
    assert len(ids) == 6 and len(set(events)) == 3  # published, unpublished, published again
    assert later[:2] == published and events[4] != events[0]


def test_a_redelivery_keeps_its_id_and_an_alert_has_an_id_of_its_occurrence(endpoints):
    from webapp.ops import alerts

    alerts.webhook_failing(endpoints[0], "http://127.0.0.1:9/a", 3, "HTTP 500", T0)
    db.session.commit()
    [(endpoint, delivery_id, event_id)] = fan_out(T0)  # never sent to the failing one itself
    assert endpoint == endpoints[1]
    row = db.session.scalar(sa.select(WebhookDelivery))
    redeliver(row, now=T0 + timedelta(hours=1))
    assert db.session.scalar(sa.select(WebhookDelivery.delivery_id)) == delivery_id
    lose = [sa.delete(WebhookDelivery), sa.delete(OutboxEvent)]
    for statement in lose:
        db.session.execute(statement)
    db.session.commit()
    alerts.webhook_failing(endpoints[0], "http://127.0.0.1:9/a", 3, "HTTP 500", T0)
    db.session.commit()
    assert fan_out(T0) == [(endpoint, delivery_id, event_id)]
