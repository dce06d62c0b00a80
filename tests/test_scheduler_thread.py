"""The scheduler thread keeps going, says when it cannot lead, and leaves a true history."""

import os
import resource
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import ROOT, wait_for
from tests.harness.support import make_app
from webapp import posts
from webapp.extensions import db
from webapp.leadership.election import Leadership
from webapp.leadership.keys import PUBLISH
from webapp.leadership.pg import PgLockSession
from webapp.leadership.status import snapshot
from webapp.models import LeaderEvent
from webapp.scheduling import engines, process
from webapp.scheduling.runner import Scheduler


def _kinds(app) -> list[str]:
    with app.app_context():
        return list(db.session.scalars(sa.select(LeaderEvent.kind).order_by(LeaderEvent.id)))


@pytest.fixture
def scheduler(app):
    """A scheduler started the way gunicorn starts one, stopped after the test."""
    running = Scheduler(app, engines=engines.build(app.config))
    yield running
    running.stop(10)
    running.locks.close()
    running.engines.close()


def test_the_scheduler_thread_outlives_an_error_in_its_own_loop(app, scheduler):
    real_wait, failures = scheduler.waiter.wait, []

    def wait_failing_twice(locks, timeout):
        if len(failures) < 2:
            failures.append(timeout)
            raise ValueError("filedescriptor out of range in select()")  # what select() said
        return real_wait(locks, timeout)

    scheduler.waiter.wait = wait_failing_twice
    scheduler.start()
    wait_for(lambda: len(failures) == 2, 10, "the loop to hit the error twice")
    wait_for(lambda: PUBLISH.value in scheduler.leadership.held, 10, "leadership after it")
    assert scheduler.alive and scheduler.problems() == []


def _schedule_soon(app, slug: str) -> int:
    with app.app_context():
        post = posts.create_post(slug.title(), slug, "",
                                 datetime.now(UTC) + timedelta(milliseconds=300))
        return post.id


def _wait_published(app, post_id: int, timeout: float) -> None:
    def published() -> bool:
        with app.app_context():
            return posts.get_post(post_id).status == "published"

    wait_for(published, timeout, "the leader to publish the post")


def test_the_leader_publishes_while_requests_hold_every_pooled_connection(app, pg_url):
    web = make_app(pg_url, DB_POOL_SIZE=1, DB_MAX_OVERFLOW=0)
    running = Scheduler(web, engines=engines.build(web.config))
    with web.app_context():
        held = db.engine.connect()  # the web pool's only connection, as a long request holds it
    try:
        running.start()
        wait_for(lambda: PUBLISH.value in running.due, 10, "a first publish tick")
        post_id = _schedule_soon(app, "while-busy")
        _wait_published(app, post_id, 3)  # its ticks have connections of their own
    finally:
        held.close()
        running.stop(10)
        running.locks.close()
        running.engines.close()
        with web.app_context():
            db.engine.dispose()


def test_a_worker_with_a_thousand_open_sockets_schedules_like_any_other(app, scheduler):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        scheduler.start()  # its lock connection's socket gets a descriptor above 1024
        wait_for(lambda: scheduler.locks.connected, 10, "the lock connection")
        assert scheduler.locks.conn.fileno() >= 1024
        wait_for(lambda: PUBLISH.value in scheduler.due, 10, "a first publish tick")
        post_id = _schedule_soon(app, "soon")
        # the idle re-check is 10 s: only the NOTIFY on that socket makes this fast
        _wait_published(app, post_id, 3)
    finally:
        for fd in opened:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_readyz_fails_while_the_lock_session_is_down(pg_url):
    app = make_app(pg_url, LOCK_DATABASE_URL="postgresql+psycopg://root@127.0.0.1:1/test",
                   LEADER_STALE_SECONDS=0.5)
    client = app.test_client()
    assert process.start(app) is not None
    try:
        response = wait_for(lambda: (r := client.get("/readyz")).status_code == 503 and r, 10,
                            "readyz to report the lock session")
        assert any("lock session down" in p for p in response.get_json()["problems"])
    finally:
        assert process.stop(10)
        with app.app_context():
            db.engine.dispose()


