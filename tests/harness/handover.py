"""Deliveries queued for a handover under load (tests/test_handover_sends.py and
bench/deliveries.py's handover row): endpoints of one receiver, events queued to each."""

from collections import Counter
from datetime import UTC, datetime

import sqlalchemy as sa

from tests.harness.receiver import Receiver
from tests.harness.support import make_app
from webapp.db import wake_scheduler
from webapp.extensions import db
from webapp.models import OutboxEvent, WebhookDelivery
from webapp.plugins import webhooks
from webapp.plugins.base import HookEvent
from webapp.plugins.endpoints import create_webhook


def queue_deliveries(url: str, receiver_url: str, endpoints: int, events: int) -> set[str]:
    """Subscribe endpoints endpoints of the receiver, queue events events to each (due now,
    the plugin leader woken); return the delivery ids."""
    app = make_app(url, WEBHOOK_ALLOW_PRIVATE=True)
    with app.app_context():
        for n in range(endpoints):
            create_webhook(f"{receiver_url}/e{n}", ["post.published"], f"s3cret-endpoint-{n}")
        now = datetime.now(UTC)
        rows = [OutboxEvent(topic="post.published", payload={"slug": f"p{n}"}, created_at=now,
                            processed_at=now, dedupe_key=f"handover:{n}") for n in range(events)]
        db.session.add_all(rows)
        db.session.commit()
        webhooks.enqueue_events([HookEvent(e.id, e.topic, None, e.payload, now, e.dedupe_key)
                                 for e in rows])
        wake_scheduler("plugins")
        db.session.commit()
        ids = set(db.session.scalars(sa.select(WebhookDelivery.delivery_id)))
        db.session.remove()
        db.engine.dispose()
    return ids


def received(receiver: Receiver) -> Counter:
    """Return how many times each delivery id reached the receiver."""
    return Counter(r.headers["X-Soloist-Delivery"] for r in receiver.received())
