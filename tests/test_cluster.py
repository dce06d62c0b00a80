"""Real gunicorn instances sharing one PostgreSQL database: kill, freeze, stop, cut off."""

import contextlib
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from tests.cluster import (
    ADMIN_URL,
    BIN,
    PLUGINS_KEY,
    PUBLISH_KEY,
    ROOT,
    Instance,
    LockView,
    base_env,
    drop_database,
    flask_cmd,
    free_port,
    migrated_database,
    pid_of,
    wait_for,
)
from tests.support import cli_user
from webapp.leadership.files import FileLockSession, read_holder

pytestmark = pytest.mark.slow

KEYS = {PUBLISH_KEY, PLUGINS_KEY}


@pytest.fixture
def fleet_db(pg_url, tmp_path):
    """Return a fresh migrated database for a fleet, and a pg_locks view of it."""
    url = migrated_database("soloist_fleet")
    view = LockView(url)
    yield url, view
    view.close()
    drop_database(url)


@pytest.fixture
def fleet(fleet_db, tmp_path):
    """Return a factory of gunicorn instances on the fleet database, all stopped afterwards."""
    url, _view = fleet_db
    started: list[Instance] = []

    def start(name: str, workers: int = 2, **env: str) -> Instance:
        instance = Instance(name, url, workers=workers, log_dir=tmp_path, **env).start()
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()


def fleet_ready(view: LockView, instances: int) -> bool:
    """Both keys held and one lock session per instance (its candidate's) connected."""
    return set(view.holders()) == KEYS and len(view.lock_sessions()) == instances


def term(view: LockView, key: int) -> int:
    rows = view.query("SELECT term FROM leader_state WHERE key = %s", (key,))
    return rows[0][0] if rows else 0


def events(view: LockView, key: int) -> list[tuple[str, str]]:
    rows = view.query("SELECT kind, holder FROM leader_events WHERE key = %s ORDER BY at, id",
                      (key,))
    return [(kind, holder) for kind, holder in rows]


def test_two_instances_elect_one_leader_per_key_and_the_rest_stand_by(fleet, fleet_db):
    _url, view = fleet_db
    a, b = fleet("a"), fleet("b")
    wait_for(lambda: fleet_ready(view, 2), 30, "2 lock sessions and both keys held")
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


def test_follower_takes_over_after_the_leader_is_killed(fleet, fleet_db):
    _url, view = fleet_db
    fleet("a"), fleet("b")
    wait_for(lambda: fleet_ready(view, 2), 30, "the fleet to settle")
    victim = view.holder(PUBLISH_KEY)
    before = term(view, PUBLISH_KEY)
    os.kill(pid_of(victim), signal.SIGKILL)
    new = wait_for(lambda: (h := view.holder(PUBLISH_KEY)) and h != victim and h, 5,
                   "another process to hold the publish key")
    wait_for(lambda: term(view, PUBLISH_KEY) > before, 5, "the new leader to record its term")
    assert events(view, PUBLISH_KEY)[-1] == ("acquired", new)


def test_frozen_leader_is_evicted_and_learns_it_lost(fleet, fleet_db):
    _url, view = fleet_db
    fleet("a", LEADER_STALE_SECONDS="2"), fleet("b", LEADER_STALE_SECONDS="2")
    wait_for(lambda: fleet_ready(view, 2), 30, "the fleet to settle")
    victim = view.holder(PUBLISH_KEY)
    os.kill(pid_of(victim), signal.SIGSTOP)
    try:
        wait_for(lambda: (h := view.holder(PUBLISH_KEY)) and h != victim, 2 + 5,
                 "the frozen leader to be evicted and replaced")
        wait_for(lambda: ("evicted", victim) in events(view, PUBLISH_KEY), 5,
                 "the eviction to be recorded")
    finally:
        os.kill(pid_of(victim), signal.SIGCONT)
    wait_for(lambda: ("lost", victim) in events(view, PUBLISH_KEY), 10,
             "the thawed process to record that it lost the key")


def test_sigterm_hands_leadership_over_at_once(fleet, fleet_db):
    _url, view = fleet_db
    a = fleet("a")
    wait_for(lambda: fleet_ready(view, 1), 30, "a to lead")
    # slow followers: only the handover NOTIFY can make the takeover quick
    b = fleet("b", FOLLOWER_POLL_SECONDS="30")
    wait_for(lambda: len(view.lock_sessions()) == 2, 30, "b's candidate to stand by")
    wait_for(lambda: all(b.owns(n) is False for n in view.holders().values()), 1, "a to lead")
    a.signal(signal.SIGTERM)
    wait_for(lambda: all(b.owns(view.holder(k)) for k in KEYS), 10,
             "b to take both keys after a's SIGTERM")
    assert a.proc.wait(25) == 0
    released = [holder for kind, holder in events(view, PUBLISH_KEY) if kind == "released"]
    assert len(released) == 1 and a.owns(released[0])


def test_leadership_recovers_after_the_lock_session_is_terminated(fleet, fleet_db):
    _url, view = fleet_db
    fleet("a", workers=1)
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
             state=lambda: (term(view, PUBLISH_KEY), view.holders(), events(view, PUBLISH_KEY)))
    assert ("lost", holder) in events(view, PUBLISH_KEY)


def test_posts_are_published_exactly_once_while_leaders_are_killed(fleet, fleet_db):
    url, view = fleet_db
    fleet("a"), fleet("b")
    wait_for(lambda: fleet_ready(view, 2), 30, "the fleet to settle")
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


