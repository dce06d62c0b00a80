"""Follower cost: what an idle fleet asks of PostgreSQL, per process.

Starts INSTANCES gunicorn instances x WORKERS workers on a fresh database, lets them settle,
then watches SECONDS s of idleness from a connection to the admin database (so the watcher's
own queries are not counted in the fleet's database):

- per process: every backend's pg_stat_activity.query_start, sampled every ~5 ms; each new
  value is one statement (exact for statements more than a sample apart, such as a
  follower's polls; a lower bound for a leader's bursts of statements in one tick), and the
  connections it holds, by application_name prefix: `soloist:` = the lock connection,
  `soloist-web:` = the SQLAlchemy pool;
- for the whole database: the pg_stat_database xact_commit + xact_rollback delta (every
  autocommit statement on a lock connection is one transaction);
- per statement text: pg_stat_statements, when the server preloads it.

    .venv/bin/python bench/follower_cost.py [--seconds 30]
"""

import argparse
import time
from collections import defaultdict

import psycopg
from common import ADMIN_URL, PLUGINS_KEY, PUBLISH_KEY, Bench, log, report, table, wait_for

SAMPLE_SQL = """
SELECT pid, application_name, extract(epoch FROM query_start)::float8
FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'
"""

XACTS_SQL = """
SELECT xact_commit + xact_rollback, extract(epoch FROM clock_timestamp())::float8
FROM pg_stat_database WHERE datname = %s
"""

HOLDERS_SQL = """
SELECT ((l.classid::bigint << 32) | l.objid::bigint), a.application_name
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = %s)
"""

SETTLED_SQL = """
SELECT count(*) FILTER (WHERE application_name LIKE 'soloist:%%'),
       bool_and(now() - backend_start > make_interval(secs => %s))
FROM pg_stat_activity WHERE datname = %s AND application_name LIKE 'soloist%%'
"""

PSS_SQL = """
SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 70)
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = %s)
  AND query NOT IN ('SELECT pg_stat_statements_reset()', 'SELECT pg_backend_pid()')
ORDER BY calls DESC LIMIT 12
"""


class Watch:
    """Samples pg_stat_activity for one database and counts statements per backend."""

    def __init__(self, admin: psycopg.Connection, dbname: str) -> None:
        self.admin = admin
        self.dbname = dbname
        self.starts: dict[int, set[float]] = defaultdict(set)  # backend pid -> query_starts
        self.names: dict[int, str] = {}  # backend pid -> application_name
        self.samples = 0

    def sample(self, since: float) -> None:
        """Record each backend's latest statement start, if it falls in the window."""
        for pid, name, started in self.admin.execute(SAMPLE_SQL, (self.dbname,)).fetchall():
            self.names[pid] = name
            if started is not None and started >= since:
                self.starts[pid].add(started)
        self.samples += 1

    def xacts(self) -> tuple[int, float]:
        """Return the database's committed + rolled back transactions, and when."""
        return self.admin.execute(XACTS_SQL, (self.dbname,)).fetchone()

    def holders(self) -> dict[int, str]:
        """Return {key: application_name} of the advisory locks held in the database."""
        return dict(self.admin.execute(HOLDERS_SQL, (self.dbname,)).fetchall())


def per_process(watch: Watch, seconds: float, roles: dict[str, str]) -> list[dict]:
    """Group the watched backends by OS process (the pid in application_name)."""
    procs: dict[str, dict] = {}
    for backend, name in watch.names.items():
        if not name.startswith("soloist"):
            continue
        kind, instance, pid = name.split(":")
        proc = procs.setdefault(pid, {"instance": instance, "pid": int(pid), "lock": 0,
                                      "pool": 0, "lock_stmts": 0, "pool_stmts": 0})
        field = "lock" if kind == "soloist" else "pool"
        proc[field] += 1
        proc[f"{field}_stmts"] += len(watch.starts.get(backend, ()))
    for proc in procs.values():
        proc["role"] = roles.get(str(proc["pid"]), "follower")
        proc["lock_rate"] = proc["lock_stmts"] / seconds
        proc["pool_rate"] = proc["pool_stmts"] / seconds
    return sorted(procs.values(), key=lambda p: (p["instance"], p["pid"]))


def role_names(holders: dict[int, str]) -> dict[str, str]:
    """Return {os pid: 'leader (publish, plugins)'} for the processes that hold keys."""
    names = {PUBLISH_KEY: "publish", PLUGINS_KEY: "plugins"}
    roles: dict[str, list[str]] = defaultdict(list)
    for key, app in sorted(holders.items()):
        roles[app.rsplit(":", 1)[1]].append(names.get(key, hex(key)))
    return {pid: f"leader ({', '.join(keys)})" for pid, keys in roles.items()}


def pss_available(bench: Bench) -> bool:
    """Create pg_stat_statements in the benchmark database if the server preloads it."""
    preload = bench.query("SELECT current_setting('shared_preload_libraries')")[0][0]
    if "pg_stat_statements" not in preload:
        return False
    bench.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return True


