"""Sticky, verified leadership between real lock sessions, stepped by hand (no threads)."""

import logging
import threading

import psycopg
import pytest

from tests.harness.cluster import ADMIN_URL, wait_for
from webapp.db import HANDOVER_CHANNEL
from webapp.leadership.election import Leadership
from webapp.leadership.keys import PLUGINS, PUBLISH
from webapp.leadership.pg import PgLockSession
from webapp.scheduling.wakeup import Waiter

KEYS = [PUBLISH.value, PLUGINS.value]


@pytest.fixture
def process(app):
    """Return a factory of Leadership objects, one per pretend process."""
    made = []

    def make(name: str, stale: float = 10.0) -> Leadership:
        leadership = Leadership(PgLockSession(app.config["LOCK_DATABASE_URL"], name), KEYS,
                                stale)
        assert leadership.ensure_connected()
        made.append(leadership)
        return leadership

    yield make
    for leadership in made:
        leadership.locks.close()


def events(pg_view) -> list[tuple]:
    return pg_view.query("SELECT key, kind, term, holder FROM leader_events ORDER BY at, id")


def count_statements(locks: PgLockSession) -> list[str]:
    """Record every statement the lock session runs from now on."""
    seen: list[str] = []
    original = locks.execute

    def counting(sql, params=None):
        seen.append(sql)
        return original(sql, params)

    locks.execute = counting
    return seen


def test_first_poll_wins_every_key_and_starts_term_one(process, pg_view):
    a = process("a")
    assert sorted(a.poll()) == sorted(KEYS)
    assert a.held == {PUBLISH.value: 1, PLUGINS.value: 1}
    assert set(pg_view.holders().values()) == {a.locks.name}
    assert {(k, kind, term) for k, kind, term, _ in events(pg_view)} == {
        (PUBLISH.value, "acquired", 1), (PLUGINS.value, "acquired", 1)}


def test_a_follower_tries_every_key_in_one_statement_and_stays_follower(process):
    a, b = process("a"), process("b")
    a.poll()
    statements = count_statements(b.locks)
    for _ in range(5):
        assert b.poll() == []
    assert len(statements) == 5
    assert b.held == {}


def test_leadership_is_sticky_across_ticks(process, pg_view):
    a, b = process("a"), process("b")
    a.poll()
    for _ in range(3):
        assert set(a.verify()) == set(KEYS)
        assert b.poll() == []
    assert set(pg_view.holders().values()) == {a.locks.name}
    assert len(events(pg_view)) == 2


def test_verify_stamps_the_heartbeat_with_the_database_clock(process, pg_view):
    a = process("a")
    a.poll()
    a.verify()
    age = pg_view.query("SELECT max(now() - heartbeat_at) FROM leader_state")[0][0]
    assert age.total_seconds() < 1
    assert a.db_now is not None and a.db_now.tzinfo is not None


def test_release_notifies_standbys_and_one_takes_over(process, pg_view):
    a, b = process("a"), process("b")
    a.poll()
    a.release_all("graceful stop")
    notes = Waiter().wait(b.locks, 5)
    assert {n.channel for n in notes} == {HANDOVER_CHANNEL}
    assert sorted(b.poll()) == sorted(KEYS)
    kinds = [(kind, term, holder) for key, kind, term, holder in events(pg_view)
             if key == PUBLISH.value]
    assert kinds == [("acquired", 1, a.locks.name), ("released", 1, a.locks.name),
                     ("acquired", 2, b.locks.name)]


def waiting(standby: Leadership, seconds: float = 30.0) -> dict:
    """Start standby waiting in the server's lock queue (in a thread); return what it won."""
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("won", standby.wait(seconds)))
    thread.start()
    result["thread"] = thread
    return result


def queued(pg_view, standby: Leadership) -> bool:
    """Return whether standby's session is waiting in the lock queue for a key."""
    return bool(pg_view.query("SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted",
                              (standby.locks.conn.info.backend_pid,)))


@pytest.mark.parametrize("how", ["release", "session ends"])
def test_a_standby_in_the_lock_queue_takes_the_key_the_moment_it_is_free(process, pg_view, how):
    a, b = process("a"), process("b")
    a.poll()
    wait = waiting(b)  # 30 s: no poll could explain a quick takeover
    wait_for(lambda: queued(pg_view, b), 5, "b to wait in the lock queue")
    if how == "release":
        a.release_all("graceful stop")
    else:
        a.locks.close()  # what SIGKILL does to the session
    wait["thread"].join(5)
    assert wait["won"] == [PUBLISH.value], "b did not take the key while waiting for it"
    assert pg_view.holder(PUBLISH.value) == b.locks.name
    closed = "released" if how == "release" else "ended"
    assert [(kind, holder) for key, kind, _, holder in events(pg_view) if key == PUBLISH.value] \
        == [("acquired", a.locks.name), (closed, a.locks.name), ("acquired", b.locks.name)]


def test_a_waiting_standby_still_evicts_a_frozen_leader_with_one_row_per_event(process,
                                                                               pg_view):
    a, b, c = process("a", stale=2), process("b", stale=2), process("c", stale=2)
    a.poll()
    wait = waiting(c)
    wait_for(lambda: queued(pg_view, c), 5, "c to wait in the lock queue")

    def granted_to_c() -> bool:
        """a froze: b's poll evicts it, and c, first in the queue, is granted the key at once.
        Looked at before each poll of b's (with a 0.5 s bound and b polled first, a loaded
        machine let c's new term go stale too, and b evicted c)."""
        if pg_view.holder(PUBLISH.value) == c.locks.name:
            return True
        b.poll()
        return False

    wait_for(granted_to_c, 2 + 5, "b to evict the frozen leader and c to be granted the key")
    wait["thread"].join(5)
    assert wait["won"] == [PUBLISH.value]
    kinds = [kind for key, kind, _, _ in events(pg_view) if key == PUBLISH.value]
    assert kinds == ["acquired", "evicted", "acquired"], "the eviction was told twice"


