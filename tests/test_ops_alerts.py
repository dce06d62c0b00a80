"""Ops alerts: each ops.* event is written once per occurrence, by whoever sees it, and
reaches the endpoints subscribed to it as a signed delivery (or Slack's {"text": ...})."""

import json
import logging
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa
from standardwebhooks import Webhook

from tests.harness.cluster import free_port, wait_for
from tests.harness.receiver import Receiver
from tests.harness.support import AuthActions, post_form
from webapp.config import ConfigError, load_config
from webapp.db import clock
from webapp.extensions import db
from webapp.leadership.base import PollRow
from webapp.leadership.election import Leadership
from webapp.leadership.keys import PLUGINS, PUBLISH
from webapp.leadership.pg import PgLockSession
from webapp.models import OutboxEvent, Post, Timer, WebhookDelivery, WebhookEndpoint
from webapp.ops import alerts as ops_alerts
from webapp.ops.leaders import evict
from webapp.plugins import Plugin, registry, webhooks
from webapp.plugins.endpoints import create_webhook, new_secret
from webapp.scheduling import delivery_tick, plugin_tick, publish, workers
from webapp.scheduling.watch import Deadman, Watch
from webapp.timers import create_timer

SECRET = new_secret()


@pytest.fixture
def local(app):
    """The app in a context, allowed to call 127.0.0.1, quick to give up on a receiver."""
    app.config.update(WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=2,
                      RETRY_SECONDS=600)
    with app.app_context():
        yield app
    assert workers.drain(10)


@pytest.fixture
def sessions(local):
    """Open lock sessions named as asked; close them all at the end."""
    opened: list[PgLockSession] = []

    def open_session(name: str, stale: float = 0.5) -> Leadership:
        locks = PgLockSession(local.config["LOCK_DATABASE_URL"], name)
        opened.append(locks)
        leadership = Leadership(locks, [PUBLISH.value, PLUGINS.value], stale)
        assert leadership.ensure_connected()
        return leadership

    yield open_session
    for locks in opened:
        locks.close()


def alerts(topic: str) -> list[OutboxEvent]:
    db.session.rollback()
    return list(db.session.scalars(sa.select(OutboxEvent).where(OutboxEvent.topic == topic)
                                   .order_by(OutboxEvent.id)))


def subscribe(receiver: Receiver, *events: str, payload_format: str = "standard"):
    return create_webhook(f"{receiver.url}/hook", list(events), SECRET,
                          payload_format=payload_format)


def send_all(now: datetime | None = None) -> None:
    """Fan the outbox out to the endpoints and send what is due, in this thread."""
    now = now or datetime.now(UTC)
    delivery_tick.fan_out(now, registry.enabled_names())
    webhooks.deliver_due(clock(now), 10)


def verified(receiver: Receiver) -> list[dict]:
    """Return the bodies the receiver got, each checked with the standardwebhooks library."""
    return [Webhook(SECRET).verify(r.body, r.headers) for r in receiver.received()]


def test_the_standby_that_evicts_a_frozen_leader_sends_leader_evicted(sessions, receiver):
    subscribe(receiver, "ops.leader_evicted")
    frozen = sessions("frozen")
    assert sorted(frozen.poll()) == sorted([PUBLISH.value, PLUGINS.value])
    standby = sessions("standby")  # the frozen one never heartbeats again
    assert wait_for(standby.poll, 10, "the standby to evict the frozen leader", interval=0.1)
    sessions("late").poll()  # a third process finds a live leader: nothing more to say
    events = alerts("ops.leader_evicted")
    assert sorted(e.payload["key"] for e in events) == ["plugins", "publish"]
    assert {(e.payload["holder"], e.payload["term"]) for e in events} == {(frozen.locks.name, 1)}
    assert all(e.payload["by"] == standby.locks.name for e in events)
    send_all()
    bodies = verified(receiver)
    assert sorted(b["data"]["key"] for b in bodies) == ["plugins", "publish"]
    assert {b["event"] for b in bodies} == {"ops.leader_evicted"}


