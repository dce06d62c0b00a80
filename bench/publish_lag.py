"""Publish lag: how late posts go live after their publish_at, and how fast a burst clears.

Starts INSTANCES gunicorn instances x WORKERS workers on a fresh database, schedules POSTS
posts with publish_at uniformly random over SPREAD s starting LEAD s from now (plain SQL
INSERT + NOTIFY soloist_wake, as the editor's form does), waits until all are published and
reports lag = published_at - publish_at (the publish leader's tick clock) and the time a
10 ms poller first saw each post published (commit visible). Then BURST posts all due at the
same moment. Then the seed's loop (every 10 s: take the lock, publish_due, release) in the
same number of plain processes publishes SEED_POSTS posts spread the same way. Every post
must have exactly one 'post.published' outbox row.

    .venv/bin/python bench/publish_lag.py [--posts 500] [--burst 10000] [--seed-posts 100]
        [--plugins-off sitemap,webhooks,housekeeping]
"""

import argparse
import time

from common import (
    Bench,
    SeedFleet,
    fleet_parser,
    log,
    ms,
    percentile,
    report,
    run_main,
    secs,
    seed_label,
    table,
)

EXACTLY_ONCE_SQL = """
SELECT count(*), count(*) FILTER (WHERE status = 'published'),
       count(*) FILTER (WHERE n <> 1), max(n)
FROM (SELECT p.id, p.status, count(o.id) AS n
      FROM posts p LEFT JOIN outbox_events o ON o.post_id = p.id AND o.topic = 'post.published'
      WHERE p.id BETWEEN %s AND %s GROUP BY p.id, p.status) AS per_post
"""

PUBLISHERS_SQL = """
SELECT count(DISTINCT instance) FROM outbox_events
WHERE topic = 'post.published' AND post_id BETWEEN %s AND %s
"""

TIMES_SQL = """
SELECT id, extract(epoch FROM publish_at)::float8, extract(epoch FROM published_at)::float8
FROM posts WHERE id BETWEEN %s AND %s ORDER BY id
"""


class Observer:
    """Polls every 10 ms and remembers when it first saw each post published."""

    def __init__(self, bench: Bench, ids: list[int]) -> None:
        self.bench = bench
        self.ids = sorted(ids)
        self.seen: dict[int, float] = {}
        self.done = 0  # ids[:done] have all been seen

    def poll(self) -> bool:
        """Look once; return True when every post has been seen published."""
        before = time.time()  # the query's snapshot is taken after this instant
        rows = self.bench.query(
            "SELECT id FROM posts WHERE id > %s AND id <= %s AND status = 'published'",
            (self.ids[self.done - 1] if self.done else self.ids[0] - 1, self.ids[-1]))
        for (post_id,) in rows:
            self.seen.setdefault(post_id, before)
        while self.done < len(self.ids) and self.ids[self.done] in self.seen:
            self.done += 1
        return self.done == len(self.ids)

    def run(self, deadline: float, check=None) -> None:
        """Poll until every post is published; fail at the deadline (monotonic)."""
        while not self.poll():
            if check is not None:
                check()
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.done}/{len(self.ids)} posts published "
                                     "before the deadline")
            time.sleep(0.01)


def measure(bench: Bench, ids: list[int], deadline: float, check=None) -> dict:
    """Observe ids until all are published; return lags (ms) and the exactly-once check."""
    observer = Observer(bench, ids)
    observer.run(deadline, check)
    lo, hi = min(ids), max(ids)
    rows = bench.query(TIMES_SQL, (lo, hi))
    total, published, not_once, max_rows = bench.query(EXACTLY_ONCE_SQL, (lo, hi))[0]
    return {
        "recorded": [(done - due) * 1000 for _id, due, done in rows],
        "observed": [(observer.seen[i] - due) * 1000 for i, due, _done in rows],
        "due": [due for _id, due, _done in rows],
        "published_at": [done for _id, _due, done in rows],
        "seen": [observer.seen[i] for i, _due, _done in rows],
        "check": [total, published, not_once, max_rows,
                  bench.query(PUBLISHERS_SQL, (lo, hi))[0][0]],
    }


def spread_run(bench: Bench, prefix: str, n: int, lead: float, spread: float,
               slack: float, check=None) -> dict:
    """Schedule n posts over spread s starting lead s from now; measure their lag."""
    log(f"{prefix}: scheduling {n} posts over {spread:g} s starting in {lead:g} s")
    ids = bench.insert_posts(prefix, n, lead=lead, spread=spread)
    result = measure(bench, ids, time.monotonic() + lead + spread + slack, check)
    log(f"{prefix}: all published; p99 {percentile(result['recorded'], 99):.0f} ms")
    return result


def burst_run(bench: Bench, n: int, lead: float) -> dict:
    """Schedule n posts all due lead s from now; measure how long the backlog takes."""
    log(f"burst: scheduling {n} posts all due in {lead:g} s")
    started = time.monotonic()
    ids = bench.insert_posts("burst", n, lead=lead, spread=0)
    log(f"burst: inserted in {time.monotonic() - started:.2f} s")
    result = measure(bench, ids, time.monotonic() + lead + 120)
    due = result["due"][0]
    result["first_seen"] = min(result["seen"]) - due
    result["last_seen"] = max(result["seen"]) - due
    result["last_recorded"] = max(result["published_at"]) - due
    result["ticks"] = len(set(result["published_at"]))
    log(f"burst: last post seen published {result['last_seen']:.3f} s after publish_at")
    return result


def lag_row(label: str, approach: str, values: list[float], target: float | None) -> list:
    """One row: percentiles of a lag in ms."""
    p99 = percentile(values, 99)
    met = "–" if target is None else ("yes" if p99 <= target else "**no**")
    return [label, approach, len(values), ms(percentile(values, 50)), ms(percentile(values, 95)),
            ms(p99), ms(max(values)), f"p99 ≤ {target:g} ms" if target else "", met]


