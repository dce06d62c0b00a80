"""Real gunicorn instances sharing one PostgreSQL database: kill, freeze, stop, cut off.

How the workers of one instance agree on their one candidate is tests/test_candidates.py.
"""

import os
import signal
import subprocess
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from tests.harness.cluster import (
    ADMIN_URL,
    BIN,
    KEYS,
    PLUGINS_KEY,
    PUBLISH_KEY,
    ROOT,
    Instance,
    LockView,
    base_env,
    drop_database,
    flask_cmd,
    fleet_ready,
    free_port,
    instance_api,
    leader_events,
    migrated_database,
    pid_of,
    stop_all,
    term,
    wait_for,
)
from tests.harness.support import cli_user
from webapp.leadership.files import FileLockSession, read_holder

pytestmark = pytest.mark.slow


def test_frozen_leader_is_evicted_and_learns_it_lost(launch, fleet_db):
    _url, view = fleet_db
    launch("a", LEADER_STALE_SECONDS="2"), launch("b", LEADER_STALE_SECONDS="2")
    wait_for(lambda: fleet_ready(view, 2), 30, "the fleet to settle")
    victim = view.holder(PUBLISH_KEY)
    os.kill(pid_of(victim), signal.SIGSTOP)
    try:
        wait_for(lambda: (h := view.holder(PUBLISH_KEY)) and h != victim, 2 + 5,
                 "the frozen leader to be evicted and replaced")
        wait_for(lambda: ("evicted", victim) in leader_events(view, PUBLISH_KEY), 5,
                 "the eviction to be recorded")
    finally:
        os.kill(pid_of(victim), signal.SIGCONT)
    wait_for(lambda: ("lost", victim) in leader_events(view, PUBLISH_KEY), 10,
             "the thawed process to record that it lost the key")


def test_sigterm_hands_leadership_over_at_once(launch, fleet_db):
    _url, view = fleet_db
    a = launch("a")
    wait_for(lambda: fleet_ready(view, 1), 30, "a to lead")
    # slow followers: only the handover NOTIFY can make the takeover quick
    b = launch("b", FOLLOWER_POLL_SECONDS="30")
    wait_for(lambda: len(view.lock_sessions()) == 2, 30, "b's candidate to stand by")
    wait_for(lambda: all(b.owns(n) is False for n in view.holders().values()), 1, "a to lead")
    a.signal(signal.SIGTERM)
    wait_for(lambda: all(b.owns(view.holder(k)) for k in KEYS), 10,
             "b to take both keys after a's SIGTERM")
    assert a.proc.wait(25) == 0
    released = [holder for kind, holder in leader_events(view, PUBLISH_KEY) if kind == "released"]
    assert len(released) == 1 and a.owns(released[0])


def test_leadership_recovers_after_the_lock_session_is_terminated(launch, fleet_db):
    _url, view = fleet_db
    launch("a", workers=1)
    wait_for(lambda: fleet_ready(view, 1), 30, "a to lead")
    holder = view.holder(PUBLISH_KEY)
    # pg_locks shows both keys the moment the poll takes them; their terms are recorded one
    # after the other: cut the session before the second and that key's first term is 2nd
    wait_for(lambda: term(view, PUBLISH_KEY) == 1 and term(view, PLUGINS_KEY) == 1, 10,
             "both terms to be recorded")
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        pid = view.query("SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                         "AND datname = current_database()",
                         (holder,))[0][0]
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    wait_for(lambda: term(view, PUBLISH_KEY) == 2 and view.holder(PUBLISH_KEY), 10,
             "the process to reconnect and lead again",
             state=lambda: (term(view, PUBLISH_KEY), view.holders(),
                            leader_events(view, PUBLISH_KEY)))
    assert ("lost", holder) in leader_events(view, PUBLISH_KEY)


def test_sqlite_two_workers_one_leader_per_key(tmp_path):
    instance_dir = tmp_path / "instance"
    env = {"SOLOIST_INSTANCE_PATH": str(instance_dir)}
    flask_cmd(base_env(None, **env), "db", "upgrade")
    db_file = FileLockSession(f"sqlite:///{instance_dir / 'soloist.db'}", "x").db_file
    node = Instance("solo", None, workers=2, log_dir=tmp_path, **env).start()
    try:
        def holders() -> dict[int, int] | None:
            found = {key: read_holder(db_file, key) for key in KEYS}
            if all(found.values()):
                return {key: holder["pid"] for key, holder in found.items()}
            return None

        first = wait_for(holders, 30, "both keys to be held by a worker")
        # the first worker can lead before the master has forked the second
        wait_for(lambda: len(node.worker_pids()) == 2, 10, "both workers to run")
        assert set(first.values()) <= set(node.worker_pids())
        victim = first[PUBLISH_KEY]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: (h := holders()) and h[PUBLISH_KEY] != victim, 10,
                 "the other worker to take the publish key")
        assert node.stop() == 0
        assert all(read_holder(db_file, key) is None for key in KEYS)
    finally:
        node.stop()


def test_flask_run_starts_one_scheduler_for_development(fleet_db, tmp_path):
    url, view = fleet_db
    port = free_port()
    with open(tmp_path / "flask-run.log", "w") as log:
        server = subprocess.Popen(
            [str(BIN / "flask"), "--app", "webapp", "run", "--port", str(port), "--no-reload"],
            cwd=ROOT, env=base_env(url, INSTANCE_NAME="dev"), stdout=log,
            stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: set(view.holders()) == KEYS, 30, "flask run's scheduler to lead")
        assert {pid_of(name) for name in view.holders().values()} == {server.pid}
    finally:
        server.terminate()
        server.wait(20)


