"""Shared by the benchmarks: a throwaway database, a gunicorn fleet, seed workers, tables.

Every benchmark runs inside `with Bench(name) as bench:`; leaving the block (normally, on
an error, on Ctrl-C or on SIGTERM) continues any process it stopped, stops the seed workers
and the gunicorn instances it started, and drops its database.
"""

import argparse
import contextlib
import math
import os
import platform
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from tests.harness.cluster import (  # noqa: E402
    ADMIN_URL,
    PLUGINS_KEY,
    PUBLISH_KEY,
    Instance,
    LockView,
    base_env,
    create_database,
    drop_database,
    flask_cmd,
    pid_of,
    wait_for,
)
from tests.harness.previous_release import Release  # noqa: E402

__all__ = ["ADMIN_URL", "PLUGINS_KEY", "PUBLISH_KEY", "Bench", "SeedFleet", "pid_of", "wait_for"]

KEYS = {PUBLISH_KEY, PLUGINS_KEY}
START_LOAD = os.getloadavg()[0]
SEED_WORKER = Path(__file__).resolve().parent / "seed_worker.py"

STATE_SQL = """
SELECT term, holder, holder_pid, extract(epoch FROM acquired_at)::float8,
       extract(epoch FROM heartbeat_at)::float8
FROM leader_state WHERE key = %s
"""

EVENTS_SQL = """
SELECT id, kind, term, holder, extract(epoch FROM at)::float8, detail
FROM leader_events WHERE key = %s AND id > %s ORDER BY id
"""

INSERT_POSTS_SQL = """
INSERT INTO posts (title, slug, body, status, publish_at, version, created_at, updated_at)
SELECT 'bench post ' || i, %(prefix)s || '-' || i, '', 'scheduled', at, 1, now(), now()
FROM (SELECT i, now() + make_interval(secs => %(lead)s + %(spread)s * %(shape)s) AS at
      FROM generate_series(1, %(n)s) AS i) AS due
ORDER BY at, i
RETURNING id
"""


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


