"""A throwaway PostgreSQL server that fault tests and benchmarks may stop, restart and cut.

The shared server (127.0.0.1:5432) is never restarted: anything that takes the database
away runs on one of these instead. `initdb` puts a cluster in a temporary directory (trust
auth, superuser `root`, fsync off: nothing here needs to survive a crash), and the
postmaster runs in a session of its own, listening on 127.0.0.1 at a free port. As root,
initdb and postgres run as the `postgres` OS user: postgres refuses to run as root.

    with PgServer() as pg:            # initdb + start; on the way out: stop, remove the files
        url = pg.create_database("soloist")
        accepting = pg.restart()      # fast stop, start; wall-clock time it accepted again
        pg.terminate_sessions("soloist")
        replica = pg.replica()        # pg_basebackup -R into a new directory, started
        pg.pause_walsenders()         # SIGSTOP: commits go on here but reach no replica
        pg.stop(mode="immediate")     # SIGQUIT: no checkpoint, sessions cut as in a crash
        replica.promote()             # pg_promote(): the replica takes writes
        pg.rebuild_as_standby_of(replica)  # fresh basebackup of the new primary, started

`PgServer(listen=("10.213.0.1",))` listens on those addresses too (a veth end, for a
network namespace) and trusts 10.213.0.0/16 in pg_hba.conf.

Leaving the block (normally or on an error) stops the server, waits until none of its
processes is left, and deletes the directory; `close()` does the same and may be called
twice. An atexit hook covers a caller that forgets.
"""

import atexit
import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.harness.cluster import free_port, wait_for

OS_USER = "postgres"  # who runs initdb and postgres when we are root
SUPERUSER = "root"

SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",  # a throwaway cluster: speed over durability
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "64MB",
    "log_line_prefix": "'%m [%p] '",
    "log_min_messages": "warning",
    "wal_level": "replica",
    "max_wal_senders": "10",
    "hot_standby": "on",
}
NETNS_NETWORK = "10.213.0.0/16"  # the addresses tests/harness/netfault.py hands out
STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}


class PgNotAvailable(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def pg_bin() -> Path:
    """Return the directory of initdb and postgres: $SOLOIST_PG_BIN, else Debian's newest."""
    if os.environ.get("SOLOIST_PG_BIN"):
        return Path(os.environ["SOLOIST_PG_BIN"])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(Path(p).parent.parent.name))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    if on_path:
        return Path(on_path).parent
    raise PgNotAvailable("no PostgreSQL server binaries (install Debian's postgresql package "
                         "or set SOLOIST_PG_BIN)")


