"""One candidate per instance (webapp.leadership.local): its siblings stand by on the host,
and one of them takes over when the candidate is killed, frozen or recycled."""

import contextlib
import os
import signal
import urllib.request

import pytest

from tests.harness import cluster
from tests.harness.cluster import KEYS, PLUGINS_KEY, PUBLISH_KEY, candidate_of, pid_of, wait_for
from tests.harness.support import cli_user

pytestmark = pytest.mark.slow


def test_a_killed_candidates_sibling_is_its_instances_candidate_within_moments(launch, fleet_db):
    _url, view = fleet_db
    a = launch("a", workers=3)
    wait_for(lambda: cluster.fleet_ready(view, 1), 30, "a's candidate to lead")
    b = launch("b", workers=2)
    wait_for(lambda: candidate_of(view, b), 30, "b's candidate to stand by")
    victim = candidate_of(view, a)
    assert view.holder(PUBLISH_KEY) == victim
    os.kill(pid_of(victim), signal.SIGKILL)
    # b's candidate, waiting in the server's lock queue, is granted the publish key (most
    # often); a sibling of the killed worker becomes a's candidate and competes
    wait_for(lambda: all(view.holder(k) not in (None, victim) for k in KEYS), 5,
             "both keys led by live workers", state=view.holders)
    new = wait_for(lambda: (c := candidate_of(view, a)) and c != victim and c, 5,
                   "a sibling to be a's candidate", state=view.lock_sessions)
    assert pid_of(new) in a.worker_pids() and len(view.lock_sessions()) == 2


def test_a_frozen_candidate_is_replaced_by_a_sibling_and_stands_by_when_it_thaws(
        launch, fleet_db):
    _url, view = fleet_db
    a = launch("a", workers=2, LEADER_STALE_SECONDS="2")
    wait_for(lambda: cluster.fleet_ready(view, 1), 30, "a's candidate to lead")
    b = launch("b", workers=1, LEADER_STALE_SECONDS="2")
    wait_for(lambda: candidate_of(view, b), 30, "b's candidate to stand by")
    victim = candidate_of(view, a)
    os.kill(pid_of(victim), signal.SIGSTOP)
    try:
        # by b's candidate or the sibling that took a's candidacy, whichever is first
        wait_for(lambda: all(view.holder(k) not in (None, victim) for k in KEYS), 2 + 5,
                 "the frozen leader to be evicted and both keys led elsewhere")
        wait_for(lambda: (c := candidate_of(view, a)) and c != victim, 2 + 5,
                 "a sibling to break the frozen worker's lease", state=view.lock_sessions)
    finally:
        os.kill(pid_of(victim), signal.SIGCONT)
    wait_for(lambda: ("lost", victim) in cluster.leader_events(view, PUBLISH_KEY), 10,
             "the thawed worker to record that it lost the key")
    assert candidate_of(view, a) != victim  # it stands by: no second session for a
    assert "took over this instance's candidacy" in a.read_log()
    # and costs the database nothing: its lock session and its ticks' connection are closed
    wait_for(lambda: not cluster.connections_of(view, pid_of(victim)), 5,
             "the thawed worker to close every connection",
             state=lambda: cluster.connections_of(view, pid_of(victim)))


def test_a_candidate_recycled_by_max_requests_hands_over_to_its_sibling(launch, fleet_db):
    _url, view = fleet_db
    a = launch("a", workers=2, GUNICORN_CMD_ARGS="--max-requests 10")
    wait_for(lambda: cluster.fleet_ready(view, 1), 30, "a's candidate to lead")
    b = launch("b", workers=1)
    wait_for(lambda: candidate_of(view, b), 30, "b's candidate to stand by")
    victim = candidate_of(view, a)
    for _ in range(100):  # bounded: both workers recycle within 2 x 10 requests or so
        if pid_of(victim) not in a.worker_pids():
            break
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"{a.url}/healthz", timeout=5).close()
    new = wait_for(lambda: (c := candidate_of(view, a)) and c != victim and c, 10,
                   "a's recycled candidate to hand over to a sibling",
                   state=view.lock_sessions)
    assert pid_of(new) in a.worker_pids()
    released = [holder for kind, holder in cluster.leader_events(view, PUBLISH_KEY)
                if kind == "released"]
    assert released == [victim]  # handed over, not lost
    assert view.holder(PUBLISH_KEY) not in (None, victim)


def test_two_instances_with_one_name_on_one_host_share_one_candidacy(launch, fleet_db):
    """Handled, not refused: the name is the instance, wherever its masters run."""
    _url, view = fleet_db
    first = launch("same", workers=2)
    wait_for(lambda: cluster.fleet_ready(view, 1), 30, "the first master's candidate to lead")
    second = launch("same", workers=2)
    wait_for(lambda: second.read_log().count("scheduler started") == 2, 30,
             "the second master's schedulers to start")
    wait_for(lambda: urllib.request.urlopen(f"{second.url}/readyz", timeout=5).status == 200,
             10, "the second master to be ready")
    assert len(view.lock_sessions()) == 1
    assert pid_of(view.lock_sessions()[0]) in first.worker_pids()
    first.stop()  # SIGTERM: hands over; one of the second master's workers is the candidate
    wait_for(lambda: all(pid_of(view.holder(k) or "x:x:0") in second.worker_pids()
                         for k in KEYS), 10, "the second master to lead")
    assert len(view.lock_sessions()) == 1


def test_plugin_work_runs_on_its_own_pool_on_the_plugins_leader(launch, fleet_db):
    url, view = fleet_db
    a = launch("a", workers=2)
    wait_for(lambda: cluster.fleet_ready(view, 1), 30, "a's candidate to lead")
    token = cli_user(url, "ops@example.com", "admin", "x" * 12)
    listed = wait_for(
        lambda: cluster.instance_api(a, token, "GET", "/api/timers", None)["timers"], 30,
        "the built-in timers")
    trim = next(t for t in listed if t["action"].endswith(".trim"))
    run = cluster.instance_api(a, token, "POST", f"/api/timers/{trim['id']}/run", {})["run"]
    wait_for(lambda: view.query("SELECT status FROM timer_runs WHERE id = %s",
                                (run["id"],))[0][0] == "succeeded", 30, "the run to succeed")
    leader = pid_of(view.holder(PLUGINS_KEY))
    plugin = [n for n in cluster.connections_of(view, leader) if n.startswith("soloist-plugin:")]
    assert plugin, cluster.connections_of(view, leader)  # its own pool, not the web pool's
    assert not [n for w in a.worker_pids() if w != leader for n in cluster.connections_of(view, w)
                if n.startswith("soloist-plugin:")]
