"""A real PgBouncer in front of a throwaway server, as Heroku's connection pooling sets it up.

    with PgBouncer(pg.port, tmp_path, pool_mode="transaction") as bouncer:
        pooled = bouncer.url("soloist")   # postgres://root@127.0.0.1:<bouncer port>/soloist

Transaction pooling, trust auth, and no startup parameter accepted but
extra_float_digits (PgBouncer's default list, which Heroku keeps): a client that sends
`options` is refused with `FATAL: unsupported startup parameter: options`.
"""

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

from tests.harness.cluster import ADMIN_URL, free_port, wait_for

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


class PgBouncer:
    """One pgbouncer process (run as the postgres user when we are root)."""

    def __init__(self, server_port: int, directory: Path, pool_mode: str = "transaction",
                 pool_size: int = 20) -> None:
        self.port = free_port()
        self.dir = directory
        directory.chmod(0o755)
        (directory / "users.txt").write_text('"root" ""\n')
        (directory / "pgbouncer.ini").write_text(f"""
[databases]
* = host=127.0.0.1 port={server_port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {directory / "users.txt"}
pool_mode = {pool_mode}
default_pool_size = {pool_size}
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
""")
        for name in ("users.txt", "pgbouncer.ini"):
            (directory / name).chmod(0o644)
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def available() -> bool:
        return Path(PGBOUNCER).exists()

    def __enter__(self) -> "PgBouncer":
        command = [PGBOUNCER, str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:  # pgbouncer refuses to run as root
            command[1:1] = ["-u", "postgres"]
        with open(self.dir / "pgbouncer.log", "w") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(self._accepting, 10, f"pgbouncer on port {self.port}", interval=0.05)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _accepting(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"pgbouncer exited: {self.log()[-1000:]}")
        try:
            psycopg.connect(self.url("postgres").replace("postgres://", "postgresql://"),
                            connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def url(self, dbname: str) -> str:
        return f"postgres://root@127.0.0.1:{self.port}/{dbname}"

    def log(self) -> str:
        return (self.dir / "pgbouncer.log").read_text()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def require_pgbouncer() -> None:
    """Skip the test without pgbouncer; fail it on CI (CI=true), which runs every test."""
    if not PgBouncer.available():
        import pytest

        if os.environ.get("CI") == "true":
            pytest.fail("CI needs pgbouncer (apt-get install -y pgbouncer)")
        pytest.skip("pgbouncer is not installed: apt-get install -y pgbouncer")


def shared_bouncer(directory: Path, pool_mode: str = "transaction",
                   pool_size: int = 4) -> PgBouncer:
    """Return a PgBouncer (enter it to start it) in front of the shared server; skip the
    test without pgbouncer (fail on CI)."""
    require_pgbouncer()
    return PgBouncer(urlsplit(ADMIN_URL).port or 5432, directory, pool_mode, pool_size)


def pooled_url(database_url: str, port: int) -> str:
    """Return the SQLAlchemy URL of database_url's database through PgBouncer on port."""
    return f"postgresql+psycopg://root@127.0.0.1:{port}/{database_url.rsplit('/', 1)[1]}"
