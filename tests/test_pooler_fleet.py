"""A fleet behind a real PgBouncer in transaction mode, as Heroku sets it up.

Two instances x two workers with DATABASE_URL straight to a throwaway PostgreSQL server
and DATABASE_CONNECTION_POOL_URL through PgBouncer (transaction pooling, no startup
parameters but extra_float_digits). What a webhook receiver and an editor see: every post
published once, on time, and delivered under one webhook-id; a timer asked to run now
runs at once; the publish leader's host killed, a standby leads in seconds.
"""

import signal

import pytest

from tests.harness.chaos import FLEET_ENV
from tests.harness.cluster import PUBLISH_KEY, wait_for
from tests.harness.faultkit import FaultFleet
from tests.harness.pgbouncer import PgBouncer, require_pgbouncer
from tests.harness.pgserver import throwaway_server
from tests.harness.scenarios import HookReceiver, await_receipts, handover_after, subscribe, two_ids

pytestmark = pytest.mark.slow

LAG = 2.0  # s from publish_at to published, at most
TIMER_START = 2.0  # s from "run now" to the run starting
HANDOVER = 5.0  # s from SIGKILL of the leader's host to a standby acquiring
ENV = {**FLEET_ENV, "LEADER_STALE_SECONDS": "4"}


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    """(fleet, receiver, bouncer): the module's fleet behind PgBouncer."""
    require_pgbouncer()
    with throwaway_server("soloist-pooler", "the pooler fleet tests") as pg:
        url = pg.create_database("soloist_pooled")
        with PgBouncer(pg.port, tmp_path_factory.mktemp("bouncer")) as bouncer:
            fleet = FaultFleet(url, tmp_path_factory.mktemp("pooled"), prefix="b",
                               DATABASE_CONNECTION_POOL_URL=bouncer.url("soloist_pooled"),
                               **ENV)
            receiver = HookReceiver().start()
            try:
                fleet.start(2, workers=2)
                subscribe(fleet, receiver)
                yield fleet, receiver, bouncer
            finally:
                left = fleet.close()
                receiver.close()
            assert not left, f"processes left running: {left}"


def _tick_errors(fleet: FaultFleet) -> list[str]:
    lines = [line for inst in fleet.instances + fleet.gone
             for line in inst.read_log().splitlines() if "ERROR" in line or "FATAL" in line]
    return lines[-3:]


def test_posts_due_over_ten_seconds_behind_pgbouncer_are_published_once_and_delivered(pooled):
    fleet, receiver, _bouncer = pooled
    ids = fleet.schedule("pooled", 20, lead=2.0, spread=10.0)
    try:
        wait_for(lambda: fleet.published(ids) == len(ids), 12 + LAG + 3,
                 "every post to be published", interval=0.2)
    except AssertionError:
        raise AssertionError(f"{fleet.published(ids)}/{len(ids)} published behind PgBouncer; "
                             f"the fleet's last errors: {_tick_errors(fleet)}") from None
    outcome = fleet.outcome(ids)
    assert outcome.ok, str(outcome)
    assert max(outcome.lags) <= LAG, f"max publish lag {max(outcome.lags):.2f} s"
    missing = await_receipts(receiver, ids, 15)
    assert not missing, f"{len(missing)}/{len(ids)} posts never reached the receiver"
    assert not two_ids(receiver, ids), f"posts under two webhook-ids: {two_ids(receiver, ids)}"


def test_a_timer_run_now_behind_pgbouncer_starts_within_two_seconds(pooled):
    fleet, _receiver, _bouncer = pooled
    status, body = fleet.api("GET", "/api/timers")
    assert status == 200, body
    timer = next((t for t in body["timers"] if t["action"] == "webhooks.deliver"), None)
    assert timer is not None, (
        f"no webhooks.deliver timer (the plugin leader makes it); timers: "
        f"{[t['action'] for t in body['timers']]}; the fleet's last errors: {_tick_errors(fleet)}")
    status, body = fleet.api("POST", f"/api/timers/{timer['id']}/run")
    assert status == 202, f"run now answered {status} {body}"
    run_id = body["run"]["id"]
    sql = ("SELECT extract(epoch FROM started_at - queued_at)::float8 FROM timer_runs "
           "WHERE id = %s AND started_at IS NOT NULL")
    try:
        took = wait_for(lambda: fleet.view.query(sql, (run_id,)), TIMER_START + 3,
                        "the queued run to start", interval=0.1)[0][0]
    except AssertionError:
        raise AssertionError(f"the timer run queued now never started; the fleet's last "
                             f"errors: {_tick_errors(fleet)}") from None
    assert took <= TIMER_START, f"the run started {took:.2f} s after it was queued"


def test_sigkill_of_the_publish_leaders_host_behind_pgbouncer_hands_over(pooled):
    fleet, receiver, _bouncer = pooled
    host, _pid = fleet.leader(PUBLISH_KEY)
    first = fleet.last_event_id()
    ids = fleet.schedule("killed", 10, lead=1.0, spread=4.0)
    fleet.retire(host)
    sent = host.group_signal(signal.SIGKILL)
    host.stop()
    took = wait_for(lambda: handover_after(fleet, first, host, sent), HANDOVER + 10,
                    "a standby to take the publish key")
    assert took <= HANDOVER, f"handover took {took:.2f} s after SIGKILL"
    wait_for(lambda: fleet.published(ids) == len(ids), 15, "every post to be published")
    outcome = fleet.outcome(ids)
    assert outcome.ok, str(outcome)
    assert not await_receipts(receiver, ids, 15), "posts never reached the receiver"
    assert not two_ids(receiver, ids), f"posts under two webhook-ids: {two_ids(receiver, ids)}"
    fleet.spawn(2)
    fleet.wait_settled()
