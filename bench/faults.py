"""Faults: what a frozen host, web load, a database restart, SIGTERM and chaos do to publishing.

Every row starts its own fleet (INSTANCES gunicorn instances x WORKERS workers, each
instance in a process group of its own, like a host) on a fresh database of one throwaway
PostgreSQL server (tests/pgserver.py: initdb in a temporary directory, run as the
`postgres` user, restarted at will; the shared server is never touched but to read its
version), and prints the measured value beside the issue's target:

- freeze: BURST posts all due at one moment; as soon as the publish leader is publishing
  them (its transaction holds their row locks, seen with pgrowlocks), SIGSTOP its whole
  instance (master and workers). Time from the freeze until every post is published, while
  the host stays frozen (waited for up to --freeze-wait s); then SIGCONT.
- load: --load-seconds of GETs (--load-processes x --load-connections keep-alive
  connections; public pages and the JSON API) to the publish leader's instance while a post
  falls due every 0.5 s. Leadership changes (leader_events) and publish lag.
- restart: the server is stopped (fast) and started again after each of --downtimes s,
  with a post falling due during the outage. Time from the server accepting connections
  until both keys are held again by live workers (pg_locks, polled every 50 ms).
- term: --term-trials times, a 20 s slow upload is opened to the publish leader's worker,
  then its instance's master gets SIGTERM. Time from the signal to the 'acquired' event
  (database clock, same host) of a standby on another instance, and whether the upload
  was still running then.
- chaos: --chaos-seconds of random faults every ~2 s plus one database restart
  (tests/chaos.py), a local webhook receiver failing 15 % of requests; then every post must
  be published once, never early, received under one delivery id (waiting up to
  --receipt-wait s after the run, asking the webhooks `deliver` timer to run now).

    .venv/bin/python bench/faults.py [--only freeze,load,restart,term,chaos]
        [--burst 1500] [--load-seconds 60] [--downtimes 1,3,10] [--term-trials 5]
        [--chaos-seconds 90] [--receipt-wait 90] [--seed N]
"""

import argparse
import shutil
import signal
import tempfile
import time
from pathlib import Path

from common import log, percentile, report, run_main, table

from tests.chaos import FLEET_ENV, SECRET, Chaos
from tests.cluster import PLUGINS_KEY, PUBLISH_KEY, wait_for
from tests.faultkit import FaultFleet
from tests.pgserver import PgServer
from tests.scenarios import (
    freeze_when_burst_starts,
    handover_after,
    keys_led_by_workers,
    load_paths,
    open_transactions,
    p99,
    upload_to,
)
from tests.traffic import WebhookReceiver, WebLoad

ROWS = ("freeze", "load", "restart", "term", "chaos")


class Row:
    """One line of the table: the fault, what was measured, the target, pass or fail."""

    def __init__(self, fault: str, target: str) -> None:
        self.fault, self.target = fault, target
        self.measured, self.met, self.notes = "–", False, []

    def cells(self) -> list[str]:
        return [self.fault, self.measured, self.target, "pass" if self.met else "**FAIL**"]


def fleet_for(pg: PgServer, name: str, args: argparse.Namespace, **env: str) -> FaultFleet:
    """A fresh database on pg, migrated, with an admin; its instances are started later."""
    url = pg.create_database(f"soloist_{name}_{int(time.time())}")
    return FaultFleet(url, args.log_dir, prefix=name[0], **env)


def _close(fleet: FaultFleet, row: Row) -> None:
    left = fleet.close()
    if left:
        row.met = False
        row.notes.append(f"processes left running: {left}")


# --- freeze ----------------------------------------------------------------------------------

def freeze_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row(f"host frozen mid-burst of {args.burst:,} due posts",
              "every post published ≤ 15 s after the freeze, while the host stays frozen")
    fleet = fleet_for(pg, "freeze", args)
    try:
        fleet.start(args.instances, args.workers)
        host, _pid = fleet.leader(PUBLISH_KEY)
        ids = fleet.schedule("burst", args.burst, lead=3.0)
        freeze = freeze_when_burst_starts(fleet, host, ids)
        log(f"froze {host.name} with {freeze['published']} published; open: {freeze['open']}")
        try:
            took = _all_published_within(fleet, ids, freeze["at"], args.freeze_wait)
            frozen_count = fleet.published(ids)
        finally:
            thawed = host.group_signal(signal.SIGCONT)
        after = _all_published_within(fleet, ids, thawed, 120)
        fleet.wait_settled(90)
        wait_for(lambda: not open_transactions(fleet, host), 30, "the thawed host to finish")
        outcome = fleet.outcome(ids)
        if took is not None:
            row.measured = f"all published {took:.1f} s after the freeze"
        else:
            row.measured = (f"{frozen_count:,}/{len(ids):,} published after {args.freeze_wait:g} s"
                            f" frozen; the rest {after:.1f} s after SIGCONT")
        row.met = took is not None and took <= 15 and outcome.ok
        row.notes += [f"freeze: {freeze['published']} published before it; the host's open "
                      f"transactions then: {freeze['open'] or 'none'}", f"outcome: {outcome}"]
    finally:
        _close(fleet, row)
    return row


