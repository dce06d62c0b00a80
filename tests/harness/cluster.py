"""Real gunicorn instances and real pg_locks for the multi-process tests and benchmarks."""

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# gunicorn and flask commands run as in production, so with a key of 32 random bytes;
# one per test run, shared by every instance it starts (they read each other's sessions)
SECRET_KEY = secrets.token_urlsafe(32)
ADMIN_URL = os.environ.get("SOLOIST_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/test")

PUBLISH_KEY = 0x9A37B7A1
PLUGINS_KEY = 0x7B9C5F3E
KEYS = {PUBLISH_KEY, PLUGINS_KEY}

LOCKS_SQL = """
SELECT ((l.classid::bigint << 32) | l.objid::bigint) AS key, a.application_name, l.pid
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def wait_for(condition: Callable[[], object], timeout: float, what: str,
              interval: float = 0.02, state: Callable[[], object] | None = None) -> object:
    """Return condition()'s first truthy value; fail with what if the deadline passes.

    state, when given, is called at the deadline and its value shown in the failure.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; saw {state()!r}" if state else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{seen}")
        time.sleep(interval)


# Ports below the kernel's ephemeral range (32768-60999 here), a block per xdist worker:
# a port the kernel handed out for bind(0) could be taken again, as the local port of any
# outgoing connection, before the server binds it (gunicorn then fails "Address already in
# use", as a fleet test once did). Nothing picks these but this function.
_PORT_BLOCK = 1500
_next_port: list[int] = []


