"""Webhook delivery to a real local HTTP receiver, retries, give-up, redelivery, SSRF guard."""

import json
import logging
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from standardwebhooks import Webhook

from tests.harness.cluster import wait_for
from tests.harness.support import AuthActions, make_app, post_form, text
from webapp.extensions import db
from webapp.models import OutboxEvent, Post, WebhookDelivery, WebhookEndpoint
from webapp.plugins import HookEvent, webhook_sends, webhooks
from webapp.plugins.endpoints import WebhookError, create_webhook, redeliver
from webapp.scheduling import plugin_tick, publish, workers

SECRET = "s3cret-for-the-receiver-only"
T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)


HOOK_PATH = "/hooks/soloist?x=1"  # a receiver's own path and query, kept as given


@pytest.fixture
def allowed_app(app, pg_url):
    """An app that may call 127.0.0.1, with short timeouts and fast retries."""
    allowed = make_app(pg_url, WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=0.5,
                       RETRY_SECONDS=10, WEBHOOK_MAX_ATTEMPTS=3)
    yield allowed
    assert workers.drain(10)
    with allowed.app_context():
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def hook_app(allowed_app):
    """The allowed app, with its context pushed for the whole test."""
    with allowed_app.app_context():
        yield allowed_app


def published_event(now: datetime = T0) -> HookEvent:
    """Publish a post through the publish tick and return its outbox event."""
    db.session.add(Post(title="Hello <world>", slug="hello", body="", status="scheduled",
                        publish_at=now, created_at=now, updated_at=now))
    db.session.commit()
    publish.tick(now)
    event = db.session.scalar(sa.select(OutboxEvent))
    return HookEvent(event.id, event.topic, event.post_id, event.payload, event.created_at,
                     event.dedupe_key)


def at(moment: datetime):
    return lambda: moment


def only_delivery() -> WebhookDelivery:
    db.session.rollback()
    return db.session.scalar(sa.select(WebhookDelivery))


def test_a_published_post_reaches_the_receiver_signed_with_a_stable_delivery_id(
        hook_app, receiver):
    create_webhook(receiver.url + HOOK_PATH, ["post.published"], SECRET)
    now = datetime.now(UTC)
    event = published_event(now)
    plugin_tick.tick(now, "web.1")  # fans the event out to the hooks, off any web request
    wait_for(receiver.received, 10, "the webhook to arrive")
    assert workers.drain(10)
    [request] = receiver.received()
    headers, body = request.headers, request.body
    delivery = only_delivery()
    assert delivery.status == "delivered" and delivery.response_status == 200
    assert headers["X-Soloist-Event"] == "post.published"
    assert headers["X-Soloist-Delivery"] == delivery.delivery_id
    Webhook(SECRET.encode()).verify(body, headers)  # id, time and body signed
    assert "X-Soloist-Signature" not in headers  # the legacy one, replayable: off by default
    assert headers["Content-Type"] == "application/json"
    sent = json.loads(body)
    # ids named from what happened (the post's transition), not from the outbox's sequence
    assert sent["event_id"] == webhooks.event_uuid(event.key) and sent["data"]["slug"] == "hello"
    assert delivery.delivery_id == webhooks.delivery_uuid(
        event.key, db.session.get(WebhookEndpoint, delivery.endpoint_id))
    assert sent["delivery"] == delivery.delivery_id