def test_an_admins_eviction_is_reported_too(sessions):
    holder = sessions("stuck")
    holder.poll()
    evict(PUBLISH, holder.locks.name, "admin@example.com")
    events = alerts("ops.leader_evicted")
    assert sorted(e.payload["key"] for e in events) == ["plugins", "publish"]
    assert {e.payload["detail"] for e in events} == {"by admin@example.com"}


def test_a_key_whose_leader_stopped_working_raises_no_leader_once_per_term(local, sessions):
    local.config["OPS_NO_LEADER_SECONDS"] = 1.0
    frozen = sessions("frozen")
    frozen.poll()
    standby = sessions("standby", stale=600)  # eviction does not happen (or fails)

    def seen_stale() -> PollRow | None:
        standby.poll()
        row = standby.unled.get(PUBLISH.value)
        return row if row and row.heartbeat_age >= 1.0 else None

    row = wait_for(seen_stale, 10, "the standby to see a heartbeat 1 s old", interval=0.1)
    for watcher in (Watch(local, "standby"), Watch(local, "another")):
        watcher.unled(standby.unled.values())
        watcher.unled(standby.unled.values())
    events = {e.payload["key"]: e for e in alerts("ops.no_leader")}  # one per key, not four
    assert sorted(events) == ["plugins", "publish"] and len(alerts("ops.no_leader")) == 2
    event = events["publish"]
    assert event.payload["term"] == row.term == 1 and event.payload["seconds"] >= 1.0
    assert event.dedupe_key == "ops.no_leader:publish:1"
    Watch(local, "standby").unled([PollRow(PUBLISH.value, False, 40.0, 2)])  # the next gap
    assert len(alerts("ops.no_leader")) == 3


def test_a_fresh_heartbeat_or_an_unknown_age_raises_nothing(local):
    Watch(local, "standby").unled([PollRow(PUBLISH.value, False, 29.0, 1),
                                   PollRow(PLUGINS.value, False, None, 0)])
    assert alerts("ops.no_leader") == []


def test_a_post_stuck_past_the_limit_raises_post_late_once(local, receiver):
    local.config["OPS_POST_LATE_SECONDS"] = 60.0
    subscribe(receiver, "ops.post_late")
    now = datetime.now(UTC)
    db.session.add_all([
        Post(title="Stuck", slug="stuck", body="", status="scheduled",
             publish_at=now - timedelta(seconds=120), version=1),
        Post(title="Only a bit late", slug="recent", body="", status="scheduled",
             publish_at=now - timedelta(seconds=10), version=1)])
    db.session.commit()
    uri = local.config["SQLALCHEMY_DATABASE_URI"].replace("+psycopg", "")
    with psycopg.connect(uri) as other:  # another transaction holds both rows
        other.execute("SELECT id FROM posts FOR UPDATE")
        publish.tick(now)
        publish.tick(now + timedelta(seconds=1))
    [event] = alerts("ops.post_late")
    assert event.payload["slug"] == "stuck" and event.payload["late_seconds"] == 120.0
    send_all(now)
    [body] = verified(receiver)
    assert body["data"]["title"] == "Stuck"


failing = Plugin("failing", "Failing", "An action that always fails.")


@failing.action("run")
def _always_fails(ctx) -> None:
    raise RuntimeError("the disk is full")


@pytest.fixture
def failing_plugin(local):
    registry.register(failing)
    yield local
    assert workers.drain(10)
    registry.unregister("failing")


