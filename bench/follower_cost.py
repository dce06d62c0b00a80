"""Follower cost: what an idle fleet asks of PostgreSQL, per process.

Starts INSTANCES gunicorn instances x WORKERS workers on a fresh database, lets them settle,
then watches SECONDS s of idleness from a connection to the admin database (so the watcher's
own queries are not counted in the fleet's database). Three counters:

- requests per connection, counted: the server side of every TCP connection to PostgreSQL
  keeps tcp_info.data_segs_in, the data segments the client sent (`ss -ti`, when PostgreSQL
  runs on this host). libpq sends a statement in one write, so for small statements one
  segment is one statement; matched to backends by pg_stat_activity.client_port;
- statements per connection, sampled: every backend's pg_stat_activity.query_start, read
  every ~5 ms; each new value is one statement (exact for statements more than a sample
  apart, such as a follower's polls; a lower bound for a leader's bursts);
- for the whole database: the pg_stat_database xact_commit + xact_rollback delta, and
  pg_stat_statements per statement text when the server preloads it.

Connections are attributed to processes by application_name: `soloist:<instance>:<pid>` is
a lock connection, `soloist-web:<instance>:<pid>` a SQLAlchemy pool connection.

    .venv/bin/python bench/follower_cost.py [--seconds 30]
"""

import argparse
import re
import shutil
import subprocess
import time
from collections import defaultdict

import psycopg
from common import (
    ADMIN_URL,
    PLUGINS_KEY,
    PUBLISH_KEY,
    Bench,
    log,
    report,
    run_main,
    table,
    wait_for,
)

SAMPLE_SQL = """
SELECT pid, application_name, extract(epoch FROM query_start)::float8, backend_type,
       client_port
FROM pg_stat_activity WHERE datname = %s
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

SOCKET = re.compile(r"^\S.*\s\S+:(\d+)\s+\S+:(\d+)\s*$")  # recv-q send-q local peer
SEGS_IN = re.compile(r"\bdata_segs_in:(\d+)")


class Watch:
    """Samples pg_stat_activity for one database and counts statements per backend."""

    def __init__(self, admin: psycopg.Connection, dbname: str) -> None:
        self.admin = admin
        self.dbname = dbname
        self.starts: dict[int, set[float]] = defaultdict(set)  # backend pid -> query_starts
        self.names: dict[int, str] = {}  # backend pid -> application_name
        self.ports: dict[int, int] = {}  # client port -> backend pid
        self.samples = 0
        self.autovacuum: set[int] = set()  # autovacuum workers seen in the database

    def sample(self, since: float) -> None:
        """Record each backend's latest statement start, if it falls in the window."""
        rows = self.admin.execute(SAMPLE_SQL, (self.dbname,)).fetchall()
        for pid, name, started, kind, port in rows:
            if kind != "client backend":
                self.autovacuum.update([pid] if kind == "autovacuum worker" else [])
                continue
            self.names[pid] = name
            if port is not None:
                self.ports[port] = pid
            if started is not None and started >= since:
                self.starts[pid].add(started)
        self.samples += 1

    def xacts(self) -> tuple[int, float]:
        """Return the database's committed + rolled back transactions, and when."""
        return self.admin.execute(XACTS_SQL, (self.dbname,)).fetchone()

    def holders(self) -> dict[int, str]:
        """Return {key: application_name} of the advisory locks held in the database."""
        return dict(self.admin.execute(HOLDERS_SQL, (self.dbname,)).fetchall())


def server_port() -> int | None:
    """Return PostgreSQL's port if it runs on this host and `ss` can read its sockets."""
    info = psycopg.conninfo.conninfo_to_dict(ADMIN_URL)
    local = info.get("host", "localhost") in ("localhost", "127.0.0.1", "::1")
    return int(info.get("port") or 5432) if local and shutil.which("ss") else None


