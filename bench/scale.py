"""Fleet scale: database connections grow with instances, not with workers.

For each fleet (instances x workers) a throwaway PostgreSQL with the default
max_connections (100) starts, with a real PgBouncer (transaction mode, default_pool_size
20) in front for the web pools (DATABASE_CONNECTION_POOL_URL); the lock sessions and the
scheduler's connections go direct. It measures whether the fleet starts, the server's
connections idle and under web load on every instance (from pg_stat_activity, by role),
and idle transactions per second (pg_stat_database). Then, on smaller fleets, how long a
key is led by nobody after SIGKILL of the leading worker (its siblings alive), after
SIGKILL of the leading instance's whole process group, and how long a SIGSTOPped candidate
keeps its instance out of the election.

    .venv/bin/python bench/scale.py [--fleets 5x4,25x4] [--kill-trials 10] [--stop-trials 2]
        [--load-seconds 10] [--only start,kill,group,stop]
"""

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import log, percentile, run_main, secs, table  # noqa: E402

from tests.harness.cluster import PUBLISH_KEY, pid_of, wait_for  # noqa: E402
from tests.harness.faultkit import KEYS, FaultFleet  # noqa: E402
from tests.harness.pgbouncer import PgBouncer  # noqa: E402
from tests.harness.pgserver import PgServer  # noqa: E402
from tests.harness.scenarios import load_paths  # noqa: E402
from tests.harness.traffic import WebLoad  # noqa: E402

ROLES_SQL = """
SELECT coalesce(application_name, ''), count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1
"""
XACT_SQL = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s"


def role_of(application_name: str) -> str:
    """Return soloist's role of a connection: lock (soloist:...), sched, web, ...; other.
    (Read here, not from webapp, so the bench runs on an earlier commit for a baseline.)"""
    prefix = application_name.split(":", 1)[0]
    if prefix == "soloist":
        return "lock"
    return prefix[8:] if prefix.startswith("soloist-") else "other (the pooler's, psql)"


def connections(fleet: FaultFleet) -> dict[str, int]:
    """Return the server's client connections now by role (lock, sched, ...; other)."""
    found: dict[str, int] = {}
    for name, count in fleet.view.query(ROLES_SQL):
        role = role_of(name)
        found[role] = found.get(role, 0) + count
    return found


def coordination(found: dict[str, int]) -> int:
    return found.get("lock", 0) + found.get("sched", 0)


class Scale:
    """One throwaway server with max_connections 100 and a PgBouncer, for every fleet."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rows: list[list[object]] = []

    def __enter__(self) -> "Scale":
        self.pg = PgServer("soloist-scale")
        self.pg.init()
        with open(self.pg.data / "postgresql.conf", "a") as conf:
            conf.write("max_connections = 100\n")  # PostgreSQL's default, not the tests' 200
        self.pg.start()
        self.dir = Path(tempfile.mkdtemp(prefix="soloist-bench-scale-"))
        self.bouncer = PgBouncer(self.pg.port, self.dir).__enter__()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.bouncer.close()
        self.pg.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def fleet(self, name: str, **env: str) -> FaultFleet:
        dbname = f"soloist_scale_{name}_{int(time.time())}"
        url = self.pg.create_database(dbname)
        return FaultFleet(url, self.args.log_dir, prefix=name[0],
                          DATABASE_CONNECTION_POOL_URL=self.bouncer.url(dbname),
                          DB_POOL_SIZE="3", DB_MAX_OVERFLOW="1", **env)


def start_row(scale: Scale, instances: int, workers: int) -> None:
    """Start instances x workers behind the pooler; connections idle, under load; xact/s."""
    label = f"{instances} x {workers} behind PgBouncer, max_connections 100"
    fleet = scale.fleet(f"s{instances}x{workers}")
    try:
        began = time.monotonic()
        for _ in range(instances):
            fleet.spawn(workers)
        try:
            fleet.wait_settled(60 + 6 * instances)
        except AssertionError as exc:
            scale.rows.append([label, "does not start", str(exc)[:120], "", "", ""])
            return
        started = time.monotonic() - began
        wait_for(lambda: not connections(fleet).get("sched", 0) > 2, 30, "idle")
        idle = connections(fleet)
        dbname = fleet.url.rsplit("/", 1)[1]
        xact0, t0 = fleet.view.query(XACT_SQL, (dbname,))[0][0], time.monotonic()
        time.sleep(scale.args.idle_seconds)  # an idle fleet, measured over this window
        xacts = (fleet.view.query(XACT_SQL, (dbname,))[0][0] - xact0) / (time.monotonic() - t0)
        peak, peak_coord = _under_load(fleet, scale.args.load_seconds)
        scale.rows.append([
            label, f"yes, settled in {secs(started)}",
            f"{sum(idle.values())} ({coordination(idle)} lock + sched: "
            f"{coordination(idle) / instances:.2f} per instance)",
            f"{peak} ({peak_coord} lock + sched)",
            f"{xacts:.1f} ({xacts / (instances * workers):.2f} per worker)",
            ", ".join(f"{k} {v}" for k, v in sorted(idle.items()))])
    finally:
        fleet.close()


def _under_load(fleet: FaultFleet, seconds: float) -> tuple[int, int]:
    """Load every instance at once; return the peak of all connections and of lock+sched."""
    paths = load_paths(fleet)
    loads = [WebLoad(i.port, paths, seconds, processes=1, connections=2).start()
             for i in fleet.instances]
    peak = peak_coord = 0
    until = time.time() + seconds
    while time.time() < until:
        now = connections(fleet)
        peak, peak_coord = max(peak, sum(now.values())), max(peak_coord, coordination(now))
        time.sleep(0.2)  # one look at pg_stat_activity every 0.2 s for the load's length
    for load in loads:
        load.join()
        load.stop()
    return peak, peak_coord


def _handover_trials(scale: Scale, name: str, instances: int, workers: int, kill) -> list:
    """Run kill_trials trials of kill(fleet) -> the seconds until another holds the key."""
    fleet = scale.fleet(name)
    times = []
    try:
        fleet.start(instances, workers=workers)
        for _ in range(scale.args.kill_trials):
            fleet.wait_settled(60)
            times.append(kill(fleet))
    finally:
        fleet.close()
    return times


def _kill_worker(fleet: FaultFleet) -> float:
    """SIGKILL the leading worker; its siblings stay."""
    _host, pid = fleet.leader(PUBLISH_KEY)
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: (h := fleet.view.holder(PUBLISH_KEY)) and pid_of(h) != pid,
             10, "another holder", interval=0.002)
    return time.monotonic() - killed


def _kill_group(fleet: FaultFleet) -> float:
    """SIGKILL the leading instance's whole process group, then start a new instance."""
    host, _pid = fleet.leader(PUBLISH_KEY)
    killed = time.monotonic()
    os.killpg(host.pgid, signal.SIGKILL)
    wait_for(lambda: (x := fleet.view.holder(PUBLISH_KEY)) and not host.owns(x),
             10, "another instance to hold the key", interval=0.002)
    took = time.monotonic() - killed
    host.proc.wait(10)
    fleet.retire(host)
    fleet.spawn(2)
    return took


