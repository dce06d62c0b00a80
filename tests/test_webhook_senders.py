"""A dead endpoint delays only itself; claims follow leadership; stale senders change nothing."""

import socket
import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.support import make_app
from webapp import posts
from webapp.extensions import db
from webapp.leadership.fence import Lead
from webapp.leadership.keys import PLUGINS
from webapp.models import LeaderState, OutboxEvent, Post, WebhookDelivery, WebhookEndpoint
from webapp.plugins import webhook_sends, webhooks
from webapp.plugins.base import HookEvent
from webapp.plugins.endpoints import create_webhook, redeliver
from webapp.scheduling import delivery_tick, engines, workers
from webapp.scheduling.runner import Scheduler

SECRET = "s3cret-for-the-receiver-only"
T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)


@pytest.fixture
def silent():
    """An endpoint that accepts connections and never answers (the kernel's backlog)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/never"
    sock.close()


@pytest.fixture
def allowed(app, pg_url):
    made = make_app(pg_url, WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=3,
                    RETRY_SECONDS=30)
    yield made
    assert workers.drain(15)
    with made.app_context():
        db.engine.dispose()


def _clock(moment: datetime):
    return lambda: moment


def test_a_dead_endpoint_delays_only_itself(allowed, receiver, silent):
    with allowed.app_context():
        create_webhook(silent, ["post.published"], SECRET)
        create_webhook(receiver.url + "/ok", ["post.published"], SECRET)
        for i in range(5):
            posts.create_post(f"Post {i}", f"post-{i}", "",
                              datetime.now(UTC) + timedelta(milliseconds=200 * (i + 1)))
    running = Scheduler(allowed, engines=engines.build(allowed.config))
    running.start()
    try:
        # all five are due within a second; the silent endpoint holds its own sender 3 s a try
        wait_for(lambda: len(receiver.received()) == 5, 4, "every post at the healthy endpoint")
        with allowed.app_context():
            dead = db.session.scalar(sa.select(WebhookEndpoint).where(
                WebhookEndpoint.url == silent))
            wait_for(lambda: db.session.refresh(dead) or dead.retry_at, 15,
                     "the silent endpoint to be marked failing")
            assert dead.last_error == "No answer within 3 s." and dead.failures == 3
            # three failures in a row: it waits out its back-off, never tried faster
    finally:
        running.stop(15)
        running.locks.close()
        running.engines.close()


def _one_delivery(app, url: str) -> int:
    with app.app_context():
        endpoint = create_webhook(url, ["post.published"], SECRET)
        db.session.add(Post(title="Hi", slug="hi", body="", status="published", version=1,
                            published_at=T0, created_at=T0, updated_at=T0))
        db.session.add(OutboxEvent(topic="post.published", payload={"slug": "hi"},
                                   created_at=T0, processed_at=T0))
        db.session.commit()
        event = db.session.scalar(sa.select(OutboxEvent))
        webhooks.enqueue(HookEvent(event.id, event.topic, None, event.payload, T0))
        return endpoint.id


def _lead(term: int, holder: str = "soloist:pytest:1:a1b2") -> Lead:
    """Make (term, holder) the plugin key's leadership, as an acquire does; return it."""
    state = db.session.get(LeaderState, PLUGINS.value) or LeaderState(
        key=PLUGINS.value, acquired_at=T0)
    state.term, state.holder, state.holder_pid = term, holder, 4242  # an open term
    db.session.add(state)
    db.session.commit()
    return Lead(term, holder)


def test_a_new_term_takes_over_claims_at_once_and_a_stale_sender_changes_nothing(
        allowed, receiver):
    endpoint_id = _one_delivery(allowed, receiver.url + "/ok")
    with allowed.app_context():
        stale = webhooks.claim_next(endpoint_id, T0, _lead(1))
        assert stale is not None  # the old leader's sender, then its process froze
        sent = webhooks.deliver_due(_clock(T0 + timedelta(seconds=1)), budget=5, lead=_lead(2))
        assert sent["delivered"] == 1  # no lease to wait out: a new term takes it at once
        assert webhook_sends.record(stale, 500, "The receiver answered HTTP 500.", False,
                                T0 + timedelta(seconds=2)) == "stale"
        delivery = db.session.scalar(sa.select(WebhookDelivery))
        assert (delivery.status, delivery.attempts, delivery.last_error) == ("delivered", 2, "")
        assert len(receiver.received()) == 1


def test_a_deposed_leader_claims_nothing_new(allowed, receiver):
    endpoint_id = _one_delivery(allowed, receiver.url + "/ok")
    with allowed.app_context():
        _lead(3)
        assert webhooks.claim_next(endpoint_id, T0, Lead(2, "soloist:pytest:1:a1b2")) is None
        assert db.session.scalar(sa.select(WebhookDelivery.status)) == "pending"


def test_a_send_that_raises_anything_is_a_counted_failed_attempt(allowed, receiver):
    endpoint_id = _one_delivery(allowed, receiver.url + "/ok")
    with allowed.app_context():
        # http.client refuses a header value with a line break: a ValueError, not a network error
        db.session.execute(sa.update(WebhookDelivery).values(topic="post.published\r\nX: y"))
        db.session.commit()
        webhooks.deliver_due(_clock(T0), budget=5, lead=Lead())
        delivery = db.session.scalar(sa.select(WebhookDelivery))
        assert (delivery.status, delivery.attempts) == ("pending", 1)  # not stuck in sending
        assert delivery.last_error.startswith("ValueError: Invalid header value")
        endpoint = db.session.get(WebhookEndpoint, endpoint_id)
        assert endpoint.failures == 1 and endpoint.last_error == delivery.last_error


