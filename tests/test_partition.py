"""The publish leader's host falls off the network for 15 s while posts fall due.

The leader's instance runs in a network namespace (tests/harness/netfault.py) and a blackhole
qdisc drops every packet between it and PostgreSQL, both ways, without a reset; a standby
runs in the root namespace. The scenario runs once for the module (tests/harness/partition.py);
each test asserts one thing a receiver, an editor or ops would notice.
"""

import os

import pytest

from tests.harness.chaos import FLEET_ENV
from tests.harness.faultkit import FaultFleet
from tests.harness.netfault import Netns, NetnsError
from tests.harness.partition import run_partition, start_partition_fleet
from tests.harness.pgserver import throwaway_server
from tests.harness.scenarios import HookReceiver, subscribe

pytestmark = pytest.mark.slow

STALE = 4.0  # LEADER_STALE_SECONDS of the fleet
CUT = 15.0  # s the partition lasts
TAKEOVER = STALE + 3  # s from the cut to a standby leading
LATE = STALE + 5  # s a post may be late, at most
ANSWERED = STALE + 4  # s a web request to the cut host may take to be answered or fail
SESSIONS_GONE = STALE + 4  # s from the cut until the server has ended the host's sessions
REJOIN = 10.0  # s from the heal until the host's candidate stands by (or leads) again


@pytest.fixture(scope="module")
def partition(tmp_path_factory):
    """Run the partition once: (PartitionRun, fleet, host)."""
    try:
        netns = Netns()
    except NetnsError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs the partition tests (as root, with ip netns): {exc}")
        pytest.skip(f"no network namespace: {exc}")
    receiver = None
    try:
        with throwaway_server("soloist-partition", "the partition tests",
                              listen=(netns.db_host,)) as pg:
            fleet = FaultFleet(pg.create_database("soloist_partition"),
                               tmp_path_factory.mktemp("partition"), prefix="n",
                               LEADER_STALE_SECONDS=str(STALE), **FLEET_ENV)
            try:
                host = start_partition_fleet(pg, netns, fleet)
                receiver = HookReceiver(netns.web_host).start()
                subscribe(fleet, receiver)
                run = run_partition(fleet, netns, host, receiver, posts=30, spread=12.0,
                                    seconds=CUT, stale=STALE)
                yield run, fleet, host
            finally:
                left = fleet.close()
            assert not left, f"processes left running: {left}"
    finally:
        if receiver is not None:
            receiver.close()
        netns.close()


def test_a_standby_takes_over_soon_after_the_leaders_host_is_cut_off(partition):
    run, fleet, _host = partition
    assert run.takeover is not None and run.takeover <= TAKEOVER, (
        f"a standby led {run.takeover} s after the cut (target ≤ {TAKEOVER:g} s); "
        f"events: {fleet.events_since(0)[-6:]}")


def test_every_post_due_during_the_partition_is_published_once_and_not_very_late(partition):
    run, _fleet, _host = partition
    assert run.outcome.ok, str(run.outcome)
    assert max(run.outcome.lags) <= LATE, (
        f"a post went out {max(run.outcome.lags):.1f} s late (target ≤ {LATE:g} s)")


def test_the_receiver_gets_every_post_under_one_webhook_id(partition):
    run, _fleet, _host = partition
    assert not run.not_received, f"posts never received: {run.not_received}"
    assert not run.two_ids, f"posts under two webhook-ids: {run.two_ids}"


def test_every_web_request_to_the_cut_host_is_answered_or_fails_in_bounded_time(partition):
    run, _fleet, _host = partition
    slow = [r for r in run.requests if r[2] > ANSWERED]
    assert len(run.requests) == 4 and not slow, (
        f"requests (path, status, s) taking over {ANSWERED:g} s: {slow}; all: {run.requests}")


def test_the_server_ends_the_cut_hosts_sessions_within_the_bound(partition):
    run, _fleet, _host = partition
    assert run.sessions_gone is not None and run.sessions_gone <= SESSIONS_GONE, (
        f"the server still had {len(run.lingering)} of the cut host's sessions "
        f"{CUT:g} s after the cut (target: none after {SESSIONS_GONE:g} s): {run.lingering}")


def test_after_the_heal_the_hosts_candidate_stands_by_again(partition):
    run, _fleet, host = partition
    late = {pid: s for pid, s in run.rejoined.items() if s > REJOIN}
    assert run.rejoined and not late, (
        f"no busy lock session of the host {REJOIN:g} s after the heal: {run.rejoined}")
    assert len(run.rejoined) == 1 and set(run.rejoined) <= set(host.worker_pids())


def test_readyz_fails_while_the_hosts_scheduler_is_stuck(partition):
    run, _fleet, _host = partition
    assert not run.readyz_ok_while_stuck, (
        "GET /readyz answered 200 from a worker whose scheduler had not come back "
        f"(pid, s after the cut): {run.readyz_ok_while_stuck[:10]}; rejoined: {run.rejoined}")
