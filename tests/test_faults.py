"""Faults real platforms produce, on a real fleet: publishing never stalls and never doubles.

Two gunicorn instances x two workers, each instance in a process group of its own (a
host), on a throwaway PostgreSQL server (tests/harness/pgserver.py) that these tests may restart
and cut. Every wait has a deadline; the numbers asserted are what a user would notice:
posts live on time, exactly once, and the same leader while it is healthy.
"""

import signal
import statistics
import time

import psycopg
import pytest

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, pid_of, wait_for
from tests.harness.faultkit import KEYS, FaultFleet
from tests.harness.outage import database_away
from tests.harness.scenarios import (
    OPEN_TRANSACTIONS_SQL,
    freeze_when_burst_starts,
    handover_after,
    keys_led_by_workers,
    load_paths,
    open_transactions,
    process_states,
    readyz_on_every_worker,
    request_to,
    upload_to,
)
from tests.harness.traffic import SlowUpload, WebLoad

pytestmark = pytest.mark.slow

FREEZE_DEADLINE = 15.0  # every due post live this long after the leader's host froze
RECOVERY = 5.0  # both keys led again this long after the database is back
# the database away this long under the fleet: the reconnect backoff reaches its cap (2 s,
# after 0.25 + 0.5 + 1 s) and retries at it three times; a spin (0.69 s a second before
# d6bc362) shows within a second, an idle fleet uses 0.009 (docs/benchmarks.md)
OUTAGE = 10.0
OUTAGE_CPU = 0.1  # CPU s a second per instance meanwhile, at most (the target: 0.02)
BACK = 2.0  # both keys led again this long after the database accepts connections
HANDOVER = 2.0  # a standby leads this soon after SIGTERM, before the request ends (bench: p95)
LAG = 1.0  # publish lag under web load: the typical post (the p99 target is bench/faults.py's)
STALLED = 3 * LAG  # no post this late: publishing did not wait for the load to end

WAITING_ON_A_LOCK_SQL = """
SELECT 1 FROM pg_stat_activity
WHERE application_name LIKE %s AND state = 'active' AND wait_event_type = 'Lock'
"""


@pytest.fixture(scope="module")
def module_fleet(pg_server, tmp_path_factory):
    """Two instances x two workers kept for the module (replaced when a test ends one)."""
    fleet = FaultFleet(pg_server.create_database("soloist_faults"),
                       tmp_path_factory.mktemp("faults"))
    try:
        fleet.start(2, workers=2)
        yield fleet
    finally:
        left = fleet.close()
    assert not left, f"processes left running: {left}"


@pytest.fixture
def fault_fleet(module_fleet):
    """The module's fleet, back to two instances with every worker connected."""
    while len(module_fleet.instances) < 2:
        module_fleet.spawn(2)
    module_fleet.wait_settled()
    return module_fleet


# --- a frozen host -------------------------------------------------------------------------

def test_posts_go_out_while_the_leaders_host_is_frozen_mid_burst(fault_fleet):
    fleet = fault_fleet
    host, _pid = fleet.leader(PUBLISH_KEY)
    ids = fleet.schedule("burst", 300, lead=1.5)
    freeze = freeze_when_burst_starts(fleet, host, ids)
    try:
        try:
            wait_for(lambda: fleet.published(ids) == len(ids),
                     freeze["at"] + FREEZE_DEADLINE - time.time(),
                     "every post of the burst to be published while the host is frozen",
                     interval=0.1)
        except AssertionError:
            raise AssertionError(
                f"{fleet.published(ids)}/{len(ids)} posts published {FREEZE_DEADLINE:g} s after"
                f" the publish leader's host froze ({freeze['published']} before the freeze; "
                f"its open transactions then: {freeze['open']}; now: "
                f"{fleet.view.query(OPEN_TRANSACTIONS_SQL)})") from None
        assert set(process_states(host)) == {"T"}, "the host did not stay frozen"
    finally:
        host.group_signal(signal.SIGCONT)
    fleet.wait_settled()  # the thawed host is back as a follower; its stale work is over
    wait_for(lambda: not open_transactions(fleet, host), 15,
             "the thawed host's old transaction to end")
    outcome = fleet.outcome(ids)
    assert outcome.ok, str(outcome)


# --- web load on the leader's instance ----------------------------------------------------

