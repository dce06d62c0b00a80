"""Containers: every pod's gunicorn master is pid 1 and its workers 2, 3 …, and pod names run
past any cut. Two instances, each in a PID namespace of its own (unshare, as a container
runtime makes one), are still two processes to the fleet: they are told apart by their boot
ids, never by (instance, pid)."""

import pytest

from tests.harness.cluster import Container, fleet_ready, pid_of, stop_all, wait_for
from tests.harness.support import Api, make_app
from webapp.db import identity, short_instance
from webapp.extensions import db

pytestmark = pytest.mark.slow

POD = "my-company-soloist-production-web-7d9f8c6b5d-"  # 45 characters every pod shares
PLUGINS_KEY = 0x7B9C5F3E

RUN_SQL = """
INSERT INTO timer_runs (timer_id, scheduled_for, trigger, status, started_at, result, error,
                        instance, claimed_term, claimed_holder)
SELECT id, now() - interval '5 seconds', 'schedule', 'running', now() - interval '5 seconds',
       '', '', %(holder)s, 1, %(holder)s
FROM timers WHERE id = (SELECT min(id) FROM timers WHERE plugin = %(plugin)s) RETURNING id
"""


@pytest.fixture
def pods(fleet_db, tmp_path):
    """Two pods of one deployment, one worker each, each in its own PID namespace."""
    url, view = fleet_db
    started = [Container(POD + suffix, url, workers=1, log_dir=tmp_path).start()
               for suffix in ("x2k4p", "q8r2m")]
    try:
        wait_for(lambda: fleet_ready(view, 2), 60, "both pods up, both keys led")
        yield started
    finally:
        stop_all(started)


def test_two_pods_with_one_name_prefix_and_equal_pids_are_two_processes(pods, fleet_db):
    url, view = fleet_db
    leader = view.holder(PLUGINS_KEY)
    standby = next(n for n in view.lock_sessions() if n != leader)
    assert pid_of(leader) == pid_of(standby)  # what containers do: the same pid in each pod
    app = make_app(url)

    # the status page and the API show two instances, named so a reader knows which pod
    leaders = Api(app)("GET", "/api/leaders", role="viewer").get_json()
    shown = {s["instance"] for k in leaders for s in [k["holder"] or {}, *k["standbys"]] if s}
    assert shown == {short_instance(p.name) for p in pods} and len(shown) == 2
    assert any("x2k4p" in name for name in shown) and any("q8r2m" in name for name in shown)

    # a run the standby pod claimed while it led is still running there: the leader, with the
    # same instance prefix and pid, must not take it for a dead thread of its own. A run of
    # a process that is gone (the leader's name and pid, another boot) is settled at once.
    wait_for(lambda: view.query("SELECT count(*) FROM timers")[0][0] >= 4, 20,
             "the plugin leader to create the default timers")
    [[alive]] = view.query(RUN_SQL, {"holder": standby, "plugin": "housekeeping"})
    gone = identity(short_instance(POD + "x2k4p"), pid=pid_of(leader), boot="gonegone")
    [[dead]] = view.query(RUN_SQL, {"holder": gone, "plugin": "sitemap"})
    view.query("SELECT pg_notify('soloist_wake', 'plugins')")  # look now, not in 10 s

    def status(run_id: int) -> str:
        return view.query("SELECT status FROM timer_runs WHERE id = %s", (run_id,))[0][0]

    wait_for(lambda: status(dead) == "abandoned", 20, "the dead process's run to be settled",
             state=lambda: status(dead))
    assert status(alive) == "running"

    # and its timer, due now, is not started beside the run still in flight
    [[timer]] = view.query("SELECT timer_id FROM timer_runs WHERE id = %s", (alive,))
    view.conn.execute("UPDATE timers SET next_run_at = now() WHERE id = %s", (timer,))
    view.query("SELECT pg_notify('soloist_wake', 'plugins')")
    runs = "SELECT status, error FROM timer_runs WHERE timer_id = %s ORDER BY id"
    wait_for(lambda: len(view.query(runs, (timer,))) == 2, 20,
             "the leader to claim the housekeeping timer's due slot")
    rows = view.query(runs, (timer,))
    assert rows[0][0] == "running"
    assert rows[1][0] == "skipped" and "still running" in rows[1][1]
    with app.app_context():
        db.engine.dispose()
