"""The replica gate's cost: delivery latency with and without waiting for a standby's replay.

A throwaway primary (synchronous commits, as production; fsync off) with a streaming
standby made by pg_basebackup -R, both on this host. For each DELIVER_AFTER_REPLICA value
(off, then auto: a standby streams, so deliveries wait for its replay) a fresh fleet of
--instances x --workers on a fresh database, one receiver subscribed to post.published,
--posts posts due over --spread s. Latency is from the post's publication (its outbox
event's created_at, the publish transaction's database time; same host, same clock) to the
receiver's first request for it. The added latency is the gated run's percentile minus the
ungated run's, measured in the same run (target: p99 added ≤ 50 ms).

    .venv/bin/python bench/replica_gate.py [--posts 200] [--spread 40] [--instances 2]
        [--workers 2] [--rounds 2]
"""

import tempfile
import time
from pathlib import Path

import psycopg
from common import fleet_parser, log, ms, percentile, report, run_main, table
from faults import Row

from tests.harness.cluster import wait_for
from tests.harness.faultkit import FaultFleet
from tests.harness.pgserver import PgServer
from tests.harness.receiver import Receiver

MODES = ("off", "auto")
SECRET = "bench-replica-gate-secret-0123"


def published_at(fleet: FaultFleet, ids: list[int]) -> dict[int, float]:
    """Return each post's publication time (its post.published event's, epoch seconds)."""
    return dict(fleet.view.query(
        "SELECT post_id, extract(epoch FROM min(created_at))::float8 FROM outbox_events "
        "WHERE topic = 'post.published' AND post_id = ANY(%s) GROUP BY post_id", (ids,)))


def latencies(receiver: Receiver, published: dict[int, float]) -> list[float]:
    """Return, per post received, seconds from its publication to its first request."""
    first: dict[int, float] = {}
    for request in receiver.received():
        post = request.post_id()
        if post in published:
            first[post] = min(first.get(post, request.at), request.at)
    return [first[p] - published[p] for p in first]


def one_run(pg: PgServer, mode: str, n: int, args) -> tuple[list[float], int, int]:
    """Run a fleet with DELIVER_AFTER_REPLICA=mode; return latencies, posts, held at most."""
    url = pg.create_database(f"soloist_gate_{mode}_{n}_{int(time.time())}")
    fleet = FaultFleet(url, args.log_dir, prefix=f"g{n}", DELIVER_AFTER_REPLICA=mode,
                       WEBHOOK_ALLOW_PRIVATE="true")
    receiver = Receiver(path="/hook").start()
    try:
        fleet.start(args.instances, args.workers)
        status, body = fleet.api("POST", "/api/webhooks", {
            "url": receiver.url, "events": ["post.published"], "secret": SECRET})
        assert status == 201, body
        ids = fleet.schedule(f"gate-{mode}", args.posts, lead=3.0, spread=args.spread)
        wait_for(lambda: len({r.post_id() for r in receiver.received()} & set(ids))
                 == len(ids), args.spread + 60, "every post at the receiver", interval=0.2)
        lsns = fleet.view.query("SELECT count(*) FILTER (WHERE replica_lsn IS NOT NULL) "
                                "FROM webhook_deliveries")[0][0]
        return latencies(receiver, published_at(fleet, ids)), len(ids), lsns
    finally:
        left = fleet.close()
        receiver.close()
        if left:
            log(f"processes left running: {left}")


def summary(values: list[float]) -> list[str]:
    return [ms(percentile(values, p) * 1000) for p in (50, 90, 99)] + [
        ms(max(values) * 1000)]


def main() -> None:
    parser = fleet_parser(__doc__, instances=2, workers=2)
    parser.add_argument("--posts", type=int, default=200)
    parser.add_argument("--spread", type=float, default=40.0)
    parser.add_argument("--rounds", type=int, default=2, help="off/auto pairs, alternated")
    args = parser.parse_args()
    args.log_dir = Path(tempfile.mkdtemp(prefix="soloist-bench-gate-logs-"))
    found: dict[str, list[float]] = {m: [] for m in MODES}
    stamped: dict[str, int] = dict.fromkeys(MODES, 0)
    with PgServer("soloist-bench-gate") as pg:
        with psycopg.connect(pg.url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_commit = on")
            conn.execute("SELECT pg_reload_conf()")
        standby = pg.replica("soloist-bench-gate-standby")
        try:
            for n in range(args.rounds):
                for mode in MODES:
                    log(f"round {n + 1}: DELIVER_AFTER_REPLICA={mode}")
                    values, _total, lsns = one_run(pg, mode, n, args)
                    found[mode] += values
                    stamped[mode] += lsns
                    log(f"  p50 {percentile(values, 50) * 1000:.0f} ms, "
                        f"p99 {percentile(values, 99) * 1000:.0f} ms")
        finally:
            standby.close()
    rows = [[f"`DELIVER_AFTER_REPLICA={m}`", len(found[m]), stamped[m], *summary(found[m])]
            for m in MODES]
    added = {p: (percentile(found["auto"], p) - percentile(found["off"], p)) * 1000
             for p in (50, 99)}
    row = Row("p99 delivery latency added by the gate, a standby attached", "≤ 50 ms")
    row.measured = f"p50 +{added[50]:.0f} ms, p99 +{added[99]:.0f} ms"
    row.met = added[99] <= 50
    report(f"Replica gate: {args.posts} posts over {args.spread:g} s, x {args.rounds} rounds, "
           f"{args.instances} x {args.workers} workers",
           [("Publication to receiver", table(
               ["gate", "deliveries", "held (stamped)", "p50", "p90", "p99", "max"], rows)),
            ("Target", table(["measure", "measured", "target", "met"], [row.cells()]))], [])


if __name__ == "__main__":
    run_main(main)
