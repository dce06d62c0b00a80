"""Long ticks are not frozen ticks: the publish leader on a database slow on every outbox insert.

Starts INSTANCES gunicorn instances x WORKERS workers with LEADER_STALE_SECONDS=--stale on
a fresh database, makes every INSERT into outbox_events take --slow s (a PL/pgSQL trigger
calling pg_sleep, FOR EACH STATEMENT: one a batch; with --each ROW, every row), then makes
--posts publications, --batch takedowns and --batch scheduled changes of live posts due at
one moment (tests/harness/slowdb.py). Polls leader_state every 50 ms for the publish key's
heartbeat age until every unit is done, then reports evictions and leadership changes,
each kind of unit done exactly once (one outbox row of its topic), the time until the last
was done, the batches (distinct tick clocks in the outbox) and the oldest heartbeat seen.

    .venv/bin/python bench/long_ticks.py [--posts 1500] [--batch 500] [--slow 0.8]
        [--each STATEMENT|ROW] [--stale 2] [--instances 2] [--workers 2]
"""

import time

from common import PUBLISH_KEY, Bench, fleet_parser, log, report, run_main, secs, table

from tests.harness.slowdb import make_due, slow_outbox, units_done_once
from tests.harness.speed import REFERENCE_LOOP, machine_speed

HEARTBEAT_AGE_SQL = """
SELECT extract(epoch FROM clock_timestamp() - heartbeat_at)::float8 FROM leader_state
WHERE key = %s AND holder_pid IS NOT NULL
"""
BATCHES_SQL = "SELECT count(DISTINCT created_at) FROM outbox_events WHERE topic LIKE 'post.%'"


def parse_args():
    parser = fleet_parser(__doc__, instances=2, workers=2)
    parser.add_argument("--posts", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=500, help="takedowns and changes each")
    parser.add_argument("--slow", type=float, default=0.8, help="seconds an outbox insert")
    parser.add_argument("--each", choices=["STATEMENT", "ROW"], default="STATEMENT")
    parser.add_argument("--stale", type=float, default=2.0, help="LEADER_STALE_SECONDS")
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds")
    return parser.parse_args()


def run(bench: Bench, args) -> dict:
    """Make every unit due on a slow database; watch until all are done once."""
    log(f"starting {args.instances} instances x {args.workers} workers, stale {args.stale} s")
    bench.start_fleet(args.instances, args.workers, LEADER_STALE_SECONDS=args.stale)
    events = bench.last_event_id()
    slow_outbox(bench.view.conn, args.slow, args.each)
    expected = (args.posts, args.batch, args.batch, args.posts + 2 * args.batch)
    started, oldest = time.monotonic(), 0.0
    make_due(bench.view.conn, args.posts, args.batch)
    while (done := units_done_once(bench.view.conn)) != expected:
        ages = bench.query(HEARTBEAT_AGE_SQL, (PUBLISH_KEY,))
        oldest = max([oldest, *(age for (age,) in ages if age is not None)])
        if time.monotonic() - started > args.deadline:
            log(f"not done before the deadline: {done} of {expected}")
            break
        time.sleep(0.05)
    took = time.monotonic() - started
    kinds = bench.query("SELECT kind, count(*) FROM leader_events WHERE id > %s GROUP BY kind",
                        (events,))
    log(f"all done in {took:.1f} s")
    return {"took": took, "done": done, "expected": expected, "oldest": oldest,
            "kinds": dict(kinds), "batches": bench.query(BATCHES_SQL)[0][0]}


def summary(result: dict, args) -> str:
    """One row: the issue's target beside what was measured."""
    evicted = result["kinds"].get("evicted", 0)
    changes = sum(result["kinds"].values())
    once = result["done"] == result["expected"]
    met = "✔" if evicted == 0 and once else "✘"
    units = args.posts + 2 * args.batch
    return table(
        ["scenario", "evictions", "leadership changes", "every unit once",
         "time to do all", "batches", "oldest heartbeat seen", "target", "met"],
        [[f"{units:,} units due ({args.posts:,} posts, {args.batch} takedowns, {args.batch} "
          f"changes), every outbox insert ({args.each.lower()}) {args.slow:g} s, stale "
          f"{args.stale:g} s", evicted, changes,
          "yes" if once else f"**no**: {result['done'][:3]} done once by then",
          secs(result["took"]) if once else f"not done in {result['took']:.0f} s",
          result["batches"], secs(result["oldest"]), "0 evictions, every post once", met]])


def main() -> None:
    args = parse_args()
    with Bench("long_ticks") as bench:
        result = run(bench, args)
    loop = machine_speed()
    report(f"Long ticks ({args.instances} instances × {args.workers} workers)",
           [("Slow outbox", summary(result, args))],
           [f"Machine speed: {REFERENCE_LOOP:,} Python additions in {loop * 1000:.0f} ms "
            "(best of 3, after the run).",
            "The oldest heartbeat is the publish key's heartbeat age seen by a 50 ms poller "
            "(a standby evicts past the stale threshold)."])


if __name__ == "__main__":
    run_main(main)
