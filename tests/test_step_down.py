"""A step-down request reaches the holder the admin saw, and no holder after it."""

import threading

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import PUBLISH_KEY, holding, wait_for
from tests.harness.support import record_term
from webapp.extensions import db
from webapp.leadership.election import Leadership
from webapp.leadership.keys import KEYS, PUBLISH
from webapp.leadership.pg import PgLockSession
from webapp.models import LeaderEvent, LeaderState
from webapp.ops.leaders import OpsError, request_step_down

WAITING_SQL = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'
  AND query LIKE 'UPDATE leader_state%'
"""


def _ask(app, expected: str, outcome: list) -> None:
    with app.app_context():
        try:
            outcome.append(request_step_down(KEYS["publish"], expected, "admin@example.com"))
        except OpsError as exc:
            outcome.append(exc)
        finally:
            db.session.remove()


def test_a_step_down_for_a_holder_that_has_since_changed_does_not_depose_the_new_one(
        app, pg_url, pg_view):
    outcome: list = []
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY) as old, \
            psycopg.connect(pg_url, application_name="b-acquiring") as new:
        record_term(app, PUBLISH_KEY, old, term=3)
        # the new holder's acquire is on its way: its transaction has the key's row
        new.execute("SELECT 1 FROM leader_state WHERE key = %s FOR UPDATE", (PUBLISH_KEY,))
        asking = threading.Thread(target=_ask, args=(app, "soloist:a:1", outcome))
        asking.start()  # the admin saw a; the request checks a holds the key, then writes
        wait_for(lambda: pg_view.query(WAITING_SQL)[0][0], 10,
                 "the request to wait for the key's row")
        new.execute("UPDATE leader_state SET term = 4, holder = 'soloist:b:2', "
                    "step_down_requested = false WHERE key = %s", (PUBLISH_KEY,))
        new.commit()  # b leads now, term 4
        asking.join(10)
    assert isinstance(outcome[0], OpsError) and "moved" in str(outcome[0])
    with app.app_context():
        state = db.session.get(LeaderState, PUBLISH_KEY)
        asked = db.session.scalars(sa.select(LeaderEvent).where(LeaderEvent.kind == "step_down"))
        assert (state.holder, state.term, state.step_down_requested) == ("soloist:b:2", 4, False)
        assert list(asked) == []


@pytest.fixture
def leader(app):
    """A lock session leading the publish key."""
    leadership = Leadership(PgLockSession(app.config["LOCK_DATABASE_URL"], "leader"),
                            [PUBLISH.value], 10.0)
    assert leadership.ensure_connected() and leadership.poll() == [PUBLISH.value]
    yield leadership
    leadership.locks.close()


def test_a_holder_steps_down_only_for_a_request_that_names_it(leader, pg_view):
    pg_view.query("UPDATE leader_state SET step_down_requested = true, holder = 'soloist:x:9' "
                  "WHERE key = %s RETURNING key", (PUBLISH.value,))  # meant for another session
    assert leader.verify() == {PUBLISH.value: False}
    pg_view.query("UPDATE leader_state SET holder = %s WHERE key = %s RETURNING key",
                  (leader.locks.name, PUBLISH.value))
    assert leader.verify() == {PUBLISH.value: True}
