"""Standard Webhooks: every delivery verifies with the `standardwebhooks` library, as a
receiver would check it; the legacy X-Soloist-Signature (the body alone: replayable) is sent
only when WEBHOOK_LEGACY_SIGNATURE says so."""

import base64
import hashlib
import hmac
import re
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from standardwebhooks import Webhook, WebhookVerificationError

from tests.harness.cluster import wait_for
from tests.harness.receiver import Request
from webapp.extensions import db
from webapp.models import OutboxEvent, Post, WebhookEndpoint
from webapp.plugins import HookEvent, webhooks
from webapp.plugins.endpoints import WebhookError, create_webhook
from webapp.scheduling import plugin_tick, publish, workers

TYPED = "s3cret-for-the-receiver-only"  # a secret typed by an admin, without whsec_
T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)


@pytest.fixture
def local(app):
    """The app, allowed to call 127.0.0.1 and quick to retry."""
    app.config.update(WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=2,
                      RETRY_SECONDS=10)
    yield app
    assert workers.drain(10)


def publish_one_post(app, now: datetime | None = None) -> None:
    """Publish a post through the ticks, which hand its event to the webhooks plugin."""
    now = now or datetime.now(UTC)
    with app.app_context():
        db.session.add(Post(title="Hello", slug="hello", body="", status="scheduled",
                            publish_at=now, created_at=now, updated_at=now))
        db.session.commit()
        publish.tick(now)
        plugin_tick.tick(now, "web.1")


def soloist_signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.fixture
def delivered(api, local, receiver) -> tuple[str, Request]:
    """Add an endpoint through the API without a secret, publish; return the secret and
    the request the receiver got."""
    made = api("POST", "/api/webhooks", role="admin",
               body={"url": f"{receiver.url}/hook", "events": ["post.published"]})
    assert made.status_code == 201
    secret = made.get_json()["secret"]
    publish_one_post(local)
    [request] = wait_for(receiver.received, 10, "the webhook to arrive")
    return secret, request


def test_a_delivery_verifies_with_the_standardwebhooks_library(delivered):
    secret, request = delivered
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret)
    payload = Webhook(secret).verify(request.body, request.headers)
    assert payload["event"] == "post.published" and payload["data"]["slug"] == "hello"
    assert request.headers["webhook-id"] == request.headers["X-Soloist-Delivery"]
    assert request.headers["X-Soloist-Event"] == "post.published"
    assert "X-Soloist-Signature" not in request.headers  # legacy, replayable: off by default


@pytest.mark.parametrize("tamper", [
    lambda body, headers: (body.replace(b"hello", b"hellp"), headers),
    lambda body, headers: (body, {**headers, "webhook-timestamp":
                                  str(int(headers["webhook-timestamp"]) + 1)}),
    lambda body, headers: (body, {**headers, "webhook-id": "another-delivery"}),
], ids=["body", "timestamp", "id"])
def test_a_tampered_delivery_fails_verification(delivered, tamper):
    secret, request = delivered
    body, headers = tamper(request.body, request.headers)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(secret).verify(body, headers)


def test_another_endpoints_secret_does_not_verify(delivered):
    _, request = delivered
    other = "whsec_" + base64.b64encode(b"x" * 32).decode()
    with pytest.raises(WebhookVerificationError):
        Webhook(other).verify(request.body, request.headers)


def test_the_secret_is_returned_once_by_the_api_and_never_listed(api, local, delivered):
    secret, _ = delivered
    listed = api("GET", "/api/webhooks", role="admin").get_data(as_text=True)
    assert secret not in listed and secret.removeprefix("whsec_") not in listed


def test_a_typed_secret_without_the_prefix_verifies_as_its_utf8_bytes(local, receiver):
    with local.app_context():
        create_webhook(f"{receiver.url}/hook", ["post.published"], TYPED)
    publish_one_post(local)
    [request] = wait_for(receiver.received, 10, "the webhook to arrive")
    Webhook(TYPED.encode()).verify(request.body, request.headers)


def test_the_legacy_signature_comes_only_when_switched_on_keyed_with_the_whole_secret(
        local, receiver):
    local.config["WEBHOOK_LEGACY_SIGNATURE"] = True  # for receivers not yet moved over
    secret = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    with local.app_context():
        create_webhook(f"{receiver.url}/hook", ["post.published"], secret)
    publish_one_post(local)
    [request] = wait_for(receiver.received, 10, "the webhook to arrive")
    assert request.headers["X-Soloist-Signature"] == soloist_signature(secret, request.body)
    Webhook(secret).verify(request.body, request.headers)  # the signature to move to


def test_every_retry_carries_the_same_webhook_id_and_the_time_of_its_attempt(local, receiver):
    secret = "whsec_" + base64.b64encode(bytes(range(24))).decode()
    receiver.answers = [500]
    with local.app_context():
        create_webhook(f"{receiver.url}/hook", ["post.published"], secret)
        db.session.add(Post(title="Hello", slug="hello", body="", status="scheduled",
                            publish_at=T0, created_at=T0, updated_at=T0))
        db.session.commit()
        publish.tick(T0)
        event = db.session.scalar(sa.select(OutboxEvent))
        webhooks.enqueue(HookEvent(event.id, event.topic, event.post_id, event.payload,
                                   event.created_at))
        webhooks.deliver_due(lambda: T0, budget=5)
        webhooks.deliver_due(lambda: T0 + timedelta(seconds=10), budget=5)
    first, second = receiver.received()
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == first.headers[
        "X-Soloist-Delivery"]
    assert [r.headers["webhook-timestamp"] for r in (first, second)] == [
        str(int(T0.timestamp())), str(int(T0.timestamp()) + 10)]
    for request in (first, second):  # the library's own signing, without its clock check
        when = datetime.fromtimestamp(int(request.headers["webhook-timestamp"]), UTC)
        assert request.headers["webhook-signature"] == Webhook(secret).sign(
            request.headers["webhook-id"], when, request.body.decode())


@pytest.mark.parametrize("secret", [
    "whsec_not*base64*at*all*!",
    "whsec_" + base64.b64encode(b"x" * 16).decode(),  # too short a key
    "whsec_" + base64.b64encode(b"x" * 65).decode(),  # too long a key
])
def test_a_whsec_secret_that_holds_no_24_to_64_byte_key_is_refused_naming_the_secret(
        app, secret: str):
    with app.app_context():
        with pytest.raises(WebhookError) as refused:
            create_webhook("http://93.184.215.14/hook", ["post.published"], secret)
        assert set(refused.value.errors) == {"secret"}
        assert "24 to 64 random bytes" in refused.value.errors["secret"]
        assert db.session.scalar(sa.select(sa.func.count(WebhookEndpoint.id))) == 0


def test_the_admin_form_offers_a_fresh_whsec_secret_each_time(client, auth):
    auth.login("admin")
    offered = [re.search(r'name="secret" type="text" value="([^"]*)"',
                         client.get("/admin/webhooks/").get_data(as_text=True))[1]
               for _ in range(2)]
    assert offered[0] != offered[1]
    for secret in offered:
        assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret)
        assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
        Webhook(secret)  # the library takes it as it is