def summary(results: dict, args: argparse.Namespace) -> str:
    """Lag percentiles for every run, both approaches."""
    rows = []
    procs = args.seed_procs
    for key, approach, target in (("lag", "Soloist", 200.0),
                                  ("seed", seed_label(procs, args.seed_interval),
                                   None)):
        if key in results:
            r = results[key]
            n = len(r["recorded"])
            rows.append(lag_row(f"{n} posts over {args.spread:g} s: published_at − publish_at",
                                approach, r["recorded"], target))
            rows.append(lag_row(f"{n} posts over {args.spread:g} s: seen published − "
                                "publish_at", approach, r["observed"], None))
    if "lag" in results and "seed" in results:
        rows.append(["ratio seed / Soloist (published_at − publish_at)", "", "",
                     *(_ratio(results, p) for p in (50, 95, 99, 100)), "", ""])
    headers = ["run", "approach", "posts", "p50", "p95", "p99", "max", "target", "met"]
    return table(headers, rows)


def _ratio(results: dict, p: float) -> str:
    soloist = percentile(results["lag"]["recorded"], p)
    return f"{percentile(results['seed']['recorded'], p) / max(soloist, 0.001):.0f}×"


def burst_table(burst: dict, args: argparse.Namespace) -> str:
    """The burst: when the first and the last post went live."""
    met = "yes" if burst["last_seen"] <= 5.0 else "**no**"
    return table(
        ["posts due at once", "first seen published", "last seen published",
         "last published_at", "ticks (batches)", "target", "met"],
        [[args.burst, secs(burst["first_seen"]), secs(burst["last_seen"]),
          secs(burst["last_recorded"]), burst["ticks"], "last ≤ 5 s", met]])


def exactly_once(results: dict) -> str:
    """Every post published, each with exactly one post.published outbox row."""
    rows = []
    for key, label in (("lag", "Soloist spread"), ("burst", "Soloist burst"),
                       ("seed", "seed spread")):
        if key in results:
            total, published, not_once, max_rows, publishers = results[key]["check"]
            ok = "yes" if total == published and not not_once else "**no**"
            rows.append([label, total, published, not_once, max_rows, publishers, ok])
    return table(["run", "posts", "published", "posts without exactly one outbox row",
                  "most outbox rows for one post", "distinct publishing processes", "ok"],
                 rows)


def parse_args() -> argparse.Namespace:
    parser = fleet_parser(__doc__)
    parser.add_argument("--posts", type=int, default=500)
    parser.add_argument("--spread", type=float, default=30.0, help="seconds")
    parser.add_argument("--lead", type=float, default=5.0, help="seconds until the first")
    parser.add_argument("--burst", type=int, default=10_000, help="0 to skip")
    parser.add_argument("--burst-lead", type=float, default=3.0)
    parser.add_argument("--seed-posts", type=int, default=100, help="0 to skip")
    parser.add_argument("--seed-interval", type=float, default=10.0)
    parser.add_argument("--seed-procs", type=int, default=None,
                        help="seed worker processes (default: instances x workers)")
    parser.add_argument("--plugins-off", default="",
                        help="comma-separated plugins to switch off first, e.g. "
                             "sitemap,webhooks,housekeeping (default: none, as shipped)")
    args = parser.parse_args()
    args.seed_procs = args.seed_procs or args.instances * args.workers
    return args


def run(bench: Bench, args: argparse.Namespace, results: dict) -> None:
    log(f"starting {args.instances} instances x {args.workers} workers")
    bench.disable_plugins(filter(None, args.plugins_off.split(",")))
    bench.start_fleet(args.instances, args.workers)
    log(f"fleet ready; database clock offset {bench.clock_offset() * 1000:+.2f} ms")
    events = bench.last_event_id()
    if args.posts:
        results["lag"] = spread_run(bench, "lag", args.posts, args.lead, args.spread, 30)
    if args.burst:
        results["burst"] = burst_run(bench, args.burst, args.burst_lead)
    changes = bench.query("SELECT count(*) FROM leader_events WHERE id > %s", (events,))[0][0]
    results["leadership_changes"] = changes
    bench.stop_fleet()  # the seed's workers must not compete with Soloist's leaders
    if args.seed_posts:
        fleet = SeedFleet(bench, args.seed_interval, publish=True)
        log(f"seed: starting {args.seed_procs} seed workers")
        fleet.start(args.seed_procs)
        results["seed"] = spread_run(bench, "seed", args.seed_posts, args.lead, args.spread,
                                     args.seed_interval + 30, check=fleet.check_alive)
        fleet.stop()


def main() -> None:
    args = parse_args()
    results: dict = {}
    try:
        with Bench("publish_lag") as bench:
            run(bench, args, results)
    finally:
        sections = []
        if "lag" in results or "seed" in results:
            sections.append(("Lag", summary(results, args)))
        if "burst" in results:
            sections.append(("Burst", burst_table(results["burst"], args)))
        if sections:
            sections.append(("Exactly once", exactly_once(results)))
            report(f"Publish lag ({args.instances} instances × {args.workers} workers, "
                   f"default settings, plugins off: {args.plugins_off or 'none'})", sections,
                   ["published_at is the publish leader's tick clock (database now() just "
                    "before the UPDATE); 'seen published' is when a 10 ms poller first saw "
                    "the committed row. Percentiles are nearest-rank.",
                    f"Leadership changes during the Soloist runs: "
                    f"{results.get('leadership_changes', '–')}."])


if __name__ == "__main__":
    run_main(main)