def segments_in(port: int) -> dict[int, int]:
    """Return {client port: data segments received} for every connection to the server."""
    text = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
                          capture_output=True, text=True, check=True).stdout
    found, client = {}, None
    for line in text.splitlines():
        match = SOCKET.match(line)
        if match:
            client = int(match.group(2))
            continue
        segs = SEGS_IN.search(line)
        if segs and client is not None:
            found[client] = int(segs.group(1))
            client = None
    return found


def watch_window(bench: Bench, admin: psycopg.Connection, seconds: float, pss: bool) -> dict:
    """Close our own connection to the database, then count for `seconds`."""
    dbname = bench.url.rsplit("/", 1)[1]
    own = bench.query("SELECT pg_backend_pid()")[0][0]
    reset = admin.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]
    if pss:
        bench.execute("SELECT pg_stat_statements_reset()")
    bench.view.close()
    bench.view = None
    wait_for(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                       (own,)).fetchall(), 10, "our own session to end")
    port = server_port()
    watch = Watch(admin, dbname)
    roles_before = watch.holders()
    segs0 = segments_in(port) if port else {}
    x0, t0 = watch.xacts()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        watch.sample(t0)
        time.sleep(0.005)
    x1, t1 = watch.xacts()
    segs1 = segments_in(port) if port else {}
    watch.sample(t0)
    return {"watch": watch, "xacts": x1 - x0, "seconds": t1 - t0, "roles": roles_before,
            "stable": roles_before == watch.holders(), "reset": reset,
            "segments": {c: n - segs0.get(c, 0) for c, n in segs1.items()} if port else None}


def per_process(res: dict) -> list[dict]:
    """Group the watched backends by OS process (the pid in application_name)."""
    watch, seconds, segments = res["watch"], res["seconds"], res["segments"]
    by_backend = {pid: segments.get(port) for port, pid in watch.ports.items()} if segments \
        else {}
    roles = role_names(res["roles"])
    procs: dict[str, dict] = {}
    for backend, name in watch.names.items():
        if not name.startswith("soloist"):
            continue
        kind, _, rest = name.partition(":")  # soloist[-role]:<instance>:<pid>[:<nonce>]
        instance, pid = identity("soloist:" + rest)
        proc = procs.setdefault(pid, {"instance": instance, "pid": int(pid),
                                      "role": roles.get(pid, "follower")})
        field = "lock" if kind == "soloist" else "pool"
        proc[field] = proc.get(field, 0) + 1
        proc[f"{field}_sampled"] = (proc.get(f"{field}_sampled", 0)
                                    + len(watch.starts.get(backend, ())) / seconds)
        if segments is not None:
            proc[f"{field}_counted"] = (proc.get(f"{field}_counted", 0)
                                        + (by_backend.get(backend) or 0) / seconds)
    return sorted(procs.values(), key=lambda p: (p["instance"], p["pid"]))


def identity(application_name: str) -> tuple[str, str]:
    """Return the instance and the OS pid (as text) a soloist:<instance>:<pid>[:<nonce>]
    name gives."""
    from webapp.leadership.base import parse_identity

    instance, pid = parse_identity(application_name)
    return instance, str(pid)


def role_names(holders: dict[int, str]) -> dict[str, str]:
    """Return {os pid: 'leader (publish, plugins)'} for the processes that hold keys."""
    names = {PUBLISH_KEY: "publish", PLUGINS_KEY: "plugins"}
    roles: dict[str, list[str]] = defaultdict(list)
    for key, app in sorted(holders.items()):
        roles[identity(app)[1]].append(names.get(key, hex(key)))
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


def total(p: dict, how: str) -> float:
    """Lock + pool connection rate of one process, counted or sampled."""
    return p.get(f"lock_{how}", 0) + p.get(f"pool_{how}", 0)


def spread(values: list[float]) -> str:
    """mean; min–max."""
    return f"{sum(values) / len(values):.2f}; {min(values):.2f}–{max(values):.2f}"