class Bench:
    """A throwaway migrated database plus every process started on it.

    With a release (tests/harness/previous_release.py), that release's own release phase migrates
    the database and its code runs the fleet: a deploy's old side.
    """

    def __init__(self, name: str, release: Release | None = None) -> None:
        self.name = name
        self.release = release
        self.url = ""
        self.instances: list[Instance] = []
        self.seeds: SeedFleet | None = None
        self.view: LockView | None = None
        self.stopped: set[int] = set()  # pids we SIGSTOPped and have not continued yet
        self.expected = 0  # worker processes in the fleet (one lock session an instance)
        self.log_dir = Path("/tmp")

    def __enter__(self) -> "Bench":
        signal.signal(signal.SIGTERM, _interrupt)
        self.url = create_database(f"soloist_bench_{self.name}")
        self.log_dir = Path("/tmp/soloist-bench") / self.url.rsplit("/", 1)[1]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.view = LockView(self.url)
        try:
            self._migrate()
        except BaseException as exc:  # no __exit__ for a failed __enter__: clean up here
            self.__exit__(type(exc))
            raise
        return self

    def _migrate(self) -> None:
        if self.release is None:
            flask_cmd(base_env(self.url), "db", "upgrade")
            return
        done = self.release.procfile("release", base_env(self.url))
        if done.returncode != 0:
            raise RuntimeError(f"release {self.release.commit}'s release phase failed:\n"
                               f"{done.stdout}{done.stderr}")

    def __exit__(self, exc_type: type | None, *_exc: object) -> None:
        failed = False
        for step in (self._continue_stopped, self._stop_seeds, self.stop_fleet,
                     self._close_view, self._drop_database):
            try:
                step()
            except Exception as exc:  # keep cleaning up; say what was left behind
                failed = True
                log(f"cleanup step {step.__name__} failed: {exc!r}")
        if exc_type is None and not failed:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        else:
            log(f"logs kept in {self.log_dir}")

    def _continue_stopped(self) -> None:
        for pid in list(self.stopped):
            self.cont(pid)

    def _stop_seeds(self) -> None:
        if self.seeds is not None:
            self.seeds.stop()

    def _close_view(self) -> None:
        if self.view is not None:
            self.view.close()
            self.view = None

    def _drop_database(self) -> None:
        if self.url:
            drop_database(self.url)

    # --- the gunicorn fleet -------------------------------------------------------------

    def disable_plugins(self, names: Iterable[str]) -> None:
        """Switch plugins off the way an admin does (plugin_states), before the fleet starts."""
        for name in names:
            self.execute("INSERT INTO plugin_states (name, enabled, updated_at) "
                         "VALUES (%s, false, now()) ON CONFLICT (name) DO UPDATE "
                         "SET enabled = false, updated_at = now()", (name,))

    def start_fleet(self, instances: int, workers: int, timeout: float = 120,
                    **env: object) -> None:
        """Start instances x workers gunicorn processes and wait until they have settled."""
        make = self.release.instance if self.release else Instance
        for i in range(instances):
            inst = make(f"bench{i + 1}", self.url, workers=workers, log_dir=self.log_dir,
                        **{k: str(v) for k, v in env.items() if v is not None})
            self.instances.append(inst.start())
        self.expected = instances * workers
        self.wait_fleet(timeout)

    def stop_fleet(self) -> None:
        """Stop every instance (continuing its workers first) and wait for them."""
        for inst in self.instances:
            for pid in inst.worker_pids():
                _signal(pid, signal.SIGCONT)
            inst.signal(signal.SIGTERM)
        for inst in self.instances:
            inst.stop()
        self.instances = []

    def worker_pids(self) -> set[int]:
        """Return the pids of every live worker of every instance."""
        return {pid for inst in self.instances for pid in inst.worker_pids()}

    def fleet_ready(self) -> bool:
        """Every worker is up, each instance has its one candidate's lock session (one of its
        workers: docs/leadership.md#one-candidate-per-instance), and both keys are held by a
        worker. A previous release may come from before one candidate per instance (0a7fa1f
        opened a lock session in every worker): for it, the keys held are enough."""
        workers = self.worker_pids()
        holders = self.view.holders()
        return (len(workers) == self.expected and set(holders) >= KEYS
                and all(pid_of(holders[k]) in workers for k in KEYS)
                and (self.release is not None or self._one_candidate_each()))

    def _one_candidate_each(self) -> bool:
        sessions = self.view.lock_sessions()
        return len(sessions) == len(self.instances) and all(
            sum(inst.owns(name) and pid_of(name) in inst.worker_pids() for name in sessions)
            == 1 for inst in self.instances)

    def wait_fleet(self, timeout: float = 60) -> None:
        """Wait until every worker is up, with one lock session an instance and both keys held."""
        wait_for(self.fleet_ready, timeout,
                 f"{self.expected} workers, {len(self.instances)} lock sessions (one an "
                 "instance), both keys held", interval=0.05)

    def signal_worker(self, pid: int, sig: int) -> float:
        """Send sig to one of our gunicorn workers; return the wall-clock time just before."""
        if pid not in self.worker_pids():
            raise RuntimeError(f"pid {pid} is not a worker of this benchmark's instances")
        if sig == signal.SIGSTOP:
            self.stopped.add(pid)
        sent = time.time()
        os.kill(pid, sig)
        return sent

    def cont(self, pid: int) -> float:
        """Continue a stopped process; return the wall-clock time just before."""
        sent = time.time()
        _signal(pid, signal.SIGCONT)
        self.stopped.discard(pid)
        return sent

    # --- reading the database -----------------------------------------------------------

    def query(self, sql: str, params: object = None) -> list[tuple]:
        """Run one statement on the benchmark's own connection to the database."""
        return self.view.query(sql, params)

    def execute(self, sql: str, params: object = None) -> list[tuple]:
        """Run one statement that may return nothing."""
        cur = self.view.conn.execute(sql, params)
        return cur.fetchall() if cur.description else []

    def state(self, key: int = PUBLISH_KEY) -> tuple | None:
        """Return (term, holder, holder_pid, acquired_at, heartbeat_at) of key, epoch seconds."""
        rows = self.query(STATE_SQL, (key,))
        return rows[0] if rows else None

    def events(self, key: int = PUBLISH_KEY, after: int = 0) -> list[tuple]:
        """Return (id, kind, term, holder, at, detail) of key's events after event id after."""
        return self.query(EVENTS_SQL, (key, after))

    def last_event_id(self) -> int:
        """Return the id of the newest leadership event."""
        return self.query("SELECT coalesce(max(id), 0) FROM leader_events")[0][0]

    def insert_posts(self, prefix: str, n: int, lead: float, spread: float = 0.0,
                     shape: str = "random()") -> list[int]:
        """Schedule n posts due lead..lead+spread seconds from now (ids in due order)."""
        sql = INSERT_POSTS_SQL.replace("%(shape)s", shape)
        rows = self.execute(sql, {"prefix": prefix, "n": n, "lead": lead, "spread": spread})
        self.execute("SELECT pg_notify('soloist_wake', 'publish')")
        return [r[0] for r in rows]

    def clock_offset(self) -> float:
        """Return database clock minus this process's clock, in seconds (same host: ~0)."""
        best = None
        for _ in range(5):
            before = time.time()
            db_now = self.query("SELECT extract(epoch FROM clock_timestamp())::float8")[0][0]
            after = time.time()
            if best is None or after - before < best[0]:
                best = (after - before, db_now - (before + after) / 2)
        return best[1]


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