def _all_published_within(fleet: FaultFleet, ids: list[int], since: float,
                          seconds: float) -> float | None:
    """Wait until every post of ids is published; return seconds since since, or None."""
    try:
        wait_for(lambda: fleet.published(ids) == len(ids), since + seconds - time.time(),
                 "every post to be published", interval=0.05)
    except AssertionError:
        return None
    return time.time() - since


# --- web load --------------------------------------------------------------------------------

def load_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row(f"{args.load_seconds:g} s of web load ({args.load_processes} processes × "
              f"{args.load_connections} connections) on the leader's instance",
              "0 leadership changes; publish lag p99 ≤ 1 s")
    fleet = fleet_for(pg, "load", args)
    try:
        fleet.start(args.instances, args.workers)
        host, _pid = fleet.leader(PUBLISH_KEY)
        paths = load_paths(fleet, 50)
        first = fleet.last_event_id()
        ids = fleet.schedule("load", int(args.load_seconds * 2), lead=2.0,
                             spread=max(args.load_seconds - 4, 1))
        load = WebLoad(host.port, paths, args.load_seconds, args.load_processes,
                       args.load_connections).start()
        try:
            result = load.join()
        finally:
            load.stop()
        _all_published_within(fleet, ids, time.time(), 30)
        outcome, changes = fleet.outcome(ids), fleet.events_since(first)
        lag = p99(outcome.lags)
        row.measured = f"{len(changes)} leadership changes; publish lag p99 {lag * 1000:.0f} ms"
        row.met = not changes and lag <= 1.0 and outcome.ok
        row.notes += [f"load: {result.requests:,} answers ({result.rate:.0f} req/s), statuses "
                      f"{dict(result.statuses)}, {result.errors} errors, latency p50 "
                      f"{percentile(result.latencies, 50) * 1000:.0f} ms, p99 "
                      f"{percentile(result.latencies, 99) * 1000:.0f} ms",
                      f"outcome: {outcome}", f"leadership events: {changes[:6]}"]
    finally:
        _close(fleet, row)
    return row


# --- database restart ---------------------------------------------------------------------------

def restart_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row("PostgreSQL restart", "both keys led again ≤ 5 s after it accepts connections")
    fleet = fleet_for(pg, "restart", args)
    times, ok = [], True
    try:
        fleet.start(args.instances, args.workers)
        for downtime in args.downtimes:
            took, trial_ok = _restart_trial(fleet, pg, downtime, row)
            times.append(took)
            ok = ok and trial_ok
        row.measured = f"max {max(times):.2f} s (" + ", ".join(
            f"down {d:g} s → {t:.2f} s" for d, t in zip(args.downtimes, times, strict=True)) + ")"
        row.met = ok and max(times) <= 5.0
    finally:
        _close(fleet, row)
    return row


def _restart_trial(fleet: FaultFleet, pg: PgServer, downtime: float,
                   row: Row) -> tuple[float, bool]:
    fleet.wait_settled(90)
    workers = sorted(fleet.worker_pids())
    ids = fleet.schedule(f"outage{downtime:g}", 1, lead=downtime / 2)
    accepting = pg.restart(downtime=downtime)
    wait_for(lambda: fleet.view.quiet(keys_led_by_workers, fleet), 120,
             "both keys to be led again", interval=0.05)
    took = time.time() - accepting
    _all_published_within(fleet, ids, time.time(), 30)
    fleet.wait_settled(90)
    outcome = fleet.outcome(ids)
    same = sorted(fleet.worker_pids()) == workers
    log(f"restart after {downtime:g} s down: both keys led {took:.2f} s after accepting")
    row.notes.append(f"down {downtime:g} s: keys led {took:.2f} s after accepting; the post "
                     f"due in the outage: {outcome}; worker pids unchanged: {same}")
    return took, outcome.ok and same


# --- SIGTERM with a long request ------------------------------------------------------------------

def term_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row("SIGTERM with a 20 s request in flight", "handover p95 ≤ 0.5 s")
    fleet = fleet_for(pg, "term", args)
    times, running = [], []
    try:
        fleet.start(args.instances, args.workers)
        for trial in range(args.term_trials):
            took, still = _term_trial(fleet, args)
            times.append(took)
            running.append(still)
            log(f"SIGTERM trial {trial + 1}: handover {took:.3f} s, request still running: "
                f"{still}")
        p95 = percentile(times, 95)
        row.measured = f"p95 {p95:.3f} s ({', '.join(f'{t:.3f}' for t in times)})"
        row.met = p95 <= 0.5 and all(running)
        row.notes.append(f"the 20 s request was still running at the handover in "
                         f"{sum(running)}/{len(running)} trials")
    finally:
        _close(fleet, row)
    return row