def summary(res: dict, procs: list[dict], poll: float) -> str:
    """The headline numbers against the targets."""
    followers = [p for p in procs if p["role"] == "follower"]
    leaders = [p for p in procs if p["role"] != "follower"]
    target = f"≤ 1 per poll (≈ {1 / poll:g}/s)"
    each_most = 1.25 / poll  # one statement per poll; polls come every 0.8-1.2 x the interval
    rows = []
    if res["segments"] is not None:
        counted = [total(p, "counted") for p in followers]
        rows.append(["requests/s per follower, counted (mean; min–max)", spread(counted),
                     target, _met(max(counted) <= each_most)])
    sampled = [total(p, "sampled") for p in followers]
    rows.append(["statements/s per follower, sampled (mean; min–max)", spread(sampled), target,
                 _met(max(sampled) <= each_most)])
    lock_conns = sorted({p.get("lock", 0) for p in procs})
    rows += [
        ["lock connections per process", " / ".join(str(c) for c in lock_conns), "exactly 1",
         _met(lock_conns == [1])],
        ["pool connections per follower / per leader",
         f"{max((p.get('pool', 0) for p in followers), default=0)} / "
         + ", ".join(str(p.get("pool", 0)) for p in leaders), "", ""],
    ]
    if res["segments"] is not None:
        rows.append(["requests/s per leader, counted (lock + pool connections)",
                     ", ".join(f"{total(p, 'counted'):.2f}" for p in leaders), "", ""])
    rows.append(["transactions/s, whole database, all processes",
                 f"{res['xacts'] / res['seconds']:.2f}", "", ""])
    return table(["measure", "value", "target", "met"], rows)


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def process_table(procs: list[dict], counted: bool) -> str:
    """One row per worker process."""
    headers = ["instance", "pid", "role", "lock conns", "pool conns"]
    if counted:
        headers += ["lock-conn requests/s (counted)", "pool-conn requests/s (counted)"]
    headers += ["lock-conn statements/s (sampled)", "pool-conn statements/s (sampled)"]
    rows = []
    for p in procs:
        row = [p["instance"], p["pid"], p["role"], p.get("lock", 0), p.get("pool", 0)]
        hows = ("counted", "sampled") if counted else ("sampled",)
        row += [f"{p.get(f'{conn}_{how}', 0):.2f}" for how in hows for conn in ("lock", "pool")]
        rows.append(row)
    return table(headers, rows)


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
    expected = args.instances  # lock sessions: one candidate an instance
    pss = pss_available(bench)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        wait_for(lambda: admin.execute(SETTLED_SQL, (args.settle, dbname)).fetchone()
                 == (expected, True), args.settle + 60, "the fleet to settle", interval=0.1)
        log(f"fleet settled; watching {args.seconds:g} s of idleness")
        res = watch_window(bench, admin, args.seconds, pss)
    procs = per_process(res)
    out["sections"] = [("Summary", summary(res, procs, args.poll or 1.0)),
                       ("Per process", process_table(procs, res["segments"] is not None))]
    if pss:
        out["sections"].append(("pg_stat_statements (whole database, from the window's start)",
                                pss_table(bench.url, dbname, res["reset"])))
    out["notes"] = notes(res, pss)


def notes(res: dict, pss: bool) -> list[str]:
    """How the numbers were taken."""
    return [
        f"Window {res['seconds']:.1f} s; {res['watch'].samples} samples of pg_stat_activity "
        f"(every {res['seconds'] / max(res['watch'].samples, 1) * 1000:.1f} ms on average); "
        "leadership " + ("did not change" if res["stable"] else "**changed**")
        + f"; autovacuum workers seen in the database: {len(res['watch'].autovacuum)}.",
        "counted = TCP data segments the process sent on that connection (server-side "
        "tcp_info.data_segs_in via `ss`): one per statement for small statements; "
        + ("available." if res["segments"] is not None else
           "**not available** (PostgreSQL is not on this host, or `ss` is missing)."),
        "sampled = distinct pg_stat_activity.query_start values seen: exact for statements "
        "further apart than a sample, a lower bound for bursts.",
        "pg_stat_statements: " + ("used." if pss else "not preloaded by this server "
                                  "(shared_preload_libraries)."),
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
    run_main(main)