class SeedFleet:
    """Plain python processes running the seed's loop (bench/seed_worker.py)."""

    def __init__(self, bench: Bench, interval: float, publish: bool) -> None:
        self.bench = bench
        self.interval = interval
        self.publish = publish
        self.procs: dict[int, subprocess.Popen] = {}
        self.logs: list = []
        self.count = 0
        bench.execute(
            "CREATE TABLE IF NOT EXISTS bench_seed_ticks (id bigserial PRIMARY KEY, pid int, "
            "instance text, published int, at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )
        bench.seeds = self

    def spawn(self) -> int:
        """Start one seed worker with a random phase; return its pid."""
        self.count += 1
        name = f"seed{self.count}"
        log_file = open(self.bench.log_dir / f"{name}.log", "w")  # noqa: SIM115
        self.logs.append(log_file)
        args = [sys.executable, str(SEED_WORKER), "--interval", str(self.interval),
                "--phase", f"{random.uniform(0, self.interval):.3f}"]
        if self.publish:
            args.append("--publish")
        proc = subprocess.Popen(args, cwd=ROOT, env=base_env(self.bench.url, INSTANCE_NAME=name),
                                stdout=log_file, stderr=subprocess.STDOUT)
        self.procs[proc.pid] = proc
        return proc.pid

    def start(self, n: int) -> None:
        """Start n seed workers and wait until each has ticked once."""
        for _ in range(n):
            self.spawn()
        self.wait_all_ticked()

    def wait_all_ticked(self) -> None:
        """Wait until every live seed worker has ticked at least once."""
        def ticked() -> bool:
            self.check_alive()
            rows = self.bench.query("SELECT DISTINCT pid FROM bench_seed_ticks")
            return set(self.procs) <= {r[0] for r in rows}
        wait_for(ticked, self.interval + 60, "every seed worker to tick once", interval=0.1)

    def check_alive(self) -> None:
        """Fail if a seed worker died on its own."""
        for pid, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"seed worker {pid} exited with {proc.returncode}; see logs")

    def kill(self, pid: int) -> float:
        """SIGKILL one seed worker; return the wall-clock time just before."""
        proc = self.procs.pop(pid)
        sent = time.time()
        proc.kill()
        proc.wait()
        return sent

    def stop(self) -> None:
        """Stop every seed worker."""
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = {}
        for log_file in self.logs:
            log_file.close()
        self.logs = []
        self.bench.seeds = None


# --- statistics and output ------------------------------------------------------------------


def percentile(values: Iterable[float], p: float) -> float:
    """Return the nearest-rank p-th percentile (p95 of 10 values is the largest)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def table(headers: list[str], rows: list[list[object]]) -> str:
    """Return a Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def seed_label(procs: int, interval: float) -> str:
    """Name the seed's configuration in a table."""
    return f"seed ({procs} process{'es' if procs != 1 else ''}, each every {interval:g} s)"


def secs(value: float) -> str:
    """Format seconds for a table."""
    return "–" if value is None or math.isnan(value) else f"{value:.3f} s"


def ms(value: float) -> str:
    """Format milliseconds for a table."""
    return "–" if value is None or math.isnan(value) else f"{value:.0f} ms"


def log(message: str) -> None:
    """Print progress to stderr (the tables go to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def command_line() -> str:
    """Return the command line this benchmark was started with, relative to the repo root."""
    exe = Path(sys.executable)
    script = Path(sys.argv[0]).resolve()
    parts = [_rel(exe), _rel(script), *sys.argv[1:]]
    return shlex.join(parts)


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def machine() -> str:
    """Describe the machine the numbers come from."""
    with psycopg.connect(ADMIN_URL) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
    return (f"{os.cpu_count()} CPUs, {platform.python_implementation()} "
            f"{platform.python_version()}, PostgreSQL {version}; load average (1 min) "
            f"{START_LOAD:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")


def report(title: str, sections: list[tuple[str, str]], notes: list[str]) -> None:
    """Print the results: the command line, the machine, then each titled table."""
    print(f"\n## {title}\n")
    print(f"Command: `{command_line()}`  \nMachine: {machine()}\n")
    for heading, body in sections:
        print(f"### {heading}\n\n{body}\n")
    for note in notes:
        print(f"- {note}")
    sys.stdout.flush()


def fleet_parser(doc: str, instances: int = 3, workers: int = 2) -> argparse.ArgumentParser:
    """Return a benchmark's argument parser (its docstring as help) with the fleet's size."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=instances)
    parser.add_argument("--workers", type=int, default=workers, help="per instance")
    return parser


def run_main(main: Callable[[], None]) -> None:
    """Run a benchmark's main(); on Ctrl-C or SIGTERM exit quietly once it has cleaned up."""
    try:
        main()
    except KeyboardInterrupt:
        log("interrupted; everything the benchmark started has been stopped")
        sys.exit(130)
