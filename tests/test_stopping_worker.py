"""A worker asked to stop takes no key: it would only hand it back a moment later."""

import pytest
import sqlalchemy as sa

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, holding, wait_for
from webapp.extensions import db
from webapp.models import LeaderEvent
from webapp.scheduling import engines
from webapp.scheduling.runner import Scheduler


@pytest.fixture
def scheduler(app, tmp_path):
    """A scheduler stepped by hand (no thread), on this test's own lease directory."""
    app.config["LEASE_DIR"] = str(tmp_path)
    made = Scheduler(app, engines=engines.build(app.config))
    yield made
    made.locks.close()
    made.lease.release()
    made.engines.close()


def test_a_stopping_worker_does_not_take_the_keys_that_came_free(app, pg_url, pg_view, scheduler):
    with holding(pg_url, "soloist:other:1", PUBLISH_KEY, PLUGINS_KEY):
        scheduler.step()  # the instance's candidate, standing by: another process leads
        assert scheduler.locks.connected and scheduler.leadership.held == {}
        scheduler.request_stop()  # SIGTERM, while the other process lets go of the keys
    wait_for(lambda: pg_view.holders() == {}, 10, "the other process's session to end")
    scheduler.next_poll = 0.0  # the handover's NOTIFY would ask for a poll at once
    scheduler.step()
    scheduler.wait(0.2)
    assert scheduler.leadership.held == {}
    assert pg_view.holders() == {}
    with app.app_context():
        assert db.session.scalars(sa.select(LeaderEvent.kind)).all() == []