def _term_trial(fleet: FaultFleet, args: argparse.Namespace) -> tuple[float, bool]:
    while len(fleet.instances) < args.instances:
        fleet.spawn(args.workers)
    fleet.wait_settled(90)
    host, pid = fleet.leader(PUBLISH_KEY)
    upload = upload_to(fleet, host, pid, seconds=20)
    first = fleet.last_event_id()
    fleet.retire(host)
    try:
        sent = time.time()
        host.signal(signal.SIGTERM)
        took = wait_for(lambda: handover_after(fleet, first, host, sent), 40,
                        "a standby on another instance to take the publish key", interval=0.02)
        still = upload.running
        if host.owns(fleet.view.holder(PLUGINS_KEY)):
            wait_for(lambda: not host.owns(fleet.view.holder(PLUGINS_KEY)), 40, "plugins key")
    finally:
        upload.close()
        host.stop()
    return took, still


# --- chaos --------------------------------------------------------------------------------------

def chaos_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row(f"chaos, {args.chaos_seconds:g} s, a fault every 2 s plus one database restart",
              "0 missing, 0 early, 0 posts with two delivery ids; publish lag p99 ≤ 12 s")
    fleet = fleet_for(pg, "chaos", args, **FLEET_ENV)
    receiver = WebhookReceiver(SECRET, fail_rate=0.15, seed=args.seed).start()
    try:
        fleet.start(args.instances, args.workers)
        chaos = Chaos(fleet, pg, receiver, args.seed, args.instances, args.workers)
        chaos.report.instances = args.instances
        rep = chaos.run(args.chaos_seconds, receipt_wait=args.receipt_wait, log=log)
    finally:
        fleet.close()
        receiver.close()
    out = rep.outcome
    missing = len(set(out.missing) | set(rep.not_received))
    lag = p99(out.lags)
    row.measured = (f"{missing} missing ({len(out.missing)} unpublished, {len(rep.not_received)}"
                    f" not received), {len(out.early)} early, {len(rep.two_ids)} with two "
                    f"delivery ids; publish lag p99 {lag:.1f} s")
    row.met = (not missing and not out.early and not out.not_once and not rep.two_ids
               and not rep.leftovers and lag <= 12)
    row.notes += [line for line in str(rep).splitlines()[:7]]
    row.notes.append(f"first receipt after publish_at: p99 {p99(rep.receipt_lags):.1f} s, "
                     f"max {max(rep.receipt_lags, default=float('nan')):.1f} s")
    return row


# --- main ----------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(ROWS), help="comma-separated rows")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per instance")
    parser.add_argument("--burst", type=int, default=1500)
    parser.add_argument("--freeze-wait", type=float, default=45.0)
    parser.add_argument("--load-seconds", type=float, default=60.0)
    parser.add_argument("--load-processes", type=int, default=4)
    parser.add_argument("--load-connections", type=int, default=16)
    parser.add_argument("--downtimes", default="1,3,10", help="seconds, comma-separated")
    parser.add_argument("--term-trials", type=int, default=5)
    parser.add_argument("--chaos-seconds", type=float, default=90.0)
    parser.add_argument("--receipt-wait", type=float, default=90.0,
                        help="s to wait for webhooks after the run (a dead sender's claim "
                             "is retaken after WEBHOOK_TIMEOUT_SECONDS + 60 s)")
    parser.add_argument("--seed", type=int, default=None, help="chaos seed (default: random)")
    args = parser.parse_args()
    args.only = [r for r in args.only.split(",") if r]
    unknown = set(args.only) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(ROWS)}")
    args.downtimes = [float(d) for d in args.downtimes.split(",")]
    if args.seed is None:
        args.seed = int(time.time()) % 100_000
    return args


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_rows(name: str, runners: dict, args: argparse.Namespace, title: str,
             first: str, header: str = "") -> None:
    """Run the rows args.only names on a throwaway server; report them as one table.

    The instance logs are removed when every row passes and kept otherwise.
    """
    signal.signal(signal.SIGTERM, _interrupt)  # clean up (fleet, server) as on Ctrl-C
    args.log_dir = Path(tempfile.mkdtemp(prefix=f"soloist-bench-{name}-logs-"))
    rows: list[Row] = []
    try:
        with PgServer(f"soloist-bench-{name}") as pg:
            log(f"{header}throwaway PostgreSQL on port {pg.port}; logs in {args.log_dir}")
            for row_name in args.only:
                log(f"row {row_name}")
                rows.append(runners[row_name](pg, args))
                log(f"row {row_name}: {rows[-1].measured}")
        if all(row.met for row in rows):
            shutil.rmtree(args.log_dir, ignore_errors=True)
        else:
            log(f"instance logs kept in {args.log_dir}")
    finally:
        if rows:
            report(title, [("Summary", table([first, "measured", "target", "met"],
                                             [r.cells() for r in rows]))],
                   [f"{r.fault}: {note}" for r in rows for note in r.notes])


def main() -> None:
    args = parse_args()
    runners = {"freeze": freeze_row, "load": load_row, "restart": restart_row,
               "term": term_row, "chaos": chaos_row}
    run_rows("faults", runners, args, f"Faults ({args.instances} instances × {args.workers} "
             f"workers, default settings, chaos seed {args.seed})", "fault")


if __name__ == "__main__":
    run_main(main)