def free_port() -> int:
    """Return a TCP port nobody listens on now, outside the ephemeral range."""
    if not _next_port:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
        base = 20000 + (int(worker) if worker.isdigit() else 0) % 8 * _PORT_BLOCK
        _next_port.append(base + (os.getpid() % 100) * 10)
    for _ in range(_PORT_BLOCK):
        port = _next_port[0]
        _next_port[0] = port + 1 if port + 1 < 32000 else 20000
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))  # as gunicorn binds it
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def create_database(prefix: str = "soloist_test", template: str | None = None) -> str:
    """Create an empty database (or a copy of the database template); return its
    postgres:// URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    # FILE_COPY copies the template's files (after a checkpoint, cheap here: test databases
    # are small); the default, WAL_LOG, writes every page of it to the WAL: 68 ms of the
    # server's CPU a copy instead of 174, and half the cost to drop it again
    copy = f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgres://", 1)
    return f"{base}/{name}"


_template: list[str] = []  # this process's migrated database, copied by migrated_database


def migrated_database(prefix: str = "soloist_test") -> str:
    """Create a database at the current schema; return its postgres:// URL.

    A copy of a template this process migrated once (the checked-in migrations, run here
    as `flask db upgrade` runs them; dropped at exit): CREATE DATABASE ... TEMPLATE takes a
    fraction of the migrations' time. Nothing else connects to the template, as a copy needs.
    """
    if not _template:
        from tests.harness.support import make_app, migrate  # support builds on this module

        url = create_database("soloist_template")
        atexit.register(drop_database, url)
        migrate(make_app(url))
        _template.append(url.rsplit("/", 1)[1])
    return create_database(prefix, template=_template[0])


def drop_database(url: str) -> None:
    """Drop a test database, ending any session still connected to it."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def flask_cmd(env: dict, *args: str, root: Path = ROOT, bin_dir: Path = BIN
              ) -> subprocess.CompletedProcess:
    """Run `flask --app webapp ARGS` with env in root (this tree, or another release's);
    raise with its output on failure."""
    result = subprocess.run(
        [str(bin_dir / "flask"), "--app", "webapp", *args], cwd=root, env=env,
        capture_output=True, text=True, timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"flask {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def procfile(root: Path = ROOT) -> dict[str, str]:
    """Return the Procfile's process types and commands (this tree's, or another release's)."""
    lines = (root / "Procfile").read_text().splitlines()
    return {kind: command.strip() for kind, command in
            (line.split(":", 1) for line in lines if line.strip())}


# the instances' candidacy leases (webapp.leadership.local): one directory for this test
# process, removed when it exits, not a file per fleet left in /tmp
LEASE_DIR = tempfile.mkdtemp(prefix="soloist-leases-")
atexit.register(shutil.rmtree, LEASE_DIR, ignore_errors=True)


def base_env(database_url: str | None, **extra: str) -> dict:
    """Return an environment for a Soloist process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "PYTEST"))}
    env.pop("DATABASE_URL", None)
    env.pop("LOCK_DATABASE_URL", None)
    # a developer's .env (read by gunicorn_conf.py and the Flask CLI) must not change a test
    env.update({"SECRET_KEY": SECRET_KEY, "PYTHONUNBUFFERED": "1", "PYTHON_DOTENV_DISABLED": "1",
                "LEASE_DIR": LEASE_DIR})
    # production start-up asks for it: the process's own address, as a reader would use it
    env["SITE_URL"] = f"http://127.0.0.1:{extra['PORT']}" if "PORT" in extra else (
        "http://127.0.0.1")
    if database_url:
        env["DATABASE_URL"] = database_url
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Instance:
    """One gunicorn master (an 'instance', like a dyno) with its workers."""

    def __init__(self, name: str, database_url: str | None, workers: int = 2,
                 log_dir: Path | None = None, root: Path = ROOT, bin_dir: Path = BIN,
                 **env: str) -> None:
        self.name = name
        self.root, self.bin_dir = root, bin_dir  # another release's tree and venv, or ours
        self.port = free_port()
        self.env = base_env(database_url, INSTANCE_NAME=name, PORT=self.port,
                            WEB_CONCURRENCY=workers, **env)
        self.log_path = (log_dir or Path("/tmp")) / f"soloist-{name}-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    wrapper: tuple[str, ...] = ()  # a command gunicorn runs under

    def start(self) -> "Instance":
        """Start gunicorn the way the Procfile does."""
        self.log = open(self.log_path, "w")  # noqa: SIM115  (closed in stop)
        self.proc = subprocess.Popen(
            [*self.wrapper, str(self.bin_dir / "gunicorn"), "-c", "webapp/gunicorn_conf.py",
             "webapp:create_app()"],
            cwd=self.root, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        return self

    def master_pid(self) -> int | None:
        """Return the gunicorn master's pid, as this host sees it (None once it is gone)."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        return self.proc.pid

    @property
    def url(self) -> str:
        """Return the instance's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def worker_pids(self) -> list[int]:
        """Return the pids of the master's live worker processes."""
        master = self.master_pid()
        return [] if master is None else children(master)

    def owns(self, application_name: str | None) -> bool:
        """Return whether a lock session's application_name belongs to this instance."""
        from webapp.db import short_instance

        return bool(application_name) and application_name.startswith(
            f"soloist:{short_instance(self.name)}:")

    def signal(self, sig: int) -> None:
        """Send sig to the master."""
        master = self.master_pid()
        if master is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(master, sig)

    def tell_to_stop(self) -> None:
        """Thaw the workers and SIGTERM the master, without waiting for it."""
        if self.proc is not None and self.proc.poll() is None:
            for pid in self.worker_pids():
                _continue(pid)
            self.signal(signal.SIGTERM)

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM the master and wait for it; SIGKILL the group if it hangs."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.tell_to_stop()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                for pid in self.worker_pids():
                    _kill(pid)
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def read_log(self) -> str:
        """Return everything the instance printed."""
        return self.log_path.read_text()


def stop_all(instances: list[Instance]) -> None:
    """Stop instances together: every master is told before any is waited for.

    A stop takes a second or more (each gthread worker sees it on its next 1 s poll, then
    hands its keys over): one after the other, a fleet's teardown took that per instance.
    """
    for instance in instances:
        instance.tell_to_stop()
    for instance in instances:
        instance.stop()


class Container(Instance):
    """An instance in a PID namespace of its own, as a container runs it: its gunicorn
    master is pid 1 there, its workers 2, 3 …, whatever the host calls them."""

    # --kill-child: the namespace ends with its unshare (a SIGKILL in stop ends it all)
    wrapper = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child")

    def master_pid(self) -> int | None:
        """Return the host's pid of the namespace's pid 1 (unshare's one child)."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        found = children(self.proc.pid)
        return found[0] if found else None


def children(pid: int) -> list[int]:
    """Return the pids of a process's live children."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def peak_rss_mb(pid: int, reset: bool = False) -> float:
    """Return a process's peak resident memory (VmHWM), in MB: since it started, or since
    the last reset (reset=True: the peak starts again from what it holds now)."""
    if reset:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise LookupError(f"no VmHWM for {pid}")


def post_media(base: str, token: str, data: bytes, name: str = "photo.jpg",
               alt: str = "A photo") -> tuple[int, dict]:
    """POST an image to an instance's /api/media as a multipart upload; return the status
    and the JSON answered (an error's too)."""
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"alt\"\r\n\r\n{alt}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(base + "/api/media", data=body, method="POST", headers={
        "Authorization": f"Bearer {token}",
        "Content-Type": f"multipart/form-data; boundary={boundary}"})
    return json_answer(request, timeout=60)


