"""Silent holder: a key held by a session that never records a heartbeat, and its takeover.

A plain session (named like a Soloist lock session) takes the publish key on a fresh
database; one gunicorn instance x WORKERS workers starts with LEADER_STALE_SECONDS =
--stale and leads the plugins key. The session runs a statement every 0.2 s until then
(so it is not judged during the boot), runs one last statement, and falls silent. Time
from that statement until the instance holds the publish key (pg_locks, polled every
10 ms; and on the database clock, from the session's state_change to the instance's
"acquired" event), and the alerts written (ops.leader_evicted and ops.no_leader rows).
Repeated --trials times, a fresh instance each. Then the cost of the follower's poll
statement (both keys held by another session), now and as it was before it judged
holders by their sessions (d6bc362: the heartbeat by key alone), 500 of each, alternated.

    .venv/bin/python bench/silent_holder.py [--trials 5] [--stale 2] [--workers 2]
"""

import argparse
import time

import psycopg
from common import PLUGINS_KEY, PUBLISH_KEY, Bench, log, report, run_main, table, wait_for

from tests.harness.cluster import Instance
from webapp.leadership.pg_sql import POLL_SQL

STATE_CHANGE_SQL = ("SELECT extract(epoch FROM state_change)::float8 FROM pg_stat_activity "
                    "WHERE pid = %s")
ACQUIRED_SQL = ("SELECT extract(epoch FROM max(at))::float8 FROM leader_events "
                "WHERE key = %s AND kind = 'acquired' AND holder LIKE %s")
ALERTS_SQL = ("SELECT count(*) FILTER (WHERE topic = 'ops.leader_evicted' "
              "AND payload->>'holder' = %s), count(*) FILTER (WHERE topic = 'ops.no_leader') "
              "FROM outbox_events")


# the poll before d6bc362's successor: a NULL heartbeat read as "fresh"
POLL_BEFORE_SQL = """
SELECT k.key, pg_try_advisory_lock(k.key),
       extract(epoch FROM now() - s.heartbeat_at)::float8, coalesce(s.term, 0)
FROM unnest(%s::bigint[]) AS k(key) LEFT JOIN leader_state s ON s.key = k.key
"""


def poll_cost(url: str, rounds: int = 500) -> dict[str, float]:
    """Return the mean seconds of one poll statement, now and before, in the same run."""
    keys = [PUBLISH_KEY, PLUGINS_KEY]
    spent = {"before": 0.0, "now": 0.0}
    with psycopg.connect(url, autocommit=True, application_name="soloist:held:1:costxx") as held, \
            psycopg.connect(url, autocommit=True) as poller:
        held.execute("SELECT pg_advisory_lock(%s), pg_advisory_lock(%s)", keys)
        for n in range(2 * rounds + 100):
            name = "now" if n % 2 else "before"
            started = time.perf_counter()
            poller.execute(POLL_SQL if name == "now" else POLL_BEFORE_SQL, (keys,)).fetchall()
            if n >= 100:  # warmed up
                spent[name] += time.perf_counter() - started
    return {name: total / rounds for name, total in spent.items()}


def loop_seconds() -> float:
    """Return the time of 1,000,000 Python additions (the suite's machine-speed yardstick)."""
    started, total = time.perf_counter(), 0
    for i in range(1_000_000):
        total += i
    return time.perf_counter() - started


def one_trial(bench: Bench, n: int, stale: float, workers: int) -> tuple[float, float, int, int]:
    """Hold the key silently, start an instance, time its takeover; return what was seen."""
    name = f"soloist:ghost{n}:4242:silentxx"
    ghost = psycopg.connect(bench.url, autocommit=True, application_name=name)
    ghost.execute("SELECT pg_advisory_lock(%s)", (PUBLISH_KEY,))
    instance = Instance(f"judge{n}", bench.url, workers=workers, log_dir=bench.log_dir,
                        LEADER_STALE_SECONDS=str(stale)).start()
    bench.instances.append(instance)

    def up() -> bool:
        ghost.execute("SELECT 1")
        return instance.owns(bench.view.holder(PLUGINS_KEY))

    wait_for(up, 60, "the instance to lead the plugins key", interval=0.2)
    ghost.execute("SELECT 1")
    silent_since = time.monotonic()
    [(quiet_at,)] = bench.query(STATE_CHANGE_SQL, (ghost.info.backend_pid,))
    wait_for(lambda: instance.owns(bench.view.holder(PUBLISH_KEY)), stale + 30,
             "the instance to take the publish key", interval=0.01)
    taken = time.monotonic() - silent_since
    mine = f"soloist:{instance.name}:%"
    acquired = wait_for(lambda: bench.query(ACQUIRED_SQL, (PUBLISH_KEY, mine))[0][0], 10,
                        "the instance's acquired event")
    evicted, no_leader = bench.query(ALERTS_SQL, (name,))[0]
    bench.stop_fleet()
    ghost.close()
    return taken, acquired - quiet_at, evicted, no_leader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--stale", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    rows = []
    with Bench("silent") as bench:
        for n in range(args.trials):
            log(f"trial {n + 1} of {args.trials}")
            rows.append(one_trial(bench, n, args.stale, args.workers))
        cost = poll_cost(bench.url)
    loop = loop_seconds()
    taken = [r[0] for r in rows]
    by_db = [r[1] for r in rows]
    alerts = sorted({(r[2], r[3]) for r in rows})
    target = args.stale + 2.0
    ok = "✔" if max(taken) <= target and alerts == [(1, 0)] else "✘"
    body = table(["measure", "min", "max", "target"], [
        ["silent → taken over (pg_locks, client clock)", f"{min(taken):.2f} s",
         f"{max(taken):.2f} s", f"≤ {target:g} s {ok}"],
        ["silent → acquired (database clock)", f"{min(by_db):.2f} s", f"{max(by_db):.2f} s", ""],
        ["beyond the stale bound ÷ the poll period (`FOLLOWER_POLL_SECONDS` 1 s)",
         f"{min(taken) - args.stale:.2f}", f"{max(taken) - args.stale:.2f}", "≤ 2"],
        ["alerts per trial (ops.leader_evicted, ops.no_leader)",
         ", ".join(f"({e}, {n})" for e, n in alerts), "", "(1, 0)"],
    ])
    polls = table(["poll statement", "before (heartbeat by key)", "now (the one rule)",
                   "ratio"],
                  [["mean of 500, both keys held by another session",
                    f"{cost['before'] * 1000:.2f} ms", f"{cost['now'] * 1000:.2f} ms",
                    f"{cost['now'] / cost['before']:.1f}×"]])
    report("Silent holder", [(f"{args.trials} trials, 1 instance x {args.workers} workers, "
                              f"`LEADER_STALE_SECONDS` {args.stale:g}", body),
                             ("The follower's poll", polls)],
           [f"machine speed: 1,000,000 Python additions in {loop * 1000:.0f} ms"])


if __name__ == "__main__":
    run_main(main)
