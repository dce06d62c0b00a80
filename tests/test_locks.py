"""The advisory-lock primitive against real PostgreSQL sessions and real file locks."""

import logging
import os
import subprocess
import sys

import pytest

from tests.harness.cluster import ROOT, wait_for
from webapp.db import boot_id, parse_identity_parts, renew_nonce, short_instance
from webapp.extensions import db
from webapp.leadership import (
    PG_TOKEN,
    SQLITE_TOKEN,
    release_leader,
    try_acquire_leader,
    with_scheduler_leader_lock,
)
from webapp.leadership.base import identity, parse_identity, process_of
from webapp.leadership.files import FileLockSession, boot_alive, boot_file, read_holder
from webapp.leadership.keys import PLUGINS, PUBLISH, derive_key
from webapp.leadership.pg import PgLockSession


@pytest.fixture
def sessions(app):
    """Return a factory of connected lock sessions, closed after the test."""
    made = []

    def make(instance: str = "t") -> PgLockSession:
        session = PgLockSession(app.config["LOCK_DATABASE_URL"], instance)
        session.connect()
        made.append(session)
        return session

    yield make
    for session in made:
        session.close()


def test_lock_and_unlock_happen_on_the_dedicated_connection(sessions, pg_view):
    locks = sessions("web.1")
    assert locks.try_lock(PUBLISH.value)
    row = pg_view.query(
        "SELECT l.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
        "WHERE l.locktype = 'advisory' AND l.objid = %s AND l.database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database())", (PUBLISH.value,))
    assert row == [(locks.conn.info.backend_pid, identity("web.1"))]
    assert locks.unlock(PUBLISH.value)
    assert pg_view.holders() == {}


def test_lock_is_reentrant_and_needs_as_many_unlocks(sessions, pg_view):
    locks = sessions()
    assert locks.try_lock(PUBLISH.value) and locks.try_lock(PUBLISH.value)
    assert locks.unlock(PUBLISH.value)
    assert PUBLISH.value in pg_view.holders()
    assert locks.unlock(PUBLISH.value)
    assert PUBLISH.value not in pg_view.holders()
    assert not locks.unlock(PUBLISH.value)


def test_second_session_waits_its_turn(sessions):
    first, second = sessions("a"), sessions("b")
    assert first.try_lock(PLUGINS.value)
    assert not second.try_lock(PLUGINS.value)
    first.unlock(PLUGINS.value)
    assert second.try_lock(PLUGINS.value)


def test_closing_the_connection_frees_every_key(sessions, pg_view):
    first, second = sessions("a"), sessions("b")
    assert first.poll([PUBLISH.value, PLUGINS.value])[0].acquired
    first.close()
    # the server ends the backend (and drops its locks) once it sees the socket close
    wanted = {PUBLISH.value, PLUGINS.value}

    def second_took_both() -> bool:
        wanted.difference_update(r.key for r in second.poll(sorted(wanted)) if r.acquired)
        return not wanted

    wait_for(second_took_both, 5, "the closed session's keys to be free")
    assert pg_view.holders() == {PUBLISH.value: second.name, PLUGINS.value: second.name}


@pytest.mark.parametrize(
    "key", [-1, -(2**63), 2**63 - 1, 0x9A37B7A1, 0x7B9C5F3E, 2**32, -(2**32) - 7]
)
def test_pg_locks_decoding_gives_back_the_signed_key(sessions, pg_view, key):
    locks = sessions()
    assert locks.try_lock(key)
    assert pg_view.holders() == {key: locks.name}


def test_lock_connection_carries_identity_and_keepalives(sessions):
    locks = sessions("dyno.3")
    params = locks.conn.info.get_parameters()
    assert params["application_name"].startswith("soloist:dyno.3:")
    # half the default LEADER_STALE_SECONDS (10): a vanished server is noticed in 5 s
    assert params["tcp_user_timeout"] == "5000"
    assert params["keepalives_idle"] == "2"
    assert locks.conn.autocommit


def test_identity_keeps_the_pid_boot_id_and_nonce_when_the_instance_name_is_long():
    name = identity("x" * 100, pid=4194304, role="plugin")
    assert len(name) <= 63
    instance, pid = parse_identity(name.replace("soloist-plugin", "soloist"))
    assert pid == 4194304 and instance.startswith("xxxxxxxxxx~") and len(instance) <= 24


def test_two_pods_whose_names_share_their_first_40_characters_are_two_instances():
    a = short_instance("my-company-soloist-production-web-7d9f8c6b5d-x2k4p")
    b = short_instance("my-company-soloist-production-web-7d9f8c6b5d-q8r2m")
    assert a != b
    assert a.startswith("my-company~") and "x2k4p" in a and len(a) <= 24
    assert short_instance("web.1") == "web.1"  # a name that fits is kept as it is
    assert ":" not in short_instance("odd:name") and short_instance("é").isascii()


def test_a_process_is_known_by_its_boot_id_not_its_pid():
    mine = parse_identity_parts(identity("pod", role="sched"))
    assert mine.boot == boot_id() and mine.role == "sched" and mine.instance == "pod"
    # another container's worker: the same instance name and pid, another process
    other = identity("pod", pid=os.getpid(), boot="otherboo", nonce="abcdef")
    assert process_of(other) == "otherboo" != boot_id()
    # a name from before boot ids names no process
    assert process_of("soloist:web.1:11:abcdefgh") == ""