def kill_row(scale: Scale) -> None:
    """SIGKILL the leading worker (its siblings alive) -> another process holds the key."""
    times = _handover_trials(scale, "kill", 5, 4, _kill_worker)
    scale.rows.append(["SIGKILL of the leading worker, its siblings alive (5 x 4)",
                       f"p50 {secs(percentile(times, 50))}, p95 {secs(percentile(times, 95))}",
                       f"{len(times)} trials", "target p95 ≤ 0.2 s", "", ""])


def group_row(scale: Scale) -> None:
    """SIGKILL the leading instance's whole process group (3 x 2) -> another holds it."""
    times = _handover_trials(scale, "group", 3, 2, _kill_group)
    scale.rows.append(["SIGKILL of the leading instance's process group (3 x 2)",
                       f"p50 {secs(percentile(times, 50))}, p95 {secs(percentile(times, 95))}",
                       f"{len(times)} trials", "target p95 ≤ 0.5 s", "", ""])


def stop_row(scale: Scale) -> None:
    """SIGSTOP the candidate worker (3 x 2, LEADER_STALE_SECONDS 10) -> keys elsewhere and
    its instance a candidate again through a sibling."""
    fleet = scale.fleet("stop")
    moved, again = [], []
    try:
        fleet.start(3, workers=2)
        for _ in range(scale.args.stop_trials):
            fleet.wait_settled(60)
            host, pid = fleet.leader(PUBLISH_KEY)
            stopped = time.monotonic()
            os.kill(pid, signal.SIGSTOP)
            try:
                wait_for(lambda p=pid: all((h := fleet.view.holder(k)) and pid_of(h) != p
                                           for k in KEYS), 30, "the keys elsewhere",
                         interval=0.01)
                moved.append(time.monotonic() - stopped)
                wait_for(lambda h=host, p=pid: any(
                    h.owns(n) and pid_of(n) != p for n in fleet.view.lock_sessions()), 30,
                    "a sibling to be the candidate", interval=0.01)
                again.append(time.monotonic() - stopped)
            finally:
                os.kill(pid, signal.SIGCONT)
    finally:
        fleet.close()
    scale.rows.append(["SIGSTOP of the candidate worker (3 x 2, stale 10 s)",
                       f"keys elsewhere: max {secs(max(moved))}",
                       f"instance a candidate again: max {secs(max(again))}",
                       "target ≤ 12 s", f"{len(moved)} trials", ""])


def main(args: argparse.Namespace) -> None:
    only = set(args.only.split(","))
    with Scale(args) as scale:
        for shape in args.fleets.split(","):
            if "start" in only:
                instances, workers = (int(x) for x in shape.split("x"))
                log(f"fleet {instances} x {workers}")
                start_row(scale, instances, workers)
        for name, row in (("kill", kill_row), ("group", group_row), ("stop", stop_row)):
            if name in only:
                log(name)
                row(scale)
    print(table(["fleet / fault", "result", "idle connections (all)",
                 "peak under web load on every instance", "idle transactions/s", "idle roles"],
                scale.rows))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fleets", default="5x4,25x4")
    parser.add_argument("--kill-trials", type=int, default=10)
    parser.add_argument("--stop-trials", type=int, default=2)
    parser.add_argument("--load-seconds", type=float, default=10.0)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--only", default="start,kill,group,stop")
    parser.add_argument("--log-dir", type=Path,
                        default=Path(tempfile.mkdtemp(prefix="soloist-bench-scale-logs-")))
    return parser.parse_args()


if __name__ == "__main__":
    run_main(lambda: main(parse_args()))
