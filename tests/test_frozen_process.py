"""A frozen or vanished leader's process cannot keep what its successor needs."""

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import ROOT, wait_for
from webapp import posts
from webapp.extensions import db
from webapp.leadership.election import Leadership
from webapp.leadership.keys import PUBLISH
from webapp.leadership.pg import PgLockSession
from webapp.models import LeaderEvent, Post
from webapp.scheduling import publish

# A leader process as the app builds one: it leads the publish key on its lock session and
# has a transaction open on its web pool, holding the row locks of every due post.
_LEADER = """
import sys
import sqlalchemy as sa
from webapp import create_app
from webapp.db import server_options
from webapp.extensions import db
from webapp.leadership import lock_session
from webapp.leadership.election import Leadership
from webapp.leadership.keys import PUBLISH

uri, idle = sys.argv[1], float(sys.argv[2])
app = create_app({"TESTING": True, "SECRET_KEY": "x", "SQLALCHEMY_DATABASE_URI": uri,
                  "LOCK_DATABASE_URL": uri, "INSTANCE_NAME": "frozen",
                  "LEADER_STALE_SECONDS": 2 * idle})  # idle transactions end after idle
with app.app_context():
    leadership = Leadership(lock_session(uri, "frozen", server_options(app.config)),
                            [PUBLISH.value], 10.0)
    assert leadership.ensure_connected() and leadership.poll() == [PUBLISH.value]
    db.session.execute(sa.text("SELECT id FROM posts WHERE status = 'scheduled' FOR UPDATE"))
    print("ready", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def leader_process(app):
    """Start a real leader process (see _LEADER); return a function that starts it."""
    started: list[subprocess.Popen] = []

    def start(idle_in_transaction: float) -> subprocess.Popen:
        child = subprocess.Popen(
            [sys.executable, "-c", _LEADER, app.config["SQLALCHEMY_DATABASE_URI"],
             str(idle_in_transaction)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started.append(child)
        assert child.stdout.readline().strip() == "ready"
        return child

    yield start
    for child in started:
        child.kill()
        child.wait(10)
        child.stdin.close()
        child.stdout.close()


def _due_posts(app, count: int) -> None:
    past = datetime.now(UTC) - timedelta(seconds=5)
    with app.app_context():
        db.session.add_all(Post(title=f"Due {i}", slug=f"due-{i}", body="", status="scheduled",
                                publish_at=past, version=1) for i in range(count))
        db.session.commit()


def _published(app) -> list[int]:
    with app.app_context():
        return posts.publish_due(datetime.now(UTC) + timedelta(seconds=1))


def _connections_of(pg_view, pid: int) -> list[str]:
    return [r[0] for r in pg_view.query(
        "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE %s "
        "AND datname = current_database()", (f"%:frozen:{pid}:%",))]


def test_evicting_a_frozen_leader_ends_every_connection_of_its_process(app, pg_view,
                                                                       leader_process):
    _due_posts(app, 3)
    frozen = leader_process(idle_in_transaction=60)  # only the eviction can free its rows
    assert sorted(n.rsplit(":", 2)[0] for n in _connections_of(pg_view, frozen.pid)) == [
        f"soloist-web:frozen:{frozen.pid}", f"soloist:frozen:{frozen.pid}"]
    assert _published(app) == []  # the frozen transaction holds every due row
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        follower = Leadership(PgLockSession(app.config["LOCK_DATABASE_URL"], "b"),
                              [PUBLISH.value], 0.5)
        assert follower.ensure_connected()
        assert wait_for(follower.poll, 10, "the follower to evict the frozen leader")
        assert _connections_of(pg_view, frozen.pid) == []
        assert len(_published(app)) == 3  # its successor publishes what it had locked
        with app.app_context():
            kinds = db.session.scalars(sa.select(LeaderEvent.kind).order_by(LeaderEvent.id))
            assert list(kinds) == ["acquired", "evicted", "acquired"]
        follower.locks.close()
    finally:
        os.kill(frozen.pid, signal.SIGCONT)


def test_a_vanished_process_open_transaction_ends_on_the_server(app, leader_process):
    _due_posts(app, 2)
    leader_process(idle_in_transaction=1)  # nobody evicts it: the server's timeout must
    assert _published(app) == []
    assert len(wait_for(lambda: _published(app), 10, "the server to end the transaction")) == 2


def test_every_connection_carries_server_side_timeouts(app):
    with app.app_context():
        db.session.execute(sa.text("SELECT 1"))
        settings = db.session.execute(sa.text(
            "SELECT current_setting('statement_timeout'), "
            "current_setting('idle_in_transaction_session_timeout')")).one()
    assert settings == ("5s", "5s")  # half of LEADER_STALE_SECONDS
    locks = PgLockSession(app.config["LOCK_DATABASE_URL"], "t",
                          "-c statement_timeout=5000 -c idle_in_transaction_session_timeout=5000")
    locks.connect()
    assert locks.execute("SHOW statement_timeout") == [("5s",)]
    locks.close()


def test_the_publish_leader_backs_off_from_rows_it_cannot_take(app, leader_process):
    _due_posts(app, 1)
    leader_process(idle_in_transaction=60)
    now = datetime.now(UTC)
    with app.app_context():
        # the row is locked: come back shortly, not at once (that spun 150 times a second)
        assert publish.tick(now) == now + publish.LOCKED_RETRY