def _get(instance: Instance, path: str, etag: str | None = None) -> tuple[int, str, str]:
    """GET path as an anonymous reader; return the status, the ETag and the body."""
    request = urllib.request.Request(instance.url + path,
                                     headers={"If-None-Match": etag} if etag else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers.get("ETag", ""), answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("ETag", ""), ""


def test_an_edit_through_one_instance_ends_the_other_instances_304s_at_once(launch, fleet_db):
    """Each worker reads a 304's validators on its own connection: never a stale answer."""
    url, view = fleet_db
    editor, reader = launch("a", workers=1), launch("b", workers=2)
    wait_for(lambda: fleet_ready(view, 2), 60, "two candidates and both keys held")
    token = cli_user(url, "ed@example.com", "editor", "x" * 12)
    post = instance_api(editor, token, "POST", "/api/posts", {"title": "Kept", "body": "First."})
    instance_api(editor, token, "POST", f"/api/posts/{post['id']}/publish", {})
    status, etag, _ = _get(reader, "/posts/kept")
    assert status == 200 and etag
    assert [_get(reader, "/posts/kept", etag)[0] for _ in range(20)] == [304] * 20
    sites = view.query("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s "
                       "AND datname = current_database()", ("soloist-site:b:%",))[0][0]
    assert 1 <= sites <= 2  # one per worker that answered a revalidation
    instance_api(editor, token, "PATCH", f"/api/posts/{post['id']}", {"body": "Second."})
    answers = [_get(reader, "/posts/kept", etag) for _ in range(20)]  # right after the commit
    assert [(status, "Second." in body) for status, _, body in answers] == [(200, True)] * 20
    assert {new for _, new, _ in answers} != {etag}



# The tests below share one pair of instances, last in the module: it is stopped when they
# end, not kept ticking beside the fleets the tests above start

@pytest.fixture(scope="module")
def shared_pair(pg_url, tmp_path_factory):
    """Two instances x two workers on their own database, started once for the tests that
    only watch them or SIGKILL a worker (its master forks another)."""
    url = migrated_database("soloist_fleet")
    view = LockView(url)
    instances = [Instance(name, url, log_dir=tmp_path_factory.mktemp("pair")).start()
                 for name in ("a", "b")]
    try:
        yield url, view, instances
    finally:
        stop_all(instances)
        view.close()
        drop_database(url)


@pytest.fixture
def pair(shared_pair):
    """The shared pair once settled: both keys led, each instance's candidate connected and
    every worker running (a killed one's replacement included)."""
    _url, view, instances = shared_pair
    wait_for(lambda: fleet_ready(view, 2) and all(len(i.worker_pids()) == 2
                                                  for i in instances), 30, "the fleet to settle")
    return shared_pair


def test_two_instances_elect_one_leader_per_key_and_the_rest_stand_by(pair):
    _url, view, (a, b) = pair
    holders = view.holders()
    workers = set(a.worker_pids()) | set(b.worker_pids())
    assert {pid_of(name) for name in holders.values()} <= workers
    sessions = view.lock_sessions()
    # one lock connection per instance: its candidate's; its sibling stands by locally
    assert len(sessions) == len(set(sessions)) == 2
    assert sorted(a.owns(name) for name in sessions) == [False, True]
    assert {pid_of(name) for name in sessions} < workers
    idle = {pid_of(name) for (name,) in view.query(
        "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name LIKE %s", ("soloist%",))}
    assert not idle & (workers - {pid_of(name) for name in sessions})  # no connection at all
    with urllib.request.urlopen(f"{a.url}/readyz", timeout=5) as response:
        assert response.status == 200


def test_follower_takes_over_after_the_leader_is_killed(pair):
    _url, view, _instances = pair
    victim = view.holder(PUBLISH_KEY)
    before = term(view, PUBLISH_KEY)
    os.kill(pid_of(victim), signal.SIGKILL)
    new = wait_for(lambda: (h := view.holder(PUBLISH_KEY)) and h != victim and h, 5,
                   "another process to hold the publish key")
    wait_for(lambda: term(view, PUBLISH_KEY) > before, 5, "the new leader to record its term")
    assert leader_events(view, PUBLISH_KEY)[-1] == ("acquired", new)


def test_posts_are_published_exactly_once_while_leaders_are_killed(pair):
    url, view, _instances = pair
    start = datetime.now(UTC) + timedelta(seconds=1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO posts (title, slug, body, status, publish_at, version, created_at, "
            "updated_at) SELECT 'P' || i, 'p-' || i, '', 'scheduled', "
            "%s + i * interval '20 milliseconds', 1, now(), now() FROM generate_series(0, 199) i",
            (start,))
        conn.execute("SELECT pg_notify('soloist_wake', 'publish')")
    for _ in range(2):  # kill the publish leader twice while posts fall due
        victim = wait_for(lambda: view.holder(PUBLISH_KEY), 10, "a publish leader")
        wait_for(lambda v=victim: view.query(
            "SELECT count(*) FROM outbox_events")[0][0] > 0, 10, "publishing to start")
        os.kill(pid_of(victim), signal.SIGKILL)
        wait_for(lambda v=victim: view.holder(PUBLISH_KEY) not in (None, v), 5, "a new leader")
    wait_for(lambda: view.query("SELECT count(*) FROM posts WHERE status = 'published'")[0][0]
             == 200, 20, "every post to be published")
    per_post = view.query("SELECT post_id, count(*) FROM outbox_events "
                          "WHERE topic = 'post.published' GROUP BY post_id")
    assert len(per_post) == 200 and {count for _, count in per_post} == {1}