def test_a_lost_leadership_is_recorded_before_the_lock_session_is_back(app, scheduler,
                                                                      pg_view):
    scheduler.step()
    assert PUBLISH.value in scheduler.leadership.held
    backend = scheduler.locks.conn.info.backend_pid
    pg_view.query("SELECT pg_terminate_backend(%s, 2000)", (backend,))
    scheduler.next_heartbeat = 0  # its next step verifies, and finds the session gone
    scheduler.step()
    assert not scheduler.locks.connected
    assert _kinds(app).count("lost") == 2  # both keys, written through the tick connections


_HOLDER = """
import sys
from webapp.leadership.election import Leadership
from webapp.leadership.keys import PUBLISH
from webapp.leadership.pg import PgLockSession

leadership = Leadership(PgLockSession(sys.argv[1], "doomed"), [PUBLISH.value], 10.0)
assert leadership.ensure_connected() and leadership.poll() == [PUBLISH.value]
leadership.verify()
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_killed_leader_shows_as_ended_with_how_long_it_held(app):
    url = app.config["LOCK_DATABASE_URL"]
    doomed = subprocess.Popen([sys.executable, "-c", _HOLDER, url], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert doomed.stdout.readline().strip() == "ready"
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(10)
    finally:
        doomed.stdin.close()
        doomed.stdout.close()
    successor = Leadership(PgLockSession(url, "next"), [PUBLISH.value], 10.0)
    assert successor.ensure_connected()
    wait_for(successor.poll, 10, "the successor to take the freed key")
    successor.locks.close()
    with app.app_context():
        history = snapshot().history
    ended = next(c for c in history if c.kind == "ended")
    assert ended.term == 1 and ended.holder.startswith(f"soloist:doomed:{doomed.pid}:")
    assert ended.held_for_s is not None and ended.held_for_s >= 0
    assert [c.kind for c in history] == ["acquired", "ended", "acquired"]


def test_readyz_fails_while_the_scheduler_is_stuck_in_one_step_and_recovers_after(app):
    app.config["LEADER_STALE_SECONDS"] = 2.0
    stuck, release = [], __import__("threading").Event()
    running = Scheduler(app, engines=engines.build(app.config))
    real = running.ticks[PUBLISH.value]

    def tick_that_hangs(*args, **kwargs):  # as a read on a dead socket would, once
        if not stuck:
            stuck.append(True)
            release.wait(30)
        return real(*args, **kwargs)

    running.ticks[PUBLISH.value] = tick_that_hangs
    running.start()
    try:
        wait_for(lambda: stuck, 10, "the publish tick to hang")
        problems = wait_for(running.problems, 5, "readyz to notice the stuck scheduler")
        assert any("scheduler stuck in one step" in p for p in problems)
        release.set()
        wait_for(lambda: running.problems() == [], 5, "the scheduler to be ready again")
    finally:
        release.set()
        running.stop(10)
        running.locks.close()
        running.engines.close()


def test_a_thawed_leader_whose_connection_its_evictor_ends_mid_write_still_records_it(
        pg_url):
    """The finding of a CI run: a frozen candidate thawed, found its keys lost to a sibling
    and logged so, but its "lost" row never came: its evictor ended every connection of its
    process while it was writing, and a stand-by has no lock session to write it later."""
    app = make_app(pg_url)
    running = Scheduler(app, engines=engines.build(app.config))  # the ticks' own connection
    running.leadership.pending.append((PUBLISH.value, "lost", 7, "soloist:thawed:1",
                                       "this instance's candidacy went to a sibling", None))
    writer = threading.Thread(target=running._record_pending)
    try:
        # the write waits on the table, as one the eviction meets mid-way
        with psycopg.connect(pg_url, autocommit=True) as evictor, evictor.transaction():
            evictor.execute("LOCK TABLE leader_events IN EXCLUSIVE MODE")
            writer.start()
            backend = wait_for(lambda: evictor.execute(
                "SELECT pid FROM pg_locks WHERE NOT granted "
                "AND relation = 'leader_events'::regclass").fetchone(), 10,
                "the thawed worker's write to wait on the table")[0]
            evictor.execute("SELECT pg_terminate_backend(%s)", (backend,))
        writer.join(10)
        with engines.working_on(app, running.engines.ticks):
            rows = db.session.execute(sa.select(LeaderEvent.kind, LeaderEvent.term).where(
                LeaderEvent.holder == "soloist:thawed:1")).all()
        running.engines.close()
        assert rows == [("lost", 7)] and running.leadership.pending == []
    finally:
        running.locks.close()
        running.waiter.close()
