"""No key without a judge: a holder that records no heartbeat is aged by what its session did.

A session can hold a key with no heartbeat of its own: a standby granted the key in the
lock queue that froze before its "acquired" committed, a plain session (a person's psql,
a script), or a holder whose eviction failed after its term was cleared. Each is judged
by its lock session's own last statement, evicted like a frozen leader, reported, and
shown red on the status page.
"""

import os
import signal
import time

import psycopg
import pytest

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, LockView, holding, wait_for
from tests.harness.pgserver import PgServer
from tests.harness.support import make_app, migrate, record_term
from webapp.leadership.election import Leadership
from webapp.leadership.pg import PgLockSession

GHOST = "soloist:ghost:4242:abcdefgh"  # named like a lock session; it never records a term
STALE = 2.0


def lock_url(url: str) -> str:
    return url.replace("postgres://", "postgresql+psycopg://", 1)


def poll_row(locks: PgLockSession, key: int):
    return next(row for row in locks.poll([key]) if row.key == key)


def older_than(locks: PgLockSession, key: int, seconds: float) -> float | None:
    age = poll_row(locks, key).heartbeat_age
    return age if age > seconds else None


def outbox(view, topic: str) -> list[tuple]:
    return view.query("SELECT dedupe_key, payload->>'holder' FROM outbox_events "
                      "WHERE topic = %s", (topic,))


def evicted(view) -> list[tuple]:
    return view.query("SELECT key, term, holder, detail FROM leader_events "
                      "WHERE kind = 'evicted' ORDER BY id")


# the one rule, read by the poll ----------------------------------------------------------

def test_the_poll_ages_a_holder_without_a_heartbeat_by_its_sessions_last_statement(app, pg_url):
    standby = PgLockSession(app.config["LOCK_DATABASE_URL"], "standby")
    standby.connect()
    try:
        with holding(pg_url, GHOST, PUBLISH_KEY) as ghost, \
                holding(pg_url, "soloist:live:7:bbbbbbbb", PLUGINS_KEY) as live:
            record_term(app, PLUGINS_KEY, live, term=3, heartbeat_age=30)
            row = poll_row(standby, PUBLISH_KEY)
            assert not row.acquired and not row.recorded and 0 <= row.heartbeat_age < 5
            quiet = wait_for(lambda: older_than(standby, PUBLISH_KEY, 0.3), 10,
                             "the silent session's age to grow")
            ghost.execute("SELECT 1")  # it did something: younger again
            assert poll_row(standby, PUBLISH_KEY).heartbeat_age < 0.3 < quiet
            aged = poll_row(standby, PLUGINS_KEY)  # a recorded term: its heartbeat's age
            assert aged.recorded and 29 < aged.heartbeat_age < 60
    finally:
        standby.close()


# evicted, then taken over ---------------------------------------------------------------

def test_a_standby_evicts_a_session_that_holds_a_key_without_a_heartbeat(app, pg_url, pg_view):
    standby = Leadership(PgLockSession(app.config["LOCK_DATABASE_URL"], "standby"),
                         [PUBLISH_KEY], 0.5)
    assert standby.ensure_connected()
    try:
        with holding(pg_url, GHOST, PUBLISH_KEY) as ghost:
            assert standby.poll() == []  # it just took the key: fresh
            assert wait_for(standby.poll, 10, "the standby to evict the silent holder",
                            interval=0.1) == [PUBLISH_KEY]
            with pytest.raises(psycopg.OperationalError):
                ghost.execute("SELECT 1")
        [(key, _term, holder, detail)] = evicted(pg_view)
        assert (key, holder) == (PUBLISH_KEY, GHOST)
        assert detail.startswith("no heartbeat recorded; its session last did something")
        assert [h for _, h in outbox(pg_view, "ops.leader_evicted")] == [GHOST]
    finally:
        standby.locks.close()


@pytest.fixture(scope="module")
def server():
    """Return a migrated database on a throwaway server: a test here freezes a backend."""
    with PgServer("soloist-judge") as pg:
        url = pg.create_database("soloist")
        migrate(make_app(url))
        yield url


