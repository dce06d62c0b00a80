"""Boot cost: the CPU an instance's master and workers spend from start to settled.

Starts one gunicorn instance x WORKERS workers on a fresh database ROUNDS times, waits until
it has settled (every worker up, its candidate leading both keys), then reads each process's
user + system CPU from /proc/<pid>/stat. Then SIGKILLs a worker that stands by and reads the
CPU of the worker the master forks in its place once it is up. The master imports the code
before it forks (webapp/gunicorn_conf.py), so a worker's boot is its own apps only.

    .venv/bin/python bench/boot_cost.py [--rounds 5] [--workers 2]
"""

import argparse
import os
import signal
import statistics
from pathlib import Path

from common import Bench, log, pid_of, report, run_main, table, wait_for

TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid: int) -> float:
    """Return a process's user + system CPU seconds so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one_round(bench: Bench, workers: int) -> tuple[float, list[float], float]:
    """Boot, measure, kill a standby worker, measure its replacement, stop."""
    bench.start_fleet(1, workers)
    instance = bench.instances[0]
    master, pids = cpu(instance.proc.pid), instance.worker_pids()
    booted = [cpu(pid) for pid in pids]
    leader = pid_of(bench.view.lock_sessions()[0])
    victim = next(pid for pid in pids if pid != leader)
    os.kill(victim, signal.SIGKILL)
    new = wait_for(lambda: [p for p in instance.worker_pids() if p not in pids], 30,
                   "the master to fork a new worker")[0]
    started = f"[{new}] INFO soloist.scheduler: scheduler started"
    wait_for(lambda: started in instance.read_log(), 30, "the new worker's scheduler to start")
    respawn = cpu(new)
    bench.stop_fleet()
    return master, booted, respawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    rows = []
    with Bench("boot") as bench:
        for n in range(args.rounds):
            log(f"round {n + 1} of {args.rounds}")
            rows.append(one_round(bench, args.workers))
    masters = [m for m, _, _ in rows]
    workers = [w for _, booted, _ in rows for w in booted]
    respawns = [r for _, _, r in rows]
    totals = [m + sum(booted) for m, booted, _ in rows]
    body = table(["process", "median CPU", "range"], [
        [name, f"{statistics.median(values):.2f} s", f"{min(values):.2f}–{max(values):.2f} s"]
        for name, values in (("master", masters), ("worker at boot", workers),
                             ("worker respawned after SIGKILL", respawns),
                             (f"instance ({args.workers} workers)", totals))])
    report("Boot cost", [(f"{args.rounds} boots of 1 instance x {args.workers} workers", body)],
           ["CPU from /proc/<pid>/stat (user + system) once settled; a respawned worker's "
            "once its scheduler started."])


if __name__ == "__main__":
    run_main(main)
