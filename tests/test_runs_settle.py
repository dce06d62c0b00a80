"""Runs always settle: a run whose outcome write fails is recorded on a fresh connection, or
settled by the leader's next tick, so its timer's next slot runs on time, never "Skipped:
the previous run was still running" for the run's maximum runtime."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from webapp.db import identity
from webapp.extensions import db
from webapp.leadership.keys import PLUGINS
from webapp.models import LeaderState, Timer, TimerRun
from webapp.plugins import Plugin, registry
from webapp.scheduling import engines, plugin_tick, workers
from webapp.timers import create_timer

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)
SLOT = T0 + timedelta(minutes=1)

settling = Plugin("settling", "Settling", "A test action that reads, then waits.")
STARTED, RELEASE = threading.Event(), threading.Event()


@settling.action("read_then_wait")
def read_then_wait(ctx) -> str:
    if not STARTED.is_set():  # the first run only: the next slot's returns at once
        db.session.scalar(sa.select(sa.func.count()).select_from(Timer))  # a transaction open
        STARTED.set()
        RELEASE.wait(20)
    return "done"


END_PLUGIN_POOL = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name LIKE 'soloist-plugin:%' AND datname = current_database()
"""

# The plugin pool's outcome writes fail, whatever connection they come on; the ticks' do not
REFUSE_OUTCOMES = """
CREATE FUNCTION refuse_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('application_name') LIKE 'soloist-plugin:%' THEN
    RAISE EXCEPTION 'the plugin pool cannot record an outcome';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_outcome BEFORE UPDATE ON timer_runs FOR EACH ROW
  WHEN (OLD.status = 'running' AND NEW.status <> 'running') EXECUTE FUNCTION refuse_outcome();
"""


@pytest.fixture
def pooled(app):
    """Plugin work's own pool (soloist-plugin:…), as a leader's scheduler has it."""
    STARTED.clear()
    RELEASE.clear()
    registry.register(settling)
    own = engines.build(app.config)
    with app.app_context():
        yield own.plugins
        RELEASE.set()
        assert workers.drain(10)
    own.close()
    registry.unregister("settling")


def timer() -> Timer:
    return create_timer({"name": "t", "action": "settling.read_then_wait", "kind": "every",
                         "every": "1", "unit": "minutes", "start_at": T0.isoformat(),
                         "timezone": "UTC", "misfire": "run_once", "grace_seconds": "60",
                         "max_runtime_seconds": "600", "max_failures": "3"},
                        now=T0 - timedelta(seconds=1))


def lead_here() -> tuple[str, int]:
    """Make this process the plugin key's leader, as its lock session's acquire records it."""
    holder = identity("pytest")  # soloist:pytest:<pid>:<this process's boot id>:<nonce>
    db.session.add(LeaderState(key=PLUGINS.value, term=1, holder=holder, holder_pid=4242,
                               acquired_at=T0))
    db.session.commit()
    return holder, 1


def runs_of(made: Timer) -> list[tuple[str, str]]:
    db.session.rollback()
    return db.session.execute(sa.select(TimerRun.status, TimerRun.error)
                              .where(TimerRun.timer_id == made.id)
                              .order_by(TimerRun.scheduled_for)).all()


def test_a_run_whose_connection_is_ended_mid_run_is_recorded_and_the_next_slot_runs(pooled):
    made = timer()
    holder, term = lead_here()
    plugin_tick.tick(T0, holder, term=term, plugin_engine=pooled)
    wait_for(STARTED.is_set, 10, "the run to start (its transaction open)")
    assert db.session.scalar(sa.text(END_PLUGIN_POOL)) >= 1  # only the plugin pool's
    db.session.commit()
    RELEASE.set()
    wait_for(lambda: runs_of(made)[0][0] != "running", 10, "the outcome recorded",
             state=lambda: runs_of(made))
    assert runs_of(made) == [("succeeded", "")]
    plugin_tick.tick(SLOT, holder, term=term, plugin_engine=pooled)  # the next slot, on time
    assert workers.drain(10)
    assert [status for status, _ in runs_of(made)] == ["succeeded", "succeeded"]


def test_a_run_whose_outcome_cannot_be_recorded_is_settled_by_the_next_tick(pooled):
    made = timer()
    holder, term = lead_here()
    db.session.execute(sa.text(REFUSE_OUTCOMES))
    db.session.commit()
    try:
        plugin_tick.tick(T0, holder, term=term, plugin_engine=pooled)
        wait_for(STARTED.is_set, 10, "the run to start")
        RELEASE.set()
        assert workers.drain(10)  # every try failed; its thread has ended
        assert runs_of(made)[0][0] == "running"
    finally:
        db.session.execute(sa.text("DROP TRIGGER refuse_outcome ON timer_runs; "
                                   "DROP FUNCTION refuse_outcome()"))
        db.session.commit()
    plugin_tick.tick(SLOT, holder, term=term, plugin_engine=pooled)
    assert workers.drain(10)
    (first, error), second = runs_of(made)
    assert first == "abandoned" and "outcome could not be recorded" in error
    assert second == ("succeeded", "")  # the next slot ran on time, not skipped
    assert db.session.get(Timer, made.id).consecutive_failures == 0  # not the timer's fault
