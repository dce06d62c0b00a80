"""A webhook leaves only once a standby has replayed its event (webapp.ops.replica).

A throwaway primary with a streaming standby (pg_basebackup -R); the standby's replay is
paused (pg_wal_replay_pause) to hold it behind. The plugin tick runs in this process, with
the database's clock; the sends go to a real local receiver.
"""

from datetime import timedelta

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.database import empty_every_table
from tests.harness.support import AuthActions, make_app, migrate, text
from webapp.config import ConfigError, load_config
from webapp.db import database_now
from webapp.extensions import db
from webapp.models import Post, WebhookDelivery
from webapp.ops import replica
from webapp.plugins import registry, webhooks
from webapp.plugins.endpoints import create_webhook
from webapp.scheduling import plugin_tick, publish, workers

pytestmark = pytest.mark.slow

SECRET = "s3cret-for-the-receiver-only"
DB = "soloist_replica_gate"


@pytest.fixture(scope="module")
def gate_db(primary_and_standby) -> str:
    """Return the URL of the app's database on the primary, migrated."""
    url = primary_and_standby[0].create_database(DB)
    migrate(make_app(url))
    return url


@pytest.fixture
def gate_app(gate_db):
    """An app on the primary that may call 127.0.0.1, its context pushed and tables empty."""
    app = make_app(gate_db, WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=2,
                   DELIVER_AFTER_REPLICA_MAX_SECONDS=20)
    with app.app_context():
        empty_every_table()
        yield app
        assert workers.drain(10)
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def paused(primary_and_standby):
    """Pause the standby's replay for the test (it still receives WAL); resume after."""
    standby = primary_and_standby[1]
    with psycopg.connect(standby.url(), autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        wait_for(lambda: conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0]
                 == "paused", 10, "the standby's replay to pause")
    yield lambda: _resume(standby)
    _resume(standby)


def _resume(standby) -> None:
    with psycopg.connect(standby.url(), autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_resume()")


def _publish() -> None:
    now = database_now()
    db.session.add(Post(title="Hello", slug="hello", body="", status="scheduled",
                        publish_at=now, created_at=now, updated_at=now))
    db.session.commit()
    publish.tick(now)


def _tick(at=None):
    """Run one plugin tick at the database's time (or at); return (now, its next wake)."""
    now = database_now() if at is None else at
    wake = plugin_tick.tick(now, "pytest")
    assert workers.drain(10)
    return now, wake


def _held() -> int:
    db.session.rollback()
    return webhooks.held_for_replica(database_now())


def test_a_delivery_waits_while_the_standby_replays_nothing_and_goes_once_it_does(
        gate_app, receiver, paused):
    create_webhook(receiver.url, ["post.published"], SECRET)
    # the sitemap's hook, due at once, would set the tick's next look, not the held delivery
    registry.set_enabled("sitemap", False, "not what this test measures")
    _publish()
    now, wake = _tick()  # fans the event out; the standby has not replayed it
    assert receiver.calls == 0
    assert _held() == 1
    assert now < wake <= now + timedelta(seconds=0.1), "the tick must look again soon, not spin"
    _tick()
    assert receiver.calls == 0, "a delivery left before the standby replayed its event"
    viewer = AuthActions(gate_app.test_client()).client("viewer")
    shown = text(viewer.get("/status/"))
    assert "Deliveries wait for a standby" in shown and "Deliveries waiting for it: 1" in shown

    paused()  # the standby replays again
    wait_for(lambda: _held() == 0, 10, "the standby to replay the event")
    _tick()
    wait_for(lambda: receiver.calls >= 1, 10, "the delivery")
    _tick()
    assert receiver.calls == 1
    delivery = db.session.scalar(sa.select(WebhookDelivery))
    assert delivery.status == "delivered" and delivery.attempts == 1


def test_past_the_bound_a_held_delivery_goes_without_the_standby(gate_app, receiver, paused):
    create_webhook(receiver.url, ["post.published"], SECRET)
    _publish()
    now, wake = _tick()
    assert receiver.calls == 0 and _held() == 1
    _tick(now + replica.bound() + timedelta(seconds=1))
    wait_for(lambda: receiver.calls == 1, 10, "the delivery past the bound")


def test_with_the_gate_off_a_paused_standby_holds_nothing(gate_app, receiver, paused):
    gate_app.config["DELIVER_AFTER_REPLICA"] = "off"
    create_webhook(receiver.url, ["post.published"], SECRET)
    _publish()
    _tick()
    wait_for(lambda: receiver.calls == 1, 10, "the delivery")
    assert db.session.scalar(sa.select(WebhookDelivery.replica_lsn)) is None


def test_with_no_standby_nothing_waits_unless_asked_to(app, pg_url, receiver):
    app = make_app(pg_url, WEBHOOK_ALLOW_PRIVATE=True)  # the shared server streams to nobody
    with app.app_context():
        assert replica.status().streaming == 0
        create_webhook(receiver.url, ["post.published"], SECRET)
        app.config["DELIVER_AFTER_REPLICA"] = "on"  # waits for a standby that never comes
        _publish()
        _tick()
        assert receiver.calls == 0 and _held() == 1
        app.config["DELIVER_AFTER_REPLICA"] = "auto"  # the default: no standby, no wait
        assert _held() == 0
        _tick()
        wait_for(lambda: receiver.calls == 1, 10, "the delivery")
        db.session.remove()
        db.engine.dispose()


def test_sqlite_never_waits(sqlite_app):
    with sqlite_app.app_context():
        assert replica.mode() == "off" and not replica.status().waits
        assert replica.stamp() is None


def test_a_gate_setting_that_is_not_auto_on_or_off_stops_the_app():
    assert load_config({"DELIVER_AFTER_REPLICA": " ON "})["DELIVER_AFTER_REPLICA"] == "on"
    assert load_config({})["DELIVER_AFTER_REPLICA"] == "auto"
    with pytest.raises(ConfigError, match="DELIVER_AFTER_REPLICA must be auto, on or off"):
        load_config({"DELIVER_AFTER_REPLICA": "sometimes"})