def test_web_load_on_the_leaders_instance_changes_no_leader_and_posts_go_out_on_time(fault_fleet):
    fleet = fault_fleet
    host, _pid = fleet.leader(PUBLISH_KEY)
    paths = load_paths(fleet)
    first = fleet.last_event_id()
    load = WebLoad(host.port, paths, seconds=5, processes=2, connections=8).start()
    try:
        ids = fleet.schedule("load", 20, lead=1.0, spread=3.0)  # due while the load runs
        result = load.join()
    finally:
        load.stop()
    wait_for(lambda: fleet.published(ids) == len(ids), 10, "every post to be published")
    outcome = fleet.outcome(ids)
    changes = fleet.events_since(first)
    # every connection kept busy the whole time (a few answers each, however slow the machine)
    assert result.requests >= 3 * 2 * 8 and not result.errors, (
        f"the load did not run: {result.requests} answers, {result.errors} errors")
    assert not [s for s in result.statuses if s >= 500], f"server errors: {result.statuses}"
    assert changes == [], f"leadership changed under web load: {changes}"
    assert outcome.ok, str(outcome)
    # the p99 ≤ 1 s target is measured by bench/faults.py, with its table in docs/faults.md:
    # on a shared 2-core CI host one slow moment can reach it (1.035 s seen), so the test
    # asserts what an editor would notice instead, with room for such a moment
    median, slowest = statistics.median(outcome.lags), max(outcome.lags)
    assert median <= LAG and slowest <= STALLED, (
        f"publish lag under load: median {median:.3f} s, slowest {slowest:.3f} s")


def test_a_long_request_on_the_only_pool_connection_does_not_get_the_leader_evicted(pg_server,
                                                                                   tmp_path):
    fleet = FaultFleet(pg_server.create_database("soloist_pool1"), tmp_path, prefix="p")
    request = holder = None
    try:
        small = fleet.spawn(2, DB_POOL_SIZE="1", DB_MAX_OVERFLOW="0")
        wait_for(lambda: all(small.owns(fleet.view.holder(k)) for k in KEYS), 60,
                 "the small-pool instance to lead both keys", interval=0.05)
        fleet.spawn(2)
        fleet.wait_settled()
        leader = fleet.view.holder(PUBLISH_KEY)
        status, draft = fleet.api("POST", "/api/posts", {"title": "Held", "body": "Locked."})
        assert status == 201, f"could not create the post to lock: {status} {draft}"
        # someone else's transaction holds the post's row lock (an editor's save, a migration)
        holder = psycopg.connect(fleet.url)
        holder.execute("SELECT id FROM posts WHERE id = %s FOR UPDATE", (draft["id"],))
        request = request_to(fleet, small, pid_of(leader), "POST",
                             f"/api/posts/{draft['id']}/publish")
        web = (f"soloist-web:{small.name}:{pid_of(leader)}:%",)  # and the session's nonce
        wait_for(lambda: fleet.view.query(WAITING_ON_A_LOCK_SQL, web), 3,
                 "the request to wait for the row lock on the leader's only pool connection")
        first = fleet.last_event_id()
        ids = fleet.schedule("pool", 1, lead=2.0)
        # under the 5 s statement_timeout the request's UPDATE is bounded by, lock wait included
        wait_for(lambda: fleet.published(ids) == 1, 4, "the post to be published")
        held = bool(fleet.view.query(WAITING_ON_A_LOCK_SQL, web))
        holder.rollback()
        wait_for(lambda: not request.running, 5, "an answer once the row lock is released")
        outcome = fleet.outcome(ids)
        changes = fleet.events_since(first)
    finally:
        for opened in (request, holder):
            if opened is not None:
                opened.close()
        left = fleet.close()
    assert held, "the request no longer held the leader's pool connection when the post went out"
    assert request.status == 200 and request.json()["status"] == "published", (
        f"the held request answered {request.status} {request.answer[:300]} {request.error}")
    assert changes == [], f"the healthy leader {leader} lost its keys: {changes}"
    assert outcome.ok and outcome.lags[0] <= LAG, (
        f"the post went out {outcome.lags[0]:.2f} s late (target ≤ {LAG:g} s)")
    assert not left, f"processes left running: {left}"


# --- slow clients ----------------------------------------------------------------------------

