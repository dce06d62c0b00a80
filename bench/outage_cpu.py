"""Outage CPU: what each instance burns while its database is away, and how soon it leads again.

INSTANCES gunicorn instances x WORKERS workers (each instance in a process group of its
own, like a host) on a throwaway PostgreSQL server (tests/pgserver.py). For each of
--trials: the fleet idles --seconds s with the database up (the baseline), then the server
is stopped (fast) for --seconds s. CPU is read from /proc (utime + stime of each instance's
master and workers, tests/outage.py), so it counts what the instance used itself, however
busy the machine is. Then the server starts again: seconds from it accepting connections
until both keys are held by live workers (pg_locks, polled every 20 ms).

Targets: ≤ 0.02 CPU s a second per instance while the database is down 20 s (2 × 2; a
lock session's wait that raised at once spun the loop at 0.79), keys led
again ≤ 2 s after the server is back.

    .venv/bin/python bench/outage_cpu.py [--seconds 20] [--trials 3] [--instances 2]
        [--workers 2]
"""

import shutil
import signal
import tempfile
import time
from pathlib import Path

from common import _interrupt, fleet_parser, log, report, run_main, table

from tests.faultkit import FaultFleet
from tests.outage import cpu_seconds, database_away
from tests.pgserver import PgServer

CPU_TARGET = 0.02  # s a second per instance while the database is away
BACK_TARGET = 2.0  # s from the server accepting connections to both keys led
LOOP = 1_000_000  # the machine's speed: this many Python additions (tests/conftest.py)


def loop_ms() -> float:
    """Return the best of three runs of LOOP additions, in ms."""
    best = float("inf")
    for _ in range(3):
        started, total = time.perf_counter(), 0
        for i in range(LOOP):
            total += i
        best = min(best, time.perf_counter() - started)
    return best * 1000


def idle_cpu(fleet: FaultFleet, seconds: float) -> dict[str, float]:
    """Return each instance's CPU s a second over seconds of idleness, the database up."""
    processes = {inst.name: inst.alive() for inst in fleet.instances}
    before = {name: cpu_seconds(pids) for name, pids in processes.items()}
    time.sleep(seconds)  # the idle time measured
    return {name: (cpu_seconds(pids) - before[name]) / seconds
            for name, pids in processes.items()}


def trial(fleet: FaultFleet, pg: PgServer, seconds: float) -> list[object]:
    """Measure one idle stretch and one outage; return the table's row."""
    idle = idle_cpu(fleet, seconds)
    outage = database_away(fleet, pg, seconds, back_within=60)
    fleet.wait_settled(60)
    cells = " / ".join(f"{cpu:.4f}" for cpu in outage.cpu.values())
    met = outage.worst <= CPU_TARGET and outage.back_after <= BACK_TARGET
    return [f"{outage.seconds:.1f} s", cells, f"{max(idle.values()):.4f}",
            f"{outage.back_after:.2f} s", "pass" if met else "**FAIL**"]


def main() -> None:
    parser = fleet_parser(__doc__, instances=2, workers=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)  # clean up (fleet, server) as on Ctrl-C
    logs = Path(tempfile.mkdtemp(prefix="soloist-bench-outage-logs-"))
    rows, speed = [], loop_ms()
    with PgServer("soloist-bench-outage") as pg:
        fleet = FaultFleet(pg.create_database("soloist_outage"), logs, prefix="o")
        try:
            fleet.start(args.instances, workers=args.workers)
            for number in range(1, args.trials + 1):
                log(f"trial {number}: {args.seconds:g} s idle, then {args.seconds:g} s down")
                rows.append([number, *trial(fleet, pg, args.seconds)])
        finally:
            left = fleet.close()
    shutil.rmtree(logs, ignore_errors=True)
    headers = ["trial", "database down", "CPU s/s per instance while down",
               "CPU s/s idle, database up (worst)", "keys led again after", "met"]
    notes = [f"targets: ≤ {CPU_TARGET:g} CPU s a second per instance while down; keys led "
             f"≤ {BACK_TARGET:g} s after the server accepts connections",
             f"machine speed: {LOOP:,} Python additions in {speed:.0f} ms (best of 3)"]
    if left:
        notes.append(f"processes left running: {left}")
    report(f"Outage CPU ({args.instances} instances × {args.workers} workers)",
           [("Per trial", table(headers, rows))], notes)


if __name__ == "__main__":
    run_main(main)