class PgServer:
    """One throwaway cluster: initdb, start, stop (fast), restart, cut every session."""

    def __init__(self, name: str = "soloist-pg", listen: tuple[str, ...] = ()) -> None:
        self.bin = pg_bin()
        self.name = name
        self.listen = listen  # addresses beside 127.0.0.1
        self.port = 0
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self._log = None
        self._as_root = os.geteuid() == 0
        self._paused: list[int] = []  # walsenders SIGSTOPped by pause_walsenders

    # --- life cycle -------------------------------------------------------------------------

    def __enter__(self) -> "PgServer":
        try:
            self.init()
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def init(self) -> None:
        """Create the cluster in a fresh temporary directory."""
        self._make_dir()
        result = self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER,
                            "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
                            "--no-instructions"])
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{result.stdout}\n{result.stderr}")
        self._configure(SETTINGS)

    def _configure(self, base: dict) -> None:
        """Append settings (port, socket directory, addresses) and hba lines (last wins)."""
        settings = {**base, "port": str(self.port), "unix_socket_directories": f"'{self.dir}'",
                    "listen_addresses": "'" + ",".join(("127.0.0.1", *self.listen)) + "'"}
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n# soloist throwaway server\n")
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
        if self.listen:
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {NETNS_NETWORK} trust\n"
                          f"host replication all {NETNS_NETWORK} trust\n")

    def _make_dir(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        atexit.register(self.close)
        if self._as_root:
            shutil.chown(self.dir, OS_USER, OS_USER)
        self.port = free_port()

    @property
    def data(self) -> Path:
        """Return the data directory."""
        return self.dir / "data"

    @property
    def log_path(self) -> Path:
        """Return the server's log file (kept in the cluster's directory)."""
        return self.dir / "postgres.log"

    def start(self, timeout: float = 30) -> float:
        """Start the postmaster; return the wall-clock time it first accepted a connection."""
        if self.running:
            raise RuntimeError("the server is running already")
        self._log = open(self.log_path, "a")  # noqa: SIM115  (closed in stop)
        user = {"user": OS_USER, "group": OS_USER, "extra_groups": []} if self._as_root else {}
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data)], cwd=self.dir,
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, **user)
        return wait_for(self._accepting, timeout, f"the throwaway PostgreSQL on port {self.port}",
                        interval=0.01)

    def _accepting(self) -> float | None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"postgres exited with {self.proc.returncode}:\n"
                               f"{self.log_path.read_text()[-2000:]}")
        try:
            psycopg.connect(self.url("postgres"), connect_timeout=2).close()
        except psycopg.OperationalError:
            return None
        return time.time()

    @property
    def running(self) -> bool:
        """Return whether the postmaster is running."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30, mode: str = "fast") -> float:
        """Shut down (fast: SIGINT, end the sessions, checkpoint, exit; immediate: SIGQUIT,
        as in a crash, the next start replays WAL); wait until every process of the server
        is gone (stopped ones are killed); return the wall-clock time the signal was sent."""
        sent = time.time()
        if self.proc is None:
            return sent
        if self.proc.poll() is None:
            stopped = self._paused
            self.proc.send_signal(STOP_SIGNALS[mode])
            for pid in stopped:  # a SIGSTOPped child would keep the postmaster waiting
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._paused = []
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_all()
                self.proc.wait()
        wait_for(lambda: not self.processes(), 10, "every postgres process to exit")
        if self._log is not None:
            self._log.close()
            self._log = None
        return sent

    def restart(self, downtime: float = 0.0, timeout: float = 30) -> float:
        """Stop (fast), stay down for downtime seconds, start; return when it accepted."""
        self.stop()
        if downtime > 0:
            time.sleep(downtime)  # the outage itself, not a wait for something
        return self.start(timeout)

    def _kill_all(self) -> None:
        for pid in [*self.processes()[1:], self.proc.pid]:  # children first: they outlive it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def processes(self) -> list[int]:
        """Return the postmaster's pid and its children's, while alive (zombies excluded).

        Each postgres child calls setsid(), so the server is not one process group.
        """
        if self.proc is None or self.proc.poll() is not None:
            return [pid for pid, ppid, _pgid in live_processes()
                    if self.proc is not None and ppid == self.proc.pid]
        return [self.proc.pid, *(pid for pid, ppid, _pgid in live_processes()
                                 if ppid == self.proc.pid)]

    def close(self) -> None:
        """Stop the server and delete its directory (idempotent)."""
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        try:
            self.stop()
        finally:
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
            self.proc = None

    # --- replication -------------------------------------------------------------------------

    def replica(self, name: str | None = None) -> "PgServer":
        """Return a streaming replica of this server, started on a port of its own
        (pg_basebackup -R: standby.signal and primary_conninfo pointing here)."""
        replica = PgServer(name or f"{self.name}-replica", listen=self.listen)
        try:
            replica._make_dir()
            replica._base_backup_of(self)
            replica.start()
        except BaseException:
            replica.close()
            raise
        return replica

    def _base_backup_of(self, primary: "PgServer") -> None:
        result = self._run([str(self.bin / "pg_basebackup"), "-h", "127.0.0.1",
                            "-p", str(primary.port), "-U", SUPERUSER, "-D", str(self.data),
                            "-R", "-X", "stream", "--no-sync", "-c", "fast"])
        if result.returncode != 0:
            raise RuntimeError(f"pg_basebackup failed:\n{result.stdout}\n{result.stderr}")
        self._configure({})

    def rebuild_as_standby_of(self, primary: "PgServer") -> float:
        """Make this (stopped) server a streaming standby of primary, from a fresh base
        backup (its own history since the fork is thrown away, as pg_rewind would), and
        start it read-only; return the wall-clock time it accepted connections."""
        if self.running:
            raise RuntimeError("stop the server before rebuilding it")
        shutil.rmtree(self.data)
        self._base_backup_of(primary)
        return self.start()

    def promote(self, timeout: float = 30) -> float:
        """Promote a standby (pg_promote); return the wall-clock time it took writes."""
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=3) as conn:
            conn.execute("SELECT pg_promote(wait => true, wait_seconds => %s)", (int(timeout),))
        wait_for(lambda: not self.in_recovery(), timeout, "the promoted server to leave recovery")
        return time.time()

    def in_recovery(self) -> bool:
        """Return whether the server is a standby (read-only)."""
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=3) as conn:
            return conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]

    def walsenders(self) -> list[int]:
        """Return the pids of the postmaster's walsender processes (one per replica)."""
        return [pid for pid in self.processes()[1:] if "walsender" in _cmdline(pid)]

    def pause_walsenders(self) -> list[int]:
        """SIGSTOP every walsender: commits go on here and reach no replica (lossy failover).

        stop() kills them; resume_walsenders() lets them go on.
        """
        pids = wait_for(self.walsenders, 10, "a walsender (a replica streaming)")
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        self._paused = list(pids)
        return pids

    def resume_walsenders(self) -> None:
        for pid in self._paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._paused = []

    def app_sessions(self, dbname: str, like: str = "soloist%") -> list[tuple[str, str]]:
        """Return (application_name, client address) of the sessions of dbname whose
        application_name is like the pattern."""
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=3) as conn:
            return conn.execute(
                "SELECT application_name, coalesce(host(client_addr), 'local') "
                "FROM pg_stat_activity WHERE datname = %s AND application_name LIKE %s",
                (dbname, like)).fetchall()

    # --- using it -----------------------------------------------------------------------------

    def url(self, dbname: str = "postgres", scheme: str = "postgresql",
            host: str = "127.0.0.1") -> str:
        """Return a URL for dbname as the superuser."""
        return f"{scheme}://{SUPERUSER}@{host}:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """Create a database; return its postgres:// URL (the form apps are given)."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name, scheme="postgres")

    def terminate_sessions(self, dbname: str, spare: tuple[int, ...] = ()) -> int:
        """pg_terminate_backend every session of dbname but the backends spare; return how
        many were ended."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            return conn.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid() AND pid <> ALL(%s)",
                (dbname, list(spare))).fetchone()[0]

    def _run(self, args: list[str]) -> subprocess.CompletedProcess:
        user = {"user": OS_USER, "group": OS_USER, "extra_groups": []} if self._as_root else {}
        return subprocess.run(args, cwd=self.dir, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "LC_ALL": "C"}, **user)


def multi_host_url(servers: list[PgServer], dbname: str) -> str:
    """Return the libpq multi-host URL of dbname on servers, the writable one wanted."""
    hosts = ",".join(f"127.0.0.1:{server.port}" for server in servers)
    return f"postgres://{SUPERUSER}@{hosts}/{dbname}?target_session_attrs=read-write"


def live_processes() -> list[tuple[int, int, int]]:
    """Return (pid, parent pid, process group) of every live (not zombie) process."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if fields[0] not in ("Z", "X"):
            found.append((int(Path(stat).parent.name), int(fields[1]), int(fields[2])))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def group_members(pgid: int) -> list[int]:
    """Return the live processes of process group pgid."""
    return [pid for pid, _ppid, pgrp in live_processes() if pgrp == pgid]


@contextlib.contextmanager
def throwaway_server(name: str, what: str, listen: tuple[str, ...] = ()):
    """Run a throwaway server for the tests of what; skip them without one (fail in CI)."""
    import pytest

    try:
        server = PgServer(name, listen=listen)
    except PgNotAvailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs {what}: {exc}")
        pytest.skip(str(exc))
    with server:
        yield server
