"""Due times come from the database clock, not the clock of whichever instance served the click.

To tell the two apart, the app's PostgreSQL sessions are given a now() a day ahead of
the host: a due time computed from the app's own clock lands a day early.
"""

import uuid
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from tests.harness.support import TIMER, post_form
from webapp.extensions import db
from webapp.models import Timer, TimerRun, WebhookDelivery, WebhookEndpoint

AHEAD = "1 day"
EVERY = timedelta(minutes=5)  # TIMER runs every 5 minutes


def _clock_ahead(dbapi_connection: object, _record: object) -> None:
    # pg_catalog named last: the unqualified now() of every query finds test_clock.now() first
    dbapi_connection.execute("SET search_path = test_clock, public, pg_catalog")
    dbapi_connection.commit()


@pytest.fixture
def clock_ahead(app):
    """Make the app's database sessions say it is a day later than the host's clock."""
    with app.app_context():
        db.session.execute(sa.text("CREATE SCHEMA test_clock"))
        db.session.execute(sa.text(
            "CREATE FUNCTION test_clock.now() RETURNS timestamptz LANGUAGE sql STABLE "
            f"AS $$ SELECT pg_catalog.now() + interval '{AHEAD}' $$"))
        db.session.commit()
        db.engine.dispose()
        event.listen(db.engine, "connect", _clock_ahead)
    yield
    with app.app_context():
        event.remove(db.engine, "connect", _clock_ahead)
        db.engine.dispose()
        db.session.execute(sa.text("DROP SCHEMA test_clock CASCADE"))
        db.session.commit()


def database_time(app) -> datetime:
    with app.app_context():
        return db.session.scalar(sa.text("SELECT now()"))


def timer_row(app) -> Timer:
    with app.app_context():
        return db.session.scalar(sa.select(Timer))


def test_the_clock_fixture_really_moves_the_database_clock(app, clock_ahead):
    with app.app_context():
        host = db.session.scalar(sa.text("SELECT pg_catalog.now()"))
    assert database_time(app) - host > timedelta(hours=23)


def test_a_new_timer_starts_and_is_due_by_the_database_clock(app, auth, clock_ahead):
    client = auth.client("editor")
    before = database_time(app)
    assert post_form(client, "/admin/timers/new", TIMER).status_code == 303
    after = database_time(app)
    timer = timer_row(app)
    assert before.replace(microsecond=0) <= timer.start_at <= after
    assert before < timer.next_run_at <= after + EVERY


def test_resuming_and_editing_a_timer_schedule_it_from_the_database_clock(
        app, auth, clock_ahead):
    client = auth.client("editor")
    assert post_form(client, "/admin/timers/new", TIMER).status_code == 303
    timer_id = timer_row(app).id
    assert post_form(client, f"/admin/timers/{timer_id}/pause").status_code == 303
    before = database_time(app)
    assert post_form(client, f"/admin/timers/{timer_id}/resume").status_code == 303
    assert before < timer_row(app).next_run_at <= database_time(app) + EVERY
    start = (before - timedelta(days=7)).strftime("%Y-%m-%dT%H:%M")  # a new grid of slots
    before = database_time(app)
    edited = post_form(client, f"/admin/timers/{timer_id}/edit", {**TIMER, "start_at": start})
    assert edited.status_code == 303
    assert before < timer_row(app).next_run_at <= database_time(app) + EVERY


def test_run_now_is_queued_at_the_database_time(app, auth, clock_ahead):
    client = auth.client("editor")
    assert post_form(client, "/admin/timers/new", TIMER).status_code == 303
    timer_id = timer_row(app).id
    before = database_time(app)
    assert post_form(client, f"/admin/timers/{timer_id}/run").status_code == 303
    after = database_time(app)
    with app.app_context():
        run = db.session.scalar(sa.select(TimerRun).where(TimerRun.trigger == "manual"))
    assert before <= run.queued_at <= after and before <= run.scheduled_for <= after


def test_a_redelivery_is_due_at_the_database_time(app, auth, clock_ahead):
    with app.app_context():
        endpoint = WebhookEndpoint(url="https://hooks.example.com/in", events=["post.published"],
                                   secret="s" * 32)
        db.session.add(endpoint)
        db.session.flush()
        delivery = WebhookDelivery(delivery_id=str(uuid.uuid4()), endpoint_id=endpoint.id,
                                   topic="post.published", body="{}", status="failed",
                                   attempts=3, last_error="HTTP 500")
        db.session.add(delivery)
        db.session.commit()
        delivery_id = delivery.id
    client = auth.client("admin")
    before = database_time(app)
    url = f"/admin/webhooks/deliveries/{delivery_id}/redeliver"
    assert post_form(client, url).status_code == 303
    after = database_time(app)
    with app.app_context():
        again = db.session.get(WebhookDelivery, delivery_id)
    assert (again.status, again.attempts) == ("pending", 0)
    assert before <= again.next_attempt_at <= after