def test_interrupt_ends_a_wait_at_once_and_the_wait_takes_nothing(process, pg_view):
    a, b = process("a"), process("b")
    a.poll()
    wait = waiting(b)
    wait_for(lambda: queued(pg_view, b), 5, "b to wait in the lock queue")
    b.locks.interrupt()
    wait["thread"].join(5)
    assert wait["won"] == [] and not queued(pg_view, b)
    assert pg_view.holder(PUBLISH.value) == a.locks.name


def test_frozen_leader_is_evicted_and_replaced(process, pg_view):
    a, b = process("a", stale=0.5), process("b", stale=0.5)
    a.poll()
    # a stops heartbeating (frozen); b takes over once the heartbeat is stale
    won = wait_for(lambda: b.poll(), 5, "b to evict the frozen leader")
    assert sorted(won) == sorted(KEYS)
    assert set(pg_view.holders().values()) == {b.locks.name}
    kinds = [kind for key, kind, _, _ in events(pg_view) if key == PUBLISH.value]
    assert kinds == ["acquired", "evicted", "acquired"]
    # a thaws: its session was terminated, so it finds out it lost and says so
    evicted = a.locks.name
    assert a.verify() == {}
    assert a.held == {}
    assert a.ensure_connected() and a.poll() == []
    lost = [holder for key, kind, _, holder in events(pg_view) if kind == "lost"]
    assert lost == [evicted, evicted]
    # back under a new nonce: a late eviction aimed at the old session misses it
    assert a.locks.name != evicted and a.locks.name.rsplit(":", 1)[0] == evicted.rsplit(":", 1)[0]


def test_leader_that_keeps_heartbeating_is_never_evicted(process):
    a, b = process("a", stale=0.5), process("b", stale=0.5)
    a.poll()
    for _ in range(15):
        a.verify()
        assert b.poll() == []
        Waiter().wait(b.locks, 0.1)  # a tenth of a second between polls


def test_terminated_lock_session_is_noticed_and_leadership_recovers(process, pg_view):
    a = process("a")
    a.poll()
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (a.locks.conn.info.backend_pid,))
    wait_for(lambda: not _still_connected(a), 5, "a to see its connection is gone")
    assert a.held == {}
    assert a.ensure_connected()
    assert sorted(a.poll()) == sorted(KEYS)
    assert [k for _, k, t, _ in events(pg_view)] .count("lost") == 2
    assert {term for _, _, term in _state(pg_view)} == {2}


def test_step_down_releases_and_keeps_away_for_a_while(process, pg_view):
    a, b = process("a"), process("b")
    a.poll()
    pg_view.query("UPDATE leader_state SET step_down_requested = true WHERE key = %s "
                  "RETURNING key", (PUBLISH.value,))
    asked = a.verify()
    assert asked[PUBLISH.value] is True
    a.step_down(PUBLISH.value, "step down requested", cooldown=30)
    assert a.missing == []
    assert b.poll() == [PUBLISH.value]


def _still_connected(leadership: Leadership) -> bool:
    leadership.verify()
    return leadership.locks.connected


def _state(pg_view) -> list[tuple]:
    return pg_view.query("SELECT key, holder, term FROM leader_state")


def test_an_unreachable_database_is_logged_once_not_per_attempt(caplog):
    locks = PgLockSession("postgresql+psycopg://root@127.0.0.1:1/nothing", "offline")
    leadership = Leadership(locks, KEYS, 10)
    with caplog.at_level(logging.INFO, "soloist.leadership"):
        for _ in range(4):
            leadership.next_connect = 0  # skip the backoff wait
            assert leadership.ensure_connected() is False
    assert caplog.text.count("lock connection unavailable") == 1
    assert leadership.backoff > 0.25  # backing off between attempts
    assert leadership.held == {}


def test_the_history_tells_an_eviction_once_in_words_and_how_long_the_key_was_leaderless(
        app, process):
    from webapp.leadership.status import snapshot

    a, b = process("a", stale=0.5), process("b", stale=0.5)
    a.poll()
    wait_for(lambda: b.poll(), 5, "b to evict the frozen leader")
    assert a.verify() == {} and a.ensure_connected()  # a thaws and writes its own "lost"
    with app.app_context():
        history = [c for c in snapshot().history if c.key == PUBLISH.value]
    assert [c.kind for c in history] == ["acquired", "evicted", "acquired"]  # newest first
    assert history[0].holder == b.locks.name and history[0].without_leader_s is not None
    assert history[0].without_leader_s < 5
    assert history[2].without_leader_s is None  # the first term follows nobody


def test_a_cut_lock_session_reads_as_cut_off_not_as_a_crashed_database():
    from webapp.leadership.status import in_words

    raw = ("lock connection failed: server closed the connection unexpectedly\n"
           "\tThis probably means the server terminated abnormally")
    assert in_words("lost", raw).startswith("its lock session was cut off")
    assert "terminated abnormally" not in in_words("lost", raw)
    assert in_words("evicted", "heartbeat 12.0 s old") == "heartbeat 12.0 s old"