def test_a_forked_child_takes_its_own_boot_id_and_keeps_it():
    parent = boot_id()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        renew_nonce()  # a lock session coming back renews the nonce, never the boot id
        os.write(write, f"{boot_id()} {boot_id()}".encode())
        os._exit(0)
    os.close(write)
    first, again = os.read(read, 100).decode().split()
    os.close(read)
    os.waitpid(child, 0)
    assert first == again and first != parent and boot_id() == parent


def test_try_acquire_and_release_through_the_seed_api(app, pg_view):
    with app.app_context():
        token = try_acquire_leader(db.session, PUBLISH.value)
        assert token is PG_TOKEN
        assert PUBLISH.value in pg_view.holders()
        assert release_leader(db.session, token, PUBLISH.value)
        assert PUBLISH.value not in pg_view.holders()


def test_with_scheduler_leader_lock_runs_only_for_the_leader(app, sessions):
    other = sessions("other")
    calls = []
    with app.app_context():
        assert other.try_lock(PUBLISH.value)
        assert with_scheduler_leader_lock(db.session, PUBLISH.value, lambda: calls.append(1))\
            is None
        other.unlock(PUBLISH.value)
        assert with_scheduler_leader_lock(db.session, PUBLISH.value, lambda: "ran") == "ran"
        # released afterwards: the other session can take it again
        assert other.try_lock(PUBLISH.value)
    assert calls == []


def test_unlock_that_returns_false_is_logged_as_lost_leadership(app, caplog):
    with app.app_context(), caplog.at_level(logging.WARNING, "soloist.locks"):
        assert release_leader(db.session, PG_TOKEN, PUBLISH.value) is False
    assert "lost leadership of key 0x9a37b7a1" in caplog.text


def test_acquiring_fails_closed_when_the_database_is_unreachable(pg_url, caplog):
    from tests.harness.support import make_app

    app = make_app(pg_url, LOCK_DATABASE_URL="postgresql+psycopg://root@127.0.0.1:1/nothing")
    with app.app_context(), caplog.at_level(logging.WARNING, "soloist.locks"):
        token = try_acquire_leader(db.session, PUBLISH.value)
    assert token is None
    assert "not leader" in caplog.text


def test_derived_keys_are_stable_signed_64_bit_and_never_reserved():
    key = derive_key("sitemap")
    assert key == derive_key("sitemap")
    assert -(2**63) <= key < 2**63 and key not in (PUBLISH.value, PLUGINS.value)
    assert abs(key) > 2**32  # a 64-bit hash, not a 32-bit one


def test_sqlite_mode_uses_a_file_lock_per_key(sqlite_app, sqlite_url):
    with sqlite_app.app_context():
        token = try_acquire_leader(db.session, PUBLISH.value)
        assert token is SQLITE_TOKEN
        db_file = FileLockSession(sqlite_url, "x").db_file
        assert read_holder(db_file, PUBLISH.value)["application_name"].startswith("soloist:")
        other = _other_process_tries(sqlite_url, PUBLISH.value)
        assert other == "busy"
        assert release_leader(db.session, token, PUBLISH.value)
        assert read_holder(db_file, PUBLISH.value) is None
        assert _other_process_tries(sqlite_url, PUBLISH.value) == "acquired"


def test_sqlite_file_lock_is_freed_when_its_process_dies(sqlite_url):
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_SCRIPT, sqlite_url, str(PUBLISH.value)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        db_file = FileLockSession(sqlite_url, "x").db_file
        found = read_holder(db_file, PUBLISH.value)
        assert found["pid"] == holder.pid
        boot = process_of(found["application_name"])  # its claims name it by its boot id
        assert boot_alive(db_file, boot) and not boot_alive(db_file, "notaboot")
        holder.kill()
        holder.wait()
        wait_for(lambda: read_holder(db_file, PUBLISH.value) is None, 5, "the kernel to free it")
        assert not boot_alive(db_file, boot)  # gone with its process, whatever its pid
        assert not boot_file(db_file, boot).exists()
    finally:
        holder.kill()
        holder.wait()
        holder.stdin.close()
        holder.stdout.close()


_TRY_SCRIPT = """
import sys
from webapp.leadership.files import FileLockSession
s = FileLockSession(sys.argv[1], "other")
print("acquired" if s.try_lock(int(sys.argv[2])) else "busy")
"""

_HOLD_SCRIPT = """
import sys
from webapp.leadership.files import FileLockSession
s = FileLockSession(sys.argv[1], "holder")
assert s.try_lock(int(sys.argv[2]))
print("holding", flush=True)
sys.stdin.read()  # hold until the test is done with us
"""


def _other_process_tries(url: str, key: int) -> str:
    result = subprocess.run([sys.executable, "-c", _TRY_SCRIPT, url, str(key)], cwd=ROOT,
                            capture_output=True, text=True, timeout=30, check=True)
    return result.stdout.strip()