def test_a_holder_that_outlives_its_eviction_is_evicted_again_and_reported_once(server,
                                                                               caplog):
    # its backend is stopped: pg_terminate_backend waits 2 s for it and returns false
    ghost = psycopg.connect(server, autocommit=True, application_name=GHOST)
    ghost.execute("SELECT pg_advisory_lock(%s)", (PUBLISH_KEY,))
    backend = ghost.info.backend_pid
    standby = Leadership(PgLockSession(lock_url(server), "standby"), [PUBLISH_KEY], 0.3)
    view = LockView(server)
    os.kill(backend, signal.SIGSTOP)
    try:
        assert standby.ensure_connected()
        wait_for(lambda: standby.poll() or evicted(view), 10, "a first eviction")
        for _ in range(2):  # each poll tries again; the key stays unled meanwhile
            assert standby.poll() == [] and not standby.unled[PUBLISH_KEY].recorded
        assert len(evicted(view)) == 1
        assert caplog.text.count(f"the lock session of {GHOST} did not end") == 3
    finally:
        os.kill(backend, signal.SIGCONT)  # the pending termination ends it now
    try:
        assert wait_for(standby.poll, 10, "the standby to take the key") == [PUBLISH_KEY]
        assert [(k, h) for k, _t, h, _d in evicted(view)] == [(PUBLISH_KEY, GHOST)]
        assert [h for _, h in outbox(view, "ops.leader_evicted")] == [GHOST]
    finally:
        for closing in (standby.locks, view, ghost):
            closing.close()


# what ops see -----------------------------------------------------------------------------

def test_the_status_page_shows_a_holder_without_a_heartbeat_red_once_past_the_bound(
        app, auth, pg_url, monkeypatch):
    monkeypatch.setitem(app.config, "LEADER_STALE_SECONDS", 0.5)
    client = auth.client("viewer")

    def heartbeat_cell() -> str:
        html = client.get("/status/live", headers={"HX-Request": "true"}).get_data(as_text=True)
        cell = html[html.index('class="heartbeat', html.index('data-key="publish"')):]
        return cell[:cell.index("</td>")]

    with holding(pg_url, GHOST, PUBLISH_KEY):
        cell = wait_for(lambda: "stale" in heartbeat_cell() and heartbeat_cell(), 10,
                        "the silent holder to turn red", state=heartbeat_cell)
    assert cell.startswith('class="heartbeat stale"')
    assert "no heartbeat recorded; its session last did something" in cell
    assert "(stale: over 500 ms)" in cell


def test_a_running_instance_takes_over_a_key_held_without_a_heartbeat_and_alerts_once(
        fleet_db, launch):
    url, view = fleet_db
    ghost = psycopg.connect(url, autocommit=True, application_name=GHOST)
    ghost.execute("SELECT pg_advisory_lock(%s)", (PUBLISH_KEY,))
    instance = launch("judge", workers=1, LEADER_STALE_SECONDS=str(STALE))

    def up() -> bool:
        ghost.execute("SELECT 1")  # alive until the instance stands by: judged from now
        return instance.owns(view.holder(PLUGINS_KEY))

    wait_for(up, 60, "the instance to lead plugins", interval=0.2)
    ghost.execute("SELECT 1")
    silent_since = time.monotonic()
    wait_for(lambda: instance.owns(view.holder(PUBLISH_KEY)), STALE + 10,
             "the instance to take the publish key", interval=0.02)
    taken = time.monotonic() - silent_since
    # the target (≤ STALE + 2 s) is bench/silent_holder.py's; a full suite run may starve the
    # instance of the CPU for a moment: never before the bound, and taken soon after it
    assert STALE - 0.1 < taken <= STALE + 4.0, taken
    assert [h for _, h in outbox(view, "ops.leader_evicted")] == [GHOST]
    assert outbox(view, "ops.no_leader") == []
    assert [h for _k, _t, h, _d in evicted(view)] == [GHOST]
    ghost.close()