def test_a_timer_that_pauses_itself_raises_timer_paused(failing_plugin, receiver):
    subscribe(receiver, "ops.timer_paused", payload_format="slack")
    t0 = datetime.now(UTC)
    timer = create_timer({"name": "Nightly export", "action": "failing.run", "kind": "every",
                          "every": "10", "unit": "seconds", "start_at": t0.isoformat(),
                          "timezone": "UTC", "misfire": "run_once", "grace_seconds": "60",
                          "max_runtime_seconds": "300", "max_failures": "1"},
                         now=t0 - timedelta(seconds=1))
    plugin_tick.tick(t0 + timedelta(seconds=1))
    assert workers.drain(10)
    [event] = alerts("ops.timer_paused")
    assert db.session.get(Timer, timer.id).paused
    assert event.payload["timer"] == "Nightly export" and "the disk is full" in (
        event.payload["reason"])
    send_all(t0 + timedelta(seconds=5))
    [request] = receiver.received()
    text = Webhook(SECRET).verify(request.body, request.headers)["text"]
    assert text.startswith("[Soloist] Timer “Nightly export” was paused: Paused automatically")


def test_an_endpoint_that_turns_failing_is_reported_to_the_others_only(local, receiver):
    dead = Receiver().start()
    dead.answers = [500] * 10
    try:
        broken = subscribe(dead, "post.published", "ops.webhook_failing")
        subscribe(receiver, "ops.webhook_failing")
        now = datetime.now(UTC)
        db.session.add_all(Post(title=f"P{i}", slug=f"p{i}", body="", status="scheduled",
                                publish_at=now, version=1) for i in range(4))
        db.session.commit()
        publish.tick(now)
        send_all(now)  # three failures in a row: the endpoint turns failing
        send_all(now + timedelta(seconds=5))
        assert db.session.get(WebhookEndpoint, broken.id).failures == 3
        [event] = alerts("ops.webhook_failing")
        assert event.payload["endpoint_id"] == broken.id and event.payload["failures"] == 3
        [body] = verified(receiver)
        assert body["data"]["url"] == broken.url and "HTTP 500" in body["data"]["last_error"]
        topics = db.session.scalars(sa.select(WebhookDelivery.topic).where(
            WebhookDelivery.endpoint_id == broken.id))
        assert "ops.webhook_failing" not in set(topics)
    finally:
        dead.close()


def test_a_slack_endpoint_gets_text_signed_like_every_delivery(local, receiver):
    subscribe(receiver, "post.published", payload_format="slack")
    now = datetime.now(UTC)
    db.session.add(Post(title="Launch", slug="launch", body="", status="scheduled",
                        publish_at=now, version=1))
    db.session.commit()
    publish.tick(now)
    send_all(now)
    [request] = receiver.received()
    assert json.loads(request.body) == {"text": "[Soloist] Published: “Launch” (launch)."}
    assert Webhook(SECRET).verify(request.body, request.headers) == json.loads(request.body)
    assert request.headers["X-Soloist-Event"] == "post.published"


def test_the_api_and_the_form_take_a_payload_format(app, api, receiver):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True
    made = api("POST", "/api/webhooks", role="admin",
               body={"url": receiver.url, "events": ["ops.no_leader"], "payload_format": "slack"})
    assert made.status_code == 201 and made.get_json()["payload_format"] == "slack"
    refused = api("POST", "/api/webhooks", role="admin",
                  body={"url": receiver.url, "events": ["ops.no_leader"],
                        "payload_format": "teams"})
    assert refused.status_code == 422 and refused.get_json()["field"] == "payload_format"
    admin = app.test_client()
    AuthActions(admin).login("admin")
    added = post_form(admin, "/admin/webhooks/", {
        "url": receiver.url, "events": ["ops.leader_evicted", "ops.post_late"],
        "secret": SECRET, "payload_format": "slack"})
    assert added.status_code == 303
    with app.app_context():
        formats = db.session.execute(sa.select(WebhookEndpoint.events,
                                               WebhookEndpoint.payload_format)
                                     .order_by(WebhookEndpoint.id)).all()
    assert [tuple(f) for f in formats] == [(["ops.no_leader"], "slack"),
                                           (["ops.leader_evicted", "ops.post_late"], "slack")]