def _api(instance: Instance, token: str, method: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        instance.url + path, data=json.dumps(body).encode(), method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


def _get(instance: Instance, path: str, etag: str | None = None) -> tuple[int, str, str]:
    """GET path as an anonymous reader; return the status, the ETag and the body."""
    request = urllib.request.Request(instance.url + path,
                                     headers={"If-None-Match": etag} if etag else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers.get("ETag", ""), answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("ETag", ""), ""


def test_an_edit_through_one_instance_ends_the_other_instances_304s_at_once(fleet, fleet_db):
    """Each worker reads a 304's validators on its own connection: never a stale answer."""
    url, view = fleet_db
    editor, reader = fleet("a", workers=1), fleet("b", workers=2)
    wait_for(lambda: fleet_ready(view, 2), 60, "two candidates and both keys held")
    token = cli_user(url, "ed@example.com", "editor", "x" * 12)
    post = _api(editor, token, "POST", "/api/posts", {"title": "Kept", "body": "First."})
    _api(editor, token, "POST", f"/api/posts/{post['id']}/publish", {})
    status, etag, _ = _get(reader, "/posts/kept")
    assert status == 200 and etag
    assert [_get(reader, "/posts/kept", etag)[0] for _ in range(20)] == [304] * 20
    sites = view.query("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s "
                       "AND datname = current_database()", ("soloist-site:b:%",))[0][0]
    assert 1 <= sites <= 2  # one per worker that answered a revalidation
    _api(editor, token, "PATCH", f"/api/posts/{post['id']}", {"body": "Second."})
    answers = [_get(reader, "/posts/kept", etag) for _ in range(20)]  # right after the commit
    assert [(status, "Second." in body) for status, _, body in answers] == [(200, True)] * 20
    assert {new for _, new, _ in answers} != {etag}


# One candidate per instance (webapp.leadership.local): its siblings stand by on the host ---

def connections_of(view: LockView, pid: int) -> list[str]:
    """Return the application_names of every connection a worker process has open."""
    return [name for (name,) in view.query(
        "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name LIKE %s", (f"soloist%:{pid}:%",))]


def candidate_of(view: LockView, instance: Instance) -> str | None:
    """Return the application_name of the instance's one lock session, if it has one."""
    mine = [name for name in view.lock_sessions() if instance.owns(name)]
    assert len(mine) <= 1, f"{instance.name} has {len(mine)} lock sessions: {mine}"
    return mine[0] if mine else None


def test_a_killed_candidates_sibling_is_its_instances_candidate_within_moments(fleet, fleet_db):
    _url, view = fleet_db
    a = fleet("a", workers=3)
    wait_for(lambda: fleet_ready(view, 1), 30, "a's candidate to lead")
    b = fleet("b", workers=2)
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
        fleet, fleet_db):
    _url, view = fleet_db
    a = fleet("a", workers=2, LEADER_STALE_SECONDS="2")
    wait_for(lambda: fleet_ready(view, 1), 30, "a's candidate to lead")
    b = fleet("b", workers=1, LEADER_STALE_SECONDS="2")
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
    wait_for(lambda: ("lost", victim) in events(view, PUBLISH_KEY), 10,
             "the thawed worker to record that it lost the key")
    assert candidate_of(view, a) != victim  # it stands by: no second session for a
    assert "took over this instance's candidacy" in a.read_log()
    # and costs the database nothing: its lock session and its ticks' connection are closed
    wait_for(lambda: not connections_of(view, pid_of(victim)), 5,
             "the thawed worker to close every connection",
             state=lambda: connections_of(view, pid_of(victim)))


def test_a_candidate_recycled_by_max_requests_hands_over_to_its_sibling(fleet, fleet_db):
    _url, view = fleet_db
    a = fleet("a", workers=2, GUNICORN_CMD_ARGS="--max-requests 10")
    wait_for(lambda: fleet_ready(view, 1), 30, "a's candidate to lead")
    b = fleet("b", workers=1)
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
    released = [holder for kind, holder in events(view, PUBLISH_KEY) if kind == "released"]
    assert released == [victim]  # handed over, not lost
    assert view.holder(PUBLISH_KEY) not in (None, victim)


def test_two_instances_with_one_name_on_one_host_share_one_candidacy(fleet, fleet_db):
    """Handled, not refused: the name is the instance, wherever its masters run."""
    _url, view = fleet_db
    first = fleet("same", workers=2)
    wait_for(lambda: fleet_ready(view, 1), 30, "the first master's candidate to lead")
    second = fleet("same", workers=2)
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


def test_plugin_work_runs_on_its_own_pool_on_the_plugins_leader(fleet, fleet_db):
    url, view = fleet_db
    a = fleet("a", workers=2)
    wait_for(lambda: fleet_ready(view, 1), 30, "a's candidate to lead")
    token = cli_user(url, "ops@example.com", "admin", "x" * 12)
    listed = wait_for(lambda: _api(a, token, "GET", "/api/timers", None)["timers"], 30,
                      "the built-in timers")
    trim = next(t for t in listed if t["action"].endswith(".trim"))
    run = _api(a, token, "POST", f"/api/timers/{trim['id']}/run", {})["run"]
    wait_for(lambda: view.query("SELECT status FROM timer_runs WHERE id = %s",
                                (run["id"],))[0][0] == "succeeded", 30, "the run to succeed")
    leader = pid_of(view.holder(PLUGINS_KEY))
    plugin = [n for n in connections_of(view, leader) if n.startswith("soloist-plugin:")]
    assert plugin, connections_of(view, leader)  # its own pool, not the web pool's
    assert not [n for w in a.worker_pids() if w != leader for n in connections_of(view, w)
                if n.startswith("soloist-plugin:")]
