"""Claims are fenced at the moment of the side effect: a successor leaves a live holder's
claim alone until its lease ends, a sender whose leadership ended sends nothing and hands
its claim back, and a leadership that was released fences nothing in."""

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.receiver import Receiver
from webapp.extensions import db
from webapp.leadership.fence import Lead, gone
from webapp.leadership.keys import PLUGINS
from webapp.models import HookDelivery, LeaderState, OutboxEvent, WebhookDelivery
from webapp.plugins import Plugin, hooks, registry, webhook_sends, webhooks
from webapp.plugins.base import HookEvent
from webapp.plugins.endpoints import create_webhook

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)
# a leader that handed over and still runs (it drains its sends), and its successor
HANDED_OVER = Lead(4, "soloist:web.1:7:drainsee:abcdef")
SUCCESSOR = Lead(5, "soloist:web.2:7:successr:ghijkl")

leased = Plugin("leased", "Leased", "A test hook.")
CALLED: list[int] = []


@leased.hook("on_publish")
def on_publish(event) -> None:
    CALLED.append(event.id)


@pytest.fixture
def webhooked(app, pg_url):
    """The app, a receiver subscribed, one delivery queued, and the handed-over leader's
    process alive (a connection of the database carries its boot id)."""
    CALLED.clear()
    registry.register(leased)
    app.config.update(WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=3)
    receiver = Receiver().start()
    alive = psycopg.connect(pg_url,
                            application_name="soloist-web:web.1:7:drainsee:abcdef")
    try:
        with app.app_context():
            create_webhook(receiver.url + "/in", ["post.published"], "s3cret-receiver-1")
            event = OutboxEvent(topic="post.published", payload={"slug": "p"}, created_at=T0,
                                processed_at=T0, dedupe_key="lease:1")
            db.session.add(event)
            db.session.commit()
            webhooks.enqueue(HookEvent(event.id, event.topic, None, event.payload, T0,
                                       event.dedupe_key))
            yield receiver, alive
    finally:
        alive.close()
        receiver.close()
        registry.unregister("leased")


def lead(now: Lead, open_term: bool = True) -> None:
    """Make now the plugin key's leadership; open_term False: released (holder_pid NULL)."""
    state = db.session.get(LeaderState, PLUGINS.value) or LeaderState(key=PLUGINS.value)
    state.term, state.holder, state.acquired_at = now.term, now.holder, T0
    state.holder_pid = 4242 if open_term else None
    db.session.add(state)
    db.session.commit()


def delivery() -> WebhookDelivery:
    db.session.rollback()
    return db.session.scalar(sa.select(WebhookDelivery))



def end(alive: psycopg.Connection) -> None:
    """End the handed-over leader's process: its connection closes, and the server lets its
    session go a moment later (what a successor reads)."""
    alive.close()
    wait_for(lambda: gone([HANDED_OVER.holder]) == [HANDED_OVER.holder], 10,
             "the server to let the closed session go")

def test_a_successor_leaves_a_live_holders_claim_alone_until_it_is_gone(webhooked):
    receiver, alive = webhooked
    lead(HANDED_OVER)
    claim = webhooks.claim_next(delivery().endpoint_id, T0, HANDED_OVER)
    lead(SUCCESSOR)  # the SIGTERM: it handed over, and its sender still waits on the receiver
    assert gone([HANDED_OVER.holder]) == []
    sent = webhooks.deliver_due(lambda: T0 + timedelta(seconds=1), 5, SUCCESSOR)
    assert sent["delivered"] == 0 and receiver.calls == 0  # not sent beside it
    end(alive)  # its process ends without recording (a crash): at least once
    sent = webhooks.deliver_due(lambda: T0 + timedelta(seconds=2), 5, SUCCESSOR)
    assert sent["delivered"] == 1 and receiver.calls == 1
    assert webhook_sends.record(claim, 200, "", False, T0) == "stale"


def test_a_process_that_ends_is_gone_even_to_a_transaction_that_saw_it_alive(webhooked, pg_url):
    """PostgreSQL keeps one copy of pg_stat_activity per transaction: without dropping it,
    a sender that once saw the holder alive would wait on a dead process to its lease."""
    _receiver, alive = webhooked
    assert gone([HANDED_OVER.holder]) == []  # this transaction has now read it alive
    backend = alive.info.backend_pid
    alive.close()
    with psycopg.connect(pg_url, autocommit=True) as other:
        wait_for(lambda: not other.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                           [backend]).fetchone(), 10, "the session to end")
    assert db.session().in_transaction()
    assert gone([HANDED_OVER.holder]) == [HANDED_OVER.holder]


def test_a_live_holders_claim_is_taken_once_its_lease_is_up(webhooked):
    receiver, _alive = webhooked
    lead(HANDED_OVER)
    webhooks.claim_next(delivery().endpoint_id, T0, HANDED_OVER)
    lead(SUCCESSOR)
    lease = timedelta(seconds=3 + webhooks.LEASE_MARGIN)  # the send's timeout and a margin
    assert webhooks.deliver_due(lambda: T0 + lease, 5, SUCCESSOR)["delivered"] == 0
    later = T0 + lease + timedelta(seconds=1)  # stuck past its lease (a name lookup, say)
    assert webhooks.deliver_due(lambda: later, 5, SUCCESSOR)["delivered"] == 1
    assert receiver.calls == 1


def test_a_sender_whose_leadership_ended_sends_nothing_and_hands_its_claim_back(webhooked):
    receiver, _alive = webhooked
    lead(HANDED_OVER)
    claim = webhooks.claim_next(delivery().endpoint_id, T0, HANDED_OVER)
    lead(HANDED_OVER, open_term=False)  # released: no successor's acquire has committed yet
    assert webhooks.claim_next(delivery().endpoint_id, T0, HANDED_OVER) is None
    assert webhook_sends.attempt(claim, lambda: T0) == "stale"
    assert receiver.calls == 0
    back = delivery()
    assert (back.status, back.claim, back.attempts) == ("pending", "", 0)  # not an attempt
    lead(SUCCESSOR)
    sent = webhooks.deliver_due(lambda: T0 + timedelta(seconds=1), 5, SUCCESSOR)
    assert sent["delivered"] == 1 and receiver.calls == 1


def test_a_successor_leaves_a_live_holders_hook_batch_alone(webhooked):
    event_id = db.session.scalar(sa.select(OutboxEvent.id))
    db.session.add(HookDelivery(plugin="leased", hook="on_publish", event_id=event_id,
                                status="pending", attempts=0, next_attempt_at=T0, instance="",
                                last_error="", created_at=T0))
    db.session.commit()
    lead(HANDED_OVER)
    _token, ids = hooks.claim("leased", T0, HANDED_OVER.holder, HANDED_OVER)
    lead(SUCCESSOR)
    assert hooks.claim("leased", T0, SUCCESSOR.holder, SUCCESSOR) == ("", [])
    _receiver, alive = webhooked
    end(alive)
    token, taken = hooks.claim("leased", T0, SUCCESSOR.holder, SUCCESSOR)
    assert taken == ids
    hooks.run_batch("leased", taken, lambda: T0, token)
    assert len(CALLED) == 1