def test_a_failing_receiver_is_retried_with_backoff_then_given_up_and_redelivered(
        hook_app, receiver):
    create_webhook(receiver.url + HOOK_PATH, ["post.published", "post.unpublished"], SECRET)
    webhooks.enqueue(published_event())
    receiver.answers = [500, 500, 500]
    webhooks.deliver_due(at(T0), budget=5)
    assert (only_delivery().status, only_delivery().attempts) == ("pending", 1)
    first = only_delivery().next_attempt_at  # RETRY_SECONDS, up to 20 % sooner
    assert T0 + timedelta(seconds=8) <= first <= T0 + timedelta(seconds=10)
    webhooks.deliver_due(at(first - timedelta(seconds=1)), budget=5)  # not due yet
    assert len(receiver.received()) == 1
    webhooks.deliver_due(at(first), budget=5)
    second = only_delivery().next_attempt_at  # then 6 × that (5 s, 30 s at the default)
    assert first + timedelta(seconds=48) <= second <= first + timedelta(seconds=60)
    webhooks.deliver_due(at(second), budget=5)
    failed = only_delivery()
    assert (failed.status, failed.attempts, failed.response_status) == ("failed", 3, 500)
    assert "HTTP 500" in failed.last_error
    webhooks.deliver_due(at(T0 + timedelta(hours=1)), budget=5)
    assert len(receiver.received()) == 3  # given up: no more tries
    redeliver(failed, now=T0 + timedelta(hours=1))
    webhooks.deliver_due(at(T0 + timedelta(hours=1)), budget=5)
    assert only_delivery().status == "delivered"
    requests = receiver.received()
    ids = {r.headers["X-Soloist-Delivery"] for r in requests}
    bodies = {r.body for r in requests}
    assert len(requests) == 4 and ids == {failed.delivery_id} and len(bodies) == 1


def test_a_receiver_that_does_not_answer_in_time_is_retried(hook_app, receiver):
    create_webhook(receiver.url + HOOK_PATH, ["post.published"], SECRET)
    webhooks.enqueue(published_event())
    receiver.answers = [5.0]  # stalls far past the 0.5 s timeout, then answers the retry
    started = time.monotonic()
    webhooks.deliver_due(at(T0), budget=5)
    assert time.monotonic() - started < 4.0  # gave up, not waited (a busy CI took 2.2 s)
    late = only_delivery()
    assert (late.status, late.last_error) == ("pending", "No answer within 0.5 s.")
    webhooks.deliver_due(at(T0 + timedelta(seconds=10)), budget=5)
    assert only_delivery().status == "delivered"
    assert len(receiver.received()) == 2


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/hook", "http://10.1.2.3/hook", "http://169.254.169.254/latest/",
    "http://[::1]/hook", "http://localhost:5000/hook", "http://[::ffff:127.0.0.1]/hook",
    "http://192.168.0.10/", "http://172.16.5.4/", "http://0.0.0.0/", "http://[fe80::1]/",
])
def test_the_ssrf_guard_refuses_non_public_addresses_by_default(app, url: str):
    with app.app_context(), pytest.raises(WebhookError) as refused:
        create_webhook(url, ["post.published"], SECRET)
    assert refused.value.field == "url" and "public addresses" in refused.value.errors["url"]
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(WebhookEndpoint.id))) == 0


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://93.184.215.14/", "http:// or https://"), ("javascript:alert(1)", "http://"),
    ("http://user:pw@93.184.215.14/", "credentials"), ("", "Give the URL"),
])
def test_only_plain_http_urls_are_accepted(app, url: str, message: str):
    with app.app_context(), pytest.raises(WebhookError) as refused:
        create_webhook(url, ["post.published"], SECRET)
    assert message in refused.value.errors["url"]


def test_a_public_address_is_accepted_and_bad_events_or_secret_are_named(app):
    with app.app_context():
        with pytest.raises(WebhookError) as refused:
            create_webhook("http://93.184.215.14/hook", ["post.deleted"], "short")
        assert set(refused.value.errors) == {"events", "secret"}
        endpoint = create_webhook("http://93.184.215.14/hook", ["post.published"], SECRET)
        assert endpoint.url == "http://93.184.215.14/hook" and SECRET not in repr(endpoint)


def test_an_endpoint_that_became_private_is_not_called(hook_app, app, receiver):
    create_webhook(receiver.url + HOOK_PATH, ["post.published"], SECRET)  # allowed by hook_app
    webhooks.enqueue(published_event())
    with app.app_context():  # an instance that does not allow private addresses
        webhooks.deliver_due(at(T0), budget=5)
        refused = only_delivery()
    assert refused.status == "failed" and refused.last_error.startswith("Not sent:")
    assert receiver.received() == []