def pss_table(url: str, dbname: str, since: float) -> str:
    """Calls per second of the most frequent statements since the reset at `since`."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(PSS_SQL, (dbname,)).fetchall()
    now = time.time()
    return table(["calls/s", "statement"],
                 [[f"{calls / (now - since):.2f}", f"`{text}`"] for calls, text in rows])


def watch_window(bench: Bench, admin: psycopg.Connection, seconds: float, pss: bool) -> dict:
    """Close our own connection to the database, then sample for `seconds`."""
    dbname = bench.url.rsplit("/", 1)[1]
    own = bench.query("SELECT pg_backend_pid()")[0][0]
    reset = admin.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]
    if pss:
        bench.execute("SELECT pg_stat_statements_reset()")
    bench.view.close()
    bench.view = None
    wait_for(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                       (own,)).fetchall(), 10, "our own session to end")
    watch = Watch(admin, dbname)
    roles_before = watch.holders()
    x0, t0 = watch.xacts()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        watch.sample(t0)
        time.sleep(0.005)
    x1, t1 = watch.xacts()
    watch.sample(t0)
    roles_after = watch.holders()
    return {"watch": watch, "xacts": x1 - x0, "seconds": t1 - t0, "roles": roles_before,
            "stable": roles_before == roles_after, "reset": reset}


def summary(res: dict, procs: list[dict], poll: float) -> str:
    """The headline numbers against the targets."""
    followers = [p for p in procs if p["role"] == "follower"]
    leaders = [p for p in procs if p["role"] != "follower"]
    seconds = res["seconds"]
    follower_stmts = sum(p["lock_stmts"] + p["pool_stmts"] for p in followers)
    f_rates = [p["lock_rate"] + p["pool_rate"] for p in followers]
    l_rates = [p["lock_rate"] + p["pool_rate"] for p in leaders]
    total_rate = res["xacts"] / seconds
    leader_xacts = (res["xacts"] - follower_stmts) / seconds / max(len(leaders), 1)
    most = 1.25 / poll  # one statement per poll; polls are jittered 0.8-1.2 x the interval
    lock_conns = sorted({p["lock"] for p in procs})
    rows = [
        ["statements/s per follower (mean; min–max)",
         f"{sum(f_rates) / len(f_rates):.2f}; {min(f_rates):.2f}–{max(f_rates):.2f}",
         f"≤ 1 per poll (≈ {1 / poll:g}/s)", "yes" if max(f_rates) <= most else "**no**"],
        ["statements/s per leader, sampled (lock + pool connection)",
         ", ".join(f"{r:.2f}" for r in l_rates), "", ""],
        ["transactions/s, whole database (pg_stat_database)", f"{total_rate:.2f}", "", ""],
        ["transactions/s per leader (database total − followers' statements)",
         f"{leader_xacts:.2f}", "", ""],
        ["lock connections per process", " / ".join(str(c) for c in lock_conns), "exactly 1",
         "yes" if lock_conns == [1] else "**no**"],
        ["pool connections per follower / per leader",
         f"{max((p['pool'] for p in followers), default=0)} / "
         f"{', '.join(str(p['pool']) for p in leaders)}", "", ""],
    ]
    return table(["measure", "value", "target", "met"], rows)


def process_table(procs: list[dict]) -> str:
    """One row per worker process."""
    return table(
        ["instance", "pid", "role", "lock conns", "pool conns", "lock-conn statements/s",
         "pool-conn statements/s (sampled)"],
        [[p["instance"], p["pid"], p["role"], p["lock"], p["pool"], f"{p['lock_rate']:.2f}",
          f"{p['pool_rate']:.2f}"] for p in procs])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the window")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds every lock session must be up before the window")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--poll", type=float, default=None,
                        help="FOLLOWER_POLL_SECONDS (default: the app's, 1)")
    return parser.parse_args()


def run(bench: Bench, args: argparse.Namespace, out: dict) -> None:
    log(f"starting {args.instances} instances x {args.workers} workers")
    bench.start_fleet(args.instances, args.workers, FOLLOWER_POLL_SECONDS=args.poll)
    dbname = bench.url.rsplit("/", 1)[1]
    expected = args.instances * args.workers
    pss = pss_available(bench)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        wait_for(lambda: admin.execute(SETTLED_SQL, (args.settle, dbname)).fetchone()
                 == (expected, True), args.settle + 60, "the fleet to settle", interval=0.1)
        log(f"fleet settled; watching {args.seconds:g} s of idleness")
        res = watch_window(bench, admin, args.seconds, pss)
    procs = per_process(res["watch"], res["seconds"], role_names(res["roles"]))
    out["sections"] = [("Summary", summary(res, procs, args.poll or 1.0)),
                       ("Per process", process_table(procs))]
    if pss:
        out["sections"].append(("pg_stat_statements (whole database, from just before "
                                 "the window until now)",
                                 pss_table(bench.url, dbname, res["reset"])))
    out["notes"] = [
        f"Window {res['seconds']:.1f} s, {res['watch'].samples} samples of pg_stat_activity "
        f"(every {res['seconds'] / max(res['watch'].samples, 1) * 1000:.1f} ms on average).",
        "Leadership " + ("did not change" if res["stable"] else "**changed**")
        + " during the window.",
        "pg_stat_statements: " + ("used" if pss else "not preloaded by this server "
                                  "(shared_preload_libraries), so per-statement counts come "
                                  "from sampling and the database's transaction counter"),
    ]


def main() -> None:
    args = parse_args()
    out: dict = {}
    try:
        with Bench("follower_cost") as bench:
            run(bench, args, out)
    finally:
        if out.get("sections"):
            report(f"Follower cost ({args.instances} instances × {args.workers} workers idle, "
                   f"FOLLOWER_POLL_SECONDS={args.poll or 1:g})", out["sections"], out["notes"])


if __name__ == "__main__":
    main()
