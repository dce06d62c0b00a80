"""Scheduled changes: how late a live post's change is swapped in, and how fast a burst clears.

Starts INSTANCES gunicorn instances x WORKERS workers on a fresh database, adds CHANGES live
posts and gives each a scheduled change due evenly over SPREAD s starting LEAD s from now
(plain SQL INSERT into scheduled_changes + NOTIFY soloist_wake 'publish', as
tests/harness/faultkit.py does), waits until none is pending and reports the swap lag: the
post.updated outbox row's created_at (the publish leader's tick clock) minus apply_at. Then
BURST changes all due at the same moment. Every change must be swapped in exactly once: one
post.updated row, the new body, nothing left pending, never before apply_at.

    .venv/bin/python bench/scheduled_changes.py [--changes 300] [--spread 20] [--burst 2000]
        [--instances 2] [--workers 2]
"""

import argparse
import time

from common import Bench, fleet_parser, log, ms, percentile, report, run_main, secs, table, wait_for

from tests.harness.faultkit import INSERT_SQL, changed, schedule_changes

PENDING_SQL = "SELECT count(*) FROM scheduled_changes WHERE post_id = ANY(%s)"


def live_posts(bench: Bench, prefix: str, n: int) -> list[int]:
    """Add n published posts; return their ids."""
    rows = bench.query(INSERT_SQL, {"prefix": prefix, "n": n, "lead": -60, "spread": 0,
                                    "status": "published"})
    return [r[0] for r in rows]


def change_run(bench: Bench, prefix: str, n: int, lead: float, spread: float) -> dict:
    """Give n live posts a change due over spread s from lead s on; wait; return the outcome."""
    ids = live_posts(bench, prefix, n)
    log(f"{prefix}: {n} changes due over {spread:g} s starting in {lead:g} s")
    due = schedule_changes(bench, ids, lead, spread)
    wait_for(lambda: bench.query(PENDING_SQL, (ids,))[0][0] == 0, lead + spread + 60,
             f"every {prefix} change swapped in", interval=0.05)
    cleared = time.time()  # seen cleared, to within the 50 ms poll
    result = changed(bench, due)
    result.update(total=n, cleared=cleared - min(due.values()))
    log(f"{prefix}: none pending; p99 {percentile(result['lags'], 99) * 1000:.0f} ms")
    return result


def lag_table(run: dict, args: argparse.Namespace) -> str:
    lags = [lag * 1000 for lag in run["lags"]]
    p99 = percentile(lags, 99)
    return table(["run", "changes", "p50", "p95", "p99", "max", "target", "met"], [[
        f"{run['total']} changes over {args.spread:g} s: post.updated created_at − apply_at",
        len(lags), ms(percentile(lags, 50)), ms(percentile(lags, 95)), ms(p99), ms(max(lags)),
        "p99 ≤ 200 ms", "yes" if p99 <= 200 else "**no**"]])


def burst_table(run: dict) -> str:
    lags = run["lags"]
    return table(["changes due at once", "first swapped", "last swapped", "seen cleared",
                  "ticks (batches)"],
                 [[run["total"], secs(min(lags)), secs(max(lags)), secs(run["cleared"]),
                   len(set(lags))]])


def once_table(results: dict) -> str:
    rows = []
    for key in ("spread", "burst"):
        if key in results:
            run = results[key]
            ok = not run["not_once"] and not run["early"] and len(run["lags"]) == run["total"]
            rows.append([key, run["total"], len(run["lags"]), len(run["not_once"]),
                         len(run["early"]), "yes" if ok else "**no**"])
    return table(["run", "changes", "swapped once", "not once (rows ≠ 1, pending or old body)",
                  "early", "ok"], rows)


def parse_args() -> argparse.Namespace:
    parser = fleet_parser(__doc__, instances=2)
    parser.add_argument("--changes", type=int, default=300)
    parser.add_argument("--spread", type=float, default=20.0, help="seconds")
    parser.add_argument("--lead", type=float, default=4.0, help="seconds until the first")
    parser.add_argument("--burst", type=int, default=2000, help="0 to skip")
    parser.add_argument("--burst-lead", type=float, default=3.0)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    results: dict = {}
    try:
        with Bench("scheduled_changes") as bench:
            log(f"starting {args.instances} instances x {args.workers} workers")
            bench.start_fleet(args.instances, args.workers)
            events = bench.last_event_id()
            if args.changes:
                results["spread"] = change_run(bench, "spread", args.changes, args.lead,
                                               args.spread)
            if args.burst:
                results["burst"] = change_run(bench, "burst", args.burst, args.burst_lead, 0)
            results["leadership_changes"] = bench.query(
                "SELECT count(*) FROM leader_events WHERE id > %s", (events,))[0][0]
    finally:
        sections = []
        if "spread" in results:
            sections.append(("Swap lag", lag_table(results["spread"], args)))
        if "burst" in results:
            sections.append(("Burst", burst_table(results["burst"])))
        if sections:
            sections.append(("Exactly once", once_table(results)))
            report(f"Scheduled changes ({args.instances} instances × {args.workers} workers, "
                   "default settings)", sections,
                   ["The swap's clock is the publish leader's tick clock (the database's, "
                    "read at its last heartbeat and carried forward); 'seen cleared' is when "
                    "a 50 ms poller first saw none pending. Percentiles are nearest-rank.",
                    f"Leadership changes during the runs: "
                    f"{results.get('leadership_changes', '–')}."])


if __name__ == "__main__":
    run_main(main)