def test_a_sender_stuck_past_its_lease_is_left_behind_and_the_delivery_still_goes(
        allowed, receiver):
    endpoint_id = _one_delivery(allowed, receiver.url + "/ok")
    stuck = threading.Event()
    with allowed.app_context():
        claim = webhooks.claim_next(endpoint_id, T0, Lead())
        # its sender hangs where no socket timeout reaches (a name lookup, say)
        workers.start(f"send:{endpoint_id}", allowed, lambda: stuck.wait(30))
        assert delivery_tick.start_senders(T0 + timedelta(seconds=5), Lead(), {"webhooks"}) == 0
        later = T0 + timedelta(seconds=3 + webhooks.LEASE_MARGIN + 1)  # past the 3 s timeout
        assert delivery_tick.start_senders(later, Lead(), {"webhooks"}) == 1
        wait_for(lambda: receiver.received(), 10, "the delivery from the new sender")
        assert workers.drain(0.5) is False  # the stuck one is still there, abandoned
        stuck.set()
        assert webhook_sends.record(claim, None, "late", False, later) == "stale"
        wait_for(lambda: db.session.rollback() or db.session.scalar(
            sa.select(WebhookDelivery.status)) == "delivered", 10, "the delivery recorded")


def test_one_failed_attempt_does_not_hold_up_the_endpoint(allowed, receiver):
    endpoint_id = _one_delivery(allowed, receiver.url + "/ok")
    receiver.answers = [500]  # a receiver that fails now and then
    with allowed.app_context():
        event = db.session.scalar(sa.select(OutboxEvent))
        second = OutboxEvent(topic="post.published", payload={"slug": "hi"}, created_at=T0,
                             processed_at=T0)
        db.session.add(second)
        db.session.commit()
        webhooks.enqueue(HookEvent(second.id, second.topic, None, second.payload, T0))
        sent = webhooks.deliver_due(_clock(T0), budget=5, lead=Lead())
        assert (sent["retrying"], sent["delivered"]) == (1, 1)  # the next one went at once
        endpoint = db.session.get(WebhookEndpoint, endpoint_id)
        assert endpoint.retry_at is None and endpoint.failures == 0
        assert event.id != second.id


def _second_delivery(endpoint_id: int) -> None:
    second = OutboxEvent(topic="post.published", payload={"slug": "hi-2"}, created_at=T0,
                         processed_at=T0)
    db.session.add(second)
    db.session.commit()
    webhooks.enqueue(HookEvent(second.id, second.topic, None, second.payload, T0))


def test_two_senders_failing_at_once_both_count_toward_the_endpoints_failures(
        allowed, receiver):
    endpoint_id = _one_delivery(allowed, receiver.url + "/ok")
    with allowed.app_context():
        _second_delivery(endpoint_id)
        first = webhooks.claim_next(endpoint_id, T0, Lead())
        second = webhooks.claim_next(endpoint_id, T0, Lead())
        engine, ran = db.engine, []

        def other_sender(_conn, _cursor, statement, *_args) -> None:
            """The other sender records its failure while this one has read the count."""
            if not ran and statement.lstrip().startswith("SELECT") and (
                    "FROM webhook_endpoints" in statement):
                ran.append(True)
                thread = threading.Thread(target=record_in_own_context, args=(second,))
                thread.start()
                thread.join(10)

        def record_in_own_context(claim) -> None:
            with make_app(allowed.config["SQLALCHEMY_DATABASE_URI"]).app_context():
                webhook_sends.record(claim, 500, "HTTP 500", False, T0)
                db.session.remove()
                db.engine.dispose()

        sa.event.listen(engine, "after_cursor_execute", other_sender)
        try:
            webhook_sends.record(first, 500, "HTTP 500", False, T0)
        finally:
            sa.event.remove(engine, "after_cursor_execute", other_sender)
        if not ran:  # this sender read nothing first: the other records after it
            record_in_own_context(second)
        db.session.rollback()
        assert db.session.get(WebhookEndpoint, endpoint_id).failures == 2


def test_a_redelivery_of_a_delivery_in_flight_supersedes_that_attempt(allowed, receiver):
    endpoint_id = _one_delivery(allowed, receiver.url + "/ok")
    with allowed.app_context():
        in_flight = webhooks.claim_next(endpoint_id, T0, Lead())
        delivery = db.session.get(WebhookDelivery, in_flight.delivery_id)
        redeliver(delivery, now=T0 + timedelta(seconds=1))
        assert webhook_sends.record(in_flight, 500, "late", False, T0) == "stale"
        db.session.rollback()
        again = db.session.get(WebhookDelivery, in_flight.delivery_id)
        assert (again.status, again.attempts, again.claim, again.last_error) == (
            "pending", 0, "", "")
        sent = webhooks.deliver_due(_clock(T0 + timedelta(seconds=1)), budget=5, lead=Lead())
        assert sent["delivered"] == 1
        [request] = receiver.received()
        assert request.headers["X-Soloist-Delivery"] == again.delivery_id
