"""Releases: how late a release of 1,000 posts goes live after its time, and that it goes whole.

Starts INSTANCES gunicorn instances x WORKERS workers on a fresh database, adds RELEASES
releases of ITEMS drafts each (plain SQL into releases, release_items and posts + NOTIFY
soloist_wake 'publish', as tests/harness/faultkit.py does), due GAP s apart starting LEAD s
from now, and waits until none is left to go. The lag is the release's published_at (the
publish leader's tick clock, the database's) minus release_at; "seen live" is when a 20 ms
poller on another connection first saw every post of it published, minus release_at (wall
clock: it includes the poll). Every release must go once and whole: one release.published
row, every post published at the release's published_at with one post.published row,
never before its time.

    .venv/bin/python bench/releases.py [--releases 5] [--items 1000] [--gap 4] [--lead 4]
        [--instances 2] [--workers 2]
"""

import argparse
import time

from common import Bench, fleet_parser, log, ms, percentile, report, run_main, table, wait_for

from tests.harness.faultkit import released, schedule_releases
from tests.harness.speed import REFERENCE_LOOP, machine_speed

DUE_SQL = "SELECT id, extract(epoch FROM release_at)::float8 FROM releases WHERE id = ANY(%s)"
LIVE_SQL = """
SELECT r.id FROM releases r WHERE r.id = ANY(%s) AND NOT EXISTS (
  SELECT 1 FROM release_items i JOIN posts p ON p.id = i.post_id
  WHERE i.release_id = r.id AND p.status <> 'published')
"""


def run(bench: Bench, args: argparse.Namespace) -> dict:
    """Schedule the releases, watch them go live, return what happened."""
    ids = schedule_releases(bench, "bench", args.releases, args.items, args.lead,
                            args.gap * (args.releases - 1))
    due = dict(bench.query(DUE_SQL, (ids,)))
    log(f"{len(ids)} releases of {args.items} posts, {args.gap:g} s apart from {args.lead:g} s")
    seen: dict[int, float] = {}

    def all_live() -> bool:
        now = time.time()
        for rid, in bench.query(LIVE_SQL, (ids,)):
            seen.setdefault(rid, now)
        return len(seen) == len(ids)

    wait_for(all_live, args.lead + args.gap * args.releases + 60, "every release live",
             interval=0.02)
    result = released(bench, ids)
    result["seen"] = [seen[rid] - due[rid] for rid in ids]
    result["total"] = len(ids)
    return result


def lag_table(result: dict, args: argparse.Namespace) -> str:
    lags = [lag * 1000 for lag in result["lags"]]
    seen = [lag * 1000 for lag in result["seen"]]
    worst = max(seen) if seen else float("inf")
    return table(["measure", "releases", "p50", "max", "target", "met"], [
        [f"release of {args.items} posts: published_at − release_at (in one transaction)",
         len(lags), ms(percentile(lags, 50)), ms(max(lags)) if lags else "–", "", ""],
        [f"release of {args.items} posts: every post seen published − release_at", len(seen),
         ms(percentile(seen, 50)), ms(worst), "≤ 1 s", "yes" if worst <= 1000 else "**no**"]])


def once_table(result: dict) -> str:
    ok = not result["not_once"] and not result["early"] and len(result["lags"]) == result["total"]
    return table(["releases", "went once and whole", "not once or not whole", "early", "ok"],
                 [[result["total"], len(result["lags"]), len(result["not_once"]),
                   len(result["early"]), "yes" if ok else "**no**"]])


def parse_args() -> argparse.Namespace:
    parser = fleet_parser(__doc__, instances=2)
    parser.add_argument("--releases", type=int, default=5)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--gap", type=float, default=4.0, help="seconds between releases")
    parser.add_argument("--lead", type=float, default=4.0, help="seconds until the first")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    result: dict = {}
    try:
        with Bench("releases") as bench:
            log(f"starting {args.instances} instances x {args.workers} workers")
            bench.start_fleet(args.instances, args.workers)
            events = bench.last_event_id()
            result = run(bench, args)
            result["leadership_changes"] = bench.query(
                "SELECT count(*) FROM leader_events WHERE id > %s", (events,))[0][0]
    finally:
        if result:
            loop = machine_speed()
            report(f"Releases ({args.instances} instances × {args.workers} workers, default "
                   "settings)", [("Lag", lag_table(result, args)),
                                 ("Once and whole", once_table(result))],
                   ["published_at is the publish leader's tick clock (the database's); 'seen' "
                    "is a 20 ms poller's wall clock on another connection. Percentiles are "
                    "nearest-rank.",
                    f"Leadership changes during the run: {result['leadership_changes']}.",
                    f"Machine speed: {REFERENCE_LOOP:,} Python additions in "
                    f"{loop * 1000:.0f} ms (best of 3, after the run)."])


if __name__ == "__main__":
    run_main(main)
