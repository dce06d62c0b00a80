"""A real PgBouncer: locks are refused through transaction pooling, allowed in session mode."""

import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster import free_port, wait_for
from webapp.leadership.election import Leadership
from webapp.leadership.keys import PUBLISH
from webapp.leadership.pg import PgLockSession, TransactionPoolerError

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def _start_pgbouncer(tmp_path: Path, pool_mode: str,
                     pool_size: int = 4) -> tuple[subprocess.Popen, int]:
    if not Path(PGBOUNCER).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs pgbouncer (apt-get install -y pgbouncer)")
        pytest.skip("pgbouncer is not installed: apt-get install -y pgbouncer")
    port = free_port()
    tmp_path.chmod(0o755)
    (tmp_path / "users.txt").write_text('"root" ""\n')
    (tmp_path / "pgbouncer.ini").write_text(f"""
[databases]
* = host=127.0.0.1 port=5432
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {tmp_path / "users.txt"}
pool_mode = {pool_mode}
default_pool_size = {pool_size}
ignore_startup_parameters = extra_float_digits
""")
    for name in ("users.txt", "pgbouncer.ini"):
        (tmp_path / name).chmod(0o644)
    command = [PGBOUNCER, str(tmp_path / "pgbouncer.ini")]
    if os.geteuid() == 0:  # pgbouncer refuses to run as root
        command[1:1] = ["-u", "postgres"]
    with open(tmp_path / "pgbouncer.log", "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    return proc, port


@pytest.fixture
def bouncer(tmp_path, request):
    """Start PgBouncer in the pool mode given by the test's parameter."""
    proc, port = _start_pgbouncer(tmp_path, request.param)
    yield port
    proc.terminate()
    proc.wait(10)


def _via(pg_url: str, port: int) -> str:
    name = pg_url.rsplit("/", 1)[1]
    return f"postgresql+psycopg://root@127.0.0.1:{port}/{name}"


def _connect_when_up(session: PgLockSession) -> None:
    def attempt() -> bool:
        try:
            session.connect()
        except TransactionPoolerError:
            raise
        except Exception:  # pgbouncer still starting
            return False
        return True

    wait_for(attempt, 10, "pgbouncer to accept connections", interval=0.1)


@pytest.mark.parametrize("bouncer", ["transaction"], indirect=True)
def test_locks_are_refused_through_a_transaction_pooler(app, pg_url, bouncer, caplog):
    session = PgLockSession(_via(pg_url, bouncer), "behind-bouncer")
    with pytest.raises(TransactionPoolerError, match="set LOCK_DATABASE_URL"):
        _connect_when_up(session)
    leadership = Leadership(session, [PUBLISH.value], 10)
    with caplog.at_level(logging.ERROR, "soloist.leadership"):
        assert leadership.ensure_connected() is False
    assert "transaction-mode pooler" in caplog.text
    assert leadership.held == {}


@pytest.mark.parametrize("bouncer", ["session"], indirect=True)
def test_a_session_mode_pooler_is_accepted(app, pg_url, bouncer, pg_view):
    session = PgLockSession(_via(pg_url, bouncer), "session-bouncer")
    try:
        _connect_when_up(session)
        assert session.try_lock(PUBLISH.value)
        assert PUBLISH.value in pg_view.holders()
    finally:
        session.close()