def test_a_slow_upload_outlasting_the_idle_transaction_timeout_still_creates_its_post(
        fault_fleet):
    fleet = fault_fleet
    strict = fleet.spawn(1, LEADER_STALE_SECONDS="2")  # ends transactions idle for 1 s
    upload = None
    try:
        fleet.wait_settled()
        upload = SlowUpload(strict.port, fleet.token, seconds=3).start()
        wait_for(lambda: not upload.running, 15, "the slow upload to be answered", interval=0.1)
        took = time.time() - upload.started
    finally:
        if upload is not None:
            upload.close()
        fleet.retire(strict)
        strict.stop()
    assert took >= 3, f"the upload was answered after {took:.1f} s, before its body was sent"
    assert upload.status == 201, (
        f"a 3 s upload on an instance that ends transactions idle for 1 s answered "
        f"{upload.status} {upload.error}")
    assert fleet.view.query("SELECT count(*) FROM posts WHERE title = %s",
                            (upload.title,))[0][0] == 1


# --- the database goes away -------------------------------------------------------------------

def test_the_fleet_idles_while_postgresql_is_away_and_leads_again_soon_after(fault_fleet,
                                                                              pg_server):
    fleet = fault_fleet
    workers = {inst.name: sorted(inst.worker_pids()) for inst in fleet.instances}
    ids = fleet.schedule("outage", 1, lead=1.0)  # falls due while the server is down
    outage = database_away(fleet, pg_server, OUTAGE, back_within=RECOVERY)
    # the target is 0.02 s a second (bench/outage_cpu.py measures it; 0.79 before);
    # the bound here leaves room for a slow moment on a shared machine, and none for a spin
    assert outage.worst <= OUTAGE_CPU, (
        f"CPU a second per instance while PostgreSQL was away {OUTAGE:g} s: {outage.cpu}")
    assert outage.back_after <= BACK, (
        f"both keys led again {outage.back_after:.2f} s after PostgreSQL accepted "
        f"connections (target ≤ {BACK:g} s)")
    wait_for(lambda: fleet.published(ids) == 1, 10, "the post due during the outage")
    fleet.wait_settled(30)
    accepting = time.time()
    wait_for(lambda: readyz_on_every_worker(fleet, accepting), 20,
             "GET /readyz to answer 200 on every worker")
    assert {inst.name: sorted(inst.worker_pids()) for inst in fleet.instances} == workers
    outcome = fleet.outcome(ids)
    assert outcome.ok, str(outcome)


def test_leadership_recovers_and_nothing_is_lost_when_every_session_is_cut(fault_fleet, pg_server):
    fleet = fault_fleet
    workers = sorted(fleet.worker_pids())
    ids = fleet.schedule("cut", 20, lead=1.0, spread=4.0)
    wait_for(lambda: fleet.published(ids) > 0, 10, "publishing to start")
    cut_at = time.time()
    ended = pg_server.terminate_sessions(fleet.dbname, spare=(fleet.view.backend_pid,))
    assert ended >= len(workers)
    wait_for(lambda: fleet.view.quiet(keys_led_by_workers, fleet),
             cut_at + RECOVERY - time.time(), "both keys to be led again", interval=0.05)
    wait_for(lambda: fleet.published(ids) == len(ids), 15, "every post to be published")
    fleet.wait_settled(30)
    assert sorted(fleet.worker_pids()) == workers
    outcome = fleet.outcome(ids)
    assert outcome.ok, str(outcome)


# --- SIGTERM with a request in flight ------------------------------------------------------------

def test_sigterm_hands_leadership_over_while_a_long_request_runs(fault_fleet):
    fleet = fault_fleet
    host, pid = fleet.leader(PUBLISH_KEY)
    led_plugins = host.owns(fleet.view.holder(PLUGINS_KEY))
    upload = upload_to(fleet, host, pid, seconds=20)
    first = fleet.last_event_id()
    fleet.retire(host)
    try:
        sent = time.time()
        host.signal(signal.SIGTERM)
        try:
            took = wait_for(lambda: handover_after(fleet, first, host, sent), 5,
                            "a standby on the other instance to take the publish key")
        except AssertionError:
            raise AssertionError("no standby took the publish key within 5 s of SIGTERM "
                                 f"(events: {fleet.events_since(first)})") from None
        assert upload.running, "the long request ended before the handover"
        assert took <= HANDOVER, f"handover took {took:.3f} s after SIGTERM"
        if led_plugins:
            wait_for(lambda: not host.owns(fleet.view.holder(PLUGINS_KEY)), 1,
                     "the plugins key to move too")
    finally:
        upload.close()
        host.stop()