def test_the_deadmans_switch_pings_at_once_then_every_interval_while_leading(receiver):
    deadman = Deadman(f"{receiver.url}/ping/abc", 60.0, "soloist:a:1", allow_private=True)

    def pings() -> int:
        if deadman.thread is not None:
            deadman.thread.join(5)
        return len(receiver.received())

    assert deadman.step(True, 100.0) == 160.0 and pings() == 1
    assert deadman.step(True, 130.0) == 160.0 and pings() == 1
    assert deadman.step(True, 160.0) == 220.0 and pings() == 2
    assert deadman.step(False, 170.0) is None and pings() == 2  # no longer the leader
    assert deadman.step(True, 171.0) == 231.0 and pings() == 3  # leading again: at once
    request = receiver.received()[0]
    assert request.path == "/ping/abc" and request.headers["X-Soloist-Instance"] == "soloist:a:1"


def test_the_deadmans_switch_does_not_call_private_addresses_unless_allowed(receiver):
    assert Deadman(receiver.url, 60.0, "soloist:a:1", allow_private=False).ping() is None
    assert receiver.received() == []


def test_the_deadmans_switch_url_a_bearer_secret_is_never_logged_whole(receiver, caplog):
    secret = "5c9e1d0a-the-checks-own-id"
    url = f"{receiver.url}/ping/{secret}?token=also-secret"
    caplog.set_level(logging.WARNING, logger="soloist.scheduler")
    receiver.answers.append(503)
    assert Deadman(url, 60.0, "soloist:a:1", allow_private=False).ping() is None  # private
    assert Deadman(url, 60.0, "soloist:a:1", allow_private=True).ping() == 503
    gone = f"http://127.0.0.1:{free_port()}/ping/{secret}?token=also-secret"
    assert Deadman(gone, 60.0, "soloist:a:1", allow_private=True).ping() is None  # refused
    logged = [record.getMessage() for record in caplog.records]
    assert len(logged) == 3 and all("127.0.0.1" in line for line in logged), logged
    assert not [line for line in logged if secret in line or "also-secret" in line], logged
    with pytest.raises(ConfigError, match="DEADMAN_URL") as refused:
        load_config({"DEADMAN_URL": f"ftp://hc-ping.com/{secret}"})
    assert secret not in str(refused.value)


@pytest.mark.parametrize("value", ["ftp://example.com/ping", "hc-ping.com/abc", "https://",
                                   "https://example.com:99999/"])
def test_a_deadman_url_that_is_no_http_url_stops_start_up(value):
    with pytest.raises(ConfigError, match="DEADMAN_URL"):
        load_config({"DEADMAN_URL": value})


def test_the_ops_settings_default_to_the_documented_values():
    config = load_config({})
    assert (config["OPS_NO_LEADER_SECONDS"], config["OPS_POST_LATE_SECONDS"],
            config["DEADMAN_URL"], config["DEADMAN_EVERY_SECONDS"]) == (30.0, 60.0, None, 60.0)
    assert load_config({"DEADMAN_URL": " https://hc-ping.com/abc "})["DEADMAN_URL"] == (
        "https://hc-ping.com/abc")


def test_late_posts_are_reported_once_on_sqlite_too(sqlite_app):
    sqlite_app.config["OPS_POST_LATE_SECONDS"] = 60.0
    now = datetime.now(UTC)
    with sqlite_app.app_context():
        db.session.add(Post(title="Stuck", slug="stuck", body="", status="scheduled",
                            publish_at=now - timedelta(seconds=90), version=3))
        db.session.commit()
        assert ops_alerts.posts_late(now, 60.0) == 1
        assert ops_alerts.posts_late(now + timedelta(seconds=1), 60.0) == 0
        [event] = alerts("ops.post_late")
        assert event.dedupe_key == f"ops.post_late:{event.payload['post_id']}:v3"