def status_of(url: str, timeout: float = 5) -> int | None:
    """GET url anonymously on a new connection; return the status, or None if nothing
    answered."""
    request = urllib.request.Request(url, headers={"Connection": "close"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def json_answer(request: urllib.request.Request, timeout: float = 10) -> tuple[int, dict]:
    """Send request; return its status and the JSON it answered, an error's too."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.load(error)


def _continue(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def pid_of(application_name: str) -> int:
    """Return the OS pid in a soloist:<instance>:<pid>[:<nonce>] application_name."""
    from webapp.leadership.base import parse_identity

    return parse_identity(application_name)[1]


@contextlib.contextmanager
def holding(url: str, name: str, *keys: int, dbname: str | None = None):
    """Open a real session called name holding the advisory locks keys."""
    if dbname:
        url = url.rsplit("/", 1)[0] + "/" + dbname
    conn = psycopg.connect(url, autocommit=True, application_name=name)
    try:
        for key in keys:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        yield conn
    finally:
        conn.close()


class LockView:
    """Reads pg_locks for one database the way ops would."""

    def __init__(self, database_url: str) -> None:
        self.conn = psycopg.connect(database_url, autocommit=True)

    def holders(self) -> dict[int, str]:
        """Return {key: application_name} of every advisory lock held now."""
        return {key: name for key, name, _pid in self.conn.execute(LOCKS_SQL).fetchall()}

    def holder(self, key: int) -> str | None:
        """Return the application_name holding key, if any."""
        return self.holders().get(key)

    def lock_sessions(self) -> list[str]:
        """Return the application_name of every Soloist lock session connected."""
        rows = self.conn.execute(
            "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE "
            "'soloist:%%' AND datname = current_database()"
        ).fetchall()
        return [r[0] for r in rows]

    def query(self, sql: str, params: object = None) -> list[tuple]:
        """Run any read query."""
        return self.conn.execute(sql, params).fetchall()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


# What the fleet tests read of a fleet through pg_locks and its tables -------------------------

def fleet_ready(view: LockView, instances: int) -> bool:
    """Both keys held, each holder's term recorded, and one lock session per instance (its
    candidate's) connected.

    pg_locks shows a key the moment the poll takes it; its term is recorded a statement
    later. A test that freezes a holder between the two froze a process that does not yet
    know it leads that key: it can never say it lost it (CI run of 2026-12-02).
    """
    holders = view.holders()
    if set(holders) != KEYS or len(view.lock_sessions()) != instances:
        return False
    recorded = dict(view.query("SELECT key, holder FROM leader_state "
                               "WHERE holder_pid IS NOT NULL"))
    return all(recorded.get(key) == name for key, name in holders.items())


def term(view: LockView, key: int) -> int:
    rows = view.query("SELECT term FROM leader_state WHERE key = %s", (key,))
    return rows[0][0] if rows else 0


def leader_events(view: LockView, key: int) -> list[tuple[str, str]]:
    """Return (kind, holder) of each of key's leader events, oldest first."""
    rows = view.query("SELECT kind, holder FROM leader_events WHERE key = %s ORDER BY at, id",
                      (key,))
    return [(kind, holder) for kind, holder in rows]


def instance_api(instance: Instance, token: str, method: str, path: str, body: dict | None
                 ) -> dict:
    """Call the instance's JSON API with token; return the answer."""
    request = urllib.request.Request(
        instance.url + path, data=json.dumps(body).encode(), method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


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