def test_admins_add_webhooks_from_the_page_and_never_see_the_secret_again(
        allowed_app, receiver, caplog):
    admin = allowed_app.test_client()
    AuthActions(admin).login("admin")
    page = admin.get("/admin/webhooks/").get_data(as_text=True)
    assert 'name="secret"' in page  # a fresh random secret is offered
    bad = post_form(admin, "/admin/webhooks/", {"url": "ftp://x", "events": "post.published",
                                                "secret": SECRET})
    assert bad.status_code == 422 and 'value="ftp://x"' in bad.get_data(as_text=True)
    assert 'id="e-url"' in bad.get_data(as_text=True)
    added = post_form(admin, "/admin/webhooks/", {"url": receiver.url + HOOK_PATH,
                                                  "events": "post.published", "secret": SECRET})
    assert added.status_code == 303
    assert SECRET not in admin.get("/admin/webhooks/").get_data(as_text=True)
    caplog.set_level(logging.DEBUG)
    receiver.answers = [500]
    with allowed_app.app_context():
        webhooks.enqueue(published_event())
        webhooks.deliver_due(at(T0), budget=5)
        failing = only_delivery()
    assert SECRET not in caplog.text and "sha256=" not in caplog.text
    assert post_form(admin, f"/admin/webhooks/deliveries/{failing.id}/redeliver").status_code == 303
    log = admin.get("/admin/webhooks/").get_data(as_text=True)
    assert failing.delivery_id in log and SECRET not in log


def test_retries_follow_a_standard_webhooks_schedule_from_the_first_retry_delay(app):
    with app.app_context():
        exact = [webhook_sends.retry_delay(n, 5, jitter=lambda: 0.0).total_seconds()
                 for n in range(1, 11)]
        assert exact == [5, 30, 120, 300, 1800, 7200, 18000, 36000, 36000, 36000]
        assert webhook_sends.retry_delay(1, 5, jitter=lambda: 1.0).total_seconds() == 4.0
        app.config["RETRY_SECONDS"] = 2
        spread = {webhook_sends.retry_delay(2).total_seconds() for _ in range(50)}
        assert len(spread) > 1 and all(9.6 <= wait <= 12 for wait in spread)  # jittered


def test_the_page_says_a_failure_in_words_keeps_the_detail_a_click_away_and_refreshes(app,
                                                                                     auth):
    from tests.harness.support import seed_webhooks

    seed_webhooks(app)
    with app.app_context():  # the working one is failing now, still switched on
        db.session.execute(sa.update(WebhookEndpoint).where(
            WebhookEndpoint.url == "https://hooks.example.com/soloist").values(
            failures=1, last_error="The receiver answered HTTP 502."))
        db.session.commit()
    page = text(auth.client("admin").get("/admin/webhooks/"))
    refused = page.split('id="endpoint-2"')[1].split("</tr>")[0]
    assert "The receiver refused the connection: nothing is listening" in refused
    assert "<summary>Technical detail</summary>" in refused
    assert "ConnectionRefusedError: [Errno 111] Connection refused" in refused
    failing = page.split('id="endpoint-1"')[1].split("</tr>")[0]
    assert '>failing<' in failing and '>on<' not in failing, "an 'on' badge beside the error"
    assert "The receiver is up but failed to handle the event (HTTP 502)." in failing
    assert 'hx-trigger="every 5s"' in page.split('id="endpoints-live"')[1].split(">")[0]


def test_send_test_event_delivers_a_signed_ping_and_a_switched_off_one_is_refused(
        hook_app, receiver):
    from webapp.plugins.endpoints import send_test

    endpoint = create_webhook(receiver.url + HOOK_PATH, ["post.published"], SECRET)
    delivery = send_test(endpoint, "admin@example.com")
    plugin_tick.tick(datetime.now(UTC), "web.1")
    wait_for(receiver.received, 10, "the test event to arrive")
    assert workers.drain(10)
    [request] = receiver.received()
    assert request.headers["X-Soloist-Event"] == "ping"
    Webhook(SECRET.encode()).verify(request.body, request.headers)
    assert request.headers["webhook-id"] == delivery.delivery_id
    assert json.loads(request.body)["data"]["sent_by"] == "admin@example.com"
    assert only_delivery().status == "delivered"
    endpoint = db.session.get(WebhookEndpoint, endpoint.id)
    endpoint.active = False
    db.session.commit()
    with pytest.raises(WebhookError, match="switched off"):
        send_test(endpoint, "admin@example.com")
