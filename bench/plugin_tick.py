"""The plugin tick with a long history: 1,000 and 1,000,000 processed outbox events.

For each size, fills a fresh PostgreSQL database with that many processed post.published
events (generate_series, one every 30 s back from an hour ago), each with the finished
deliveries it would have left (a done hook delivery per plugin with hooks, a delivered
webhook delivery), runs VACUUM ANALYZE, then calls webapp.scheduling.plugin_tick.tick(now)
in an app context as the plugin leader does: ROUNDS idle ticks (nothing to do) and ROUNDS
ticks that each fan out NEW fresh events (inserted before the tick, their hook workers
drained after it). It prints the median and p95 of each, the statements the tick spends
its time in, and EXPLAIN (ANALYZE) of every tick statement that reads the outbox at the
largest size. Last (unless --no-trim) it times housekeeping trimming that history.

    .venv/bin/python bench/plugin_tick.py [--sizes 1000 1000000] [--rounds 200] [--new 5]
"""

import argparse
import re
import threading
import time
from collections import defaultdict
from functools import partial

from common import Bench, log, percentile, report, run_main, table

EVERY_SECONDS = 30  # one event every 30 s: 1,000,000 events is 347 days of history

FILL_SQL = ["""
TRUNCATE outbox_events, hook_deliveries, webhook_deliveries RESTART IDENTITY
""", """
INSERT INTO outbox_events (topic, post_id, payload, instance, created_at, processed_at)
SELECT 'post.published', NULL,
       json_build_object('post_id', i, 'slug', 'bench-' || i, 'title', 'Bench post ' || i,
                         'at', at),
       'bench', at, at + interval '50 milliseconds'
FROM (SELECT i, now() - interval '1 hour' - make_interval(secs => (%(n)s - i) * %(every)s) AS at
      FROM generate_series(1, %(n)s) AS i) AS history
""", """
INSERT INTO hook_deliveries (plugin, hook, event_id, status, attempts, next_attempt_at,
                             claimed_at, instance, last_error, done_at, created_at)
SELECT p.name, 'on_publish', e.id, 'done', 1, e.processed_at, e.processed_at, 'bench', '',
       e.processed_at, e.processed_at
FROM outbox_events e CROSS JOIN unnest(%(plugins)s::text[]) AS p(name)
""", """
INSERT INTO webhook_deliveries (delivery_id, endpoint_id, event_id, topic, body, status,
                                attempts, claimed_at, last_attempt_at, response_status,
                                last_error, delivered_at, created_at)
SELECT md5(e.id::text)::uuid::text, %(endpoint)s, e.id, e.topic, '{"event_id":' || e.id || '}',
       'delivered', 1, e.processed_at, e.processed_at, 200, '', e.processed_at, e.created_at
FROM outbox_events e
"""]

ENDPOINT_SQL = """
INSERT INTO webhook_endpoints (url, description, events, secret, active, created_at)
VALUES ('https://receiver.example/hook', 'bench: switched off', '["post.published"]',
        repeat('x', 32), false, now())
RETURNING id
"""

NEW_EVENTS_SQL = """
INSERT INTO outbox_events (topic, post_id, payload, instance, created_at)
SELECT 'post.published', NULL, json_build_object('slug', 'new-' || i), 'bench', now()
FROM generate_series(1, %(n)s) AS i
"""

VACUUM_SQL = ["VACUUM ANALYZE outbox_events", "VACUUM ANALYZE hook_deliveries",
              "VACUUM ANALYZE webhook_deliveries"]


class Statements:
    """Times every statement this thread sends; explains the chosen ones once when armed."""

    def __init__(self, engine) -> None:
        from sqlalchemy import event

        self.thread = threading.get_ident()
        self.current: dict[str, list] = {}  # statement -> [seconds, executions], this tick
        self.each: list[tuple[str, float]] = []  # (statement, seconds) of every execution
        self.explain_if = None  # a predicate on the statement text, while armed
        self.plans: dict[str, list[str]] = {}
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, conn, _cursor, statement, parameters, _context, executemany) -> None:
        if threading.get_ident() != self.thread:
            return
        if (self.explain_if and not executemany and tidy(statement) not in self.plans
                and self.explain_if(statement)):
            self.plans[tidy(statement)] = explain(conn.connection.dbapi_connection,
                                                  statement, parameters)
        conn.info["bench_started"] = time.perf_counter()

    def _after(self, conn, _cursor, statement, *_args) -> None:
        if threading.get_ident() == self.thread and "bench_started" in conn.info:
            took = time.perf_counter() - conn.info.pop("bench_started")
            entry = self.current.setdefault(tidy(statement), [0.0, 0])
            entry[0] += took
            entry[1] += 1
            self.each.append((statement, took))

    def take(self) -> dict[str, list]:
        """Return {statement: [seconds, executions]} of the tick just run; start the next."""
        taken, self.current = self.current, {}
        return taken


def tidy(statement: str) -> str:
    """Return statement with a long list of bound values shortened to its first two."""
    return re.sub(r"((?:%\(\w+\)s(?:::[A-Z ]+)?, ){2})(?:%\(\w+\)s(?:::[A-Z ]+)?, )+",
                  r"\1…, ", statement)


def explain(dbapi_connection, statement: str, parameters) -> list[str]:
    """EXPLAIN (ANALYZE) statement inside the tick's transaction, then undo what it did."""
    with dbapi_connection.cursor() as cur:
        cur.execute("SAVEPOINT bench_explain")
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement, parameters)
        plan = [re.sub(r"'\{(\d+,\d+),[\d,]+,(\d+)\}'", r"'{\1,…,\2}'", row[0])
                for row in cur.fetchall()]
        cur.execute("ROLLBACK TO SAVEPOINT bench_explain")
    return plan


def fill(bench: Bench, n: int, plugins: list[str], endpoint: int) -> None:
    log(f"filling {n:,} processed events with their deliveries")
    started = time.monotonic()
    params = {"n": n, "every": EVERY_SECONDS, "plugins": plugins, "endpoint": endpoint}
    for sql in FILL_SQL:
        bench.execute(sql, params)
    for sql in VACUUM_SQL:
        bench.execute(sql)
    log(f"filled and vacuumed in {time.monotonic() - started:.1f} s")


def run_ticks(ticking, bench: Bench, clock: Statements, now, rounds: int, new: int) -> dict:
    """Tick rounds times at now; return {"times": [ms], "statements": {sql: [ms]}}."""
    from webapp.extensions import db
    from webapp.scheduling import plugin_tick, workers

    times, sql, counts = [], [], []
    per_statement, calls = defaultdict(list), defaultdict(list)
    for _ in range(rounds):
        if new:
            bench.execute(NEW_EVENTS_SQL, {"n": new})
        with ticking():
            clock.take()
            started = time.perf_counter()
            plugin_tick.tick(now, "bench")  # as the unled leadership: nobody leads here
            times.append((time.perf_counter() - started) * 1000)
            db.session.remove()
        taken = clock.take()
        sql.append(sum(took for took, _n in taken.values()) * 1000)
        counts.append(sum(n for _took, n in taken.values()))
        for statement, (took, n) in taken.items():
            per_statement[statement].append(took * 1000)
            calls[statement].append(n)
        if not workers.drain(30):
            raise RuntimeError("hook workers still running after 30 s")
    return {"times": times, "sql": sql, "count": counts, "statements": per_statement,
            "calls": calls}


def settle(ticking, now) -> None:
    """Tick until nothing is left to do (default timers created, due slots run)."""
    from webapp.extensions import db
    from webapp.scheduling import plugin_tick, workers

    for _ in range(20):
        with ticking():
            upcoming = plugin_tick.tick(now, "bench")  # as the unled leadership: nobody leads here
            db.session.remove()
        workers.drain(30)
        if upcoming is None or upcoming > now:
            return
    raise RuntimeError("the plugin tick still has work after 20 ticks")


def explain_outbox(ticking, bench: Bench, clock: Statements, now, new: int) -> dict[str, list[str]]:
    """Return EXPLAIN (ANALYZE) of each tick statement on the outbox: idle, then with events."""
    def reads_outbox(statement: str) -> bool:
        return "outbox_events" in statement

    clock.explain_if, clock.plans = reads_outbox, {}
    run_ticks(ticking, bench, clock, now, 1, 0)
    run_ticks(ticking, bench, clock, now, 1, new)
    clock.explain_if = None
    return clock.plans


def time_trim(ticking, clock: Statements) -> dict:
    """Run housekeeping's trim with its default retention; return counts and timings."""
    from webapp.db import database_now
    from webapp.extensions import db
    from webapp.plugins import housekeeping

    with ticking():
        now = database_now()
        db.session.rollback()
        clock.each, clock.plans = [], {}
        clock.explain_if = lambda s: s.startswith(("SELECT", "DELETE"))
        started = time.perf_counter()
        counts = housekeeping.trim(now)
        took = time.perf_counter() - started
        clock.explain_if = None
        db.session.remove()
    for statement, plan in clock.plans.items():  # for the curious: every table's plans
        log(" ".join(statement.split())[:100] + " -> " + " / ".join(
            line.strip() for line in plan[:6]))
    batches = sum(1 for s, _t in clock.each if s.startswith("DELETE"))
    times = [t for _s, t in clock.each]
    longest, slowest = max(((t, s) for s, t in clock.each), default=(0.0, ""))
    return {"counts": counts, "seconds": took, "batches": batches, "longest": longest * 1000,
            "p95": percentile(times, 95) * 1000, "slowest": " ".join(slowest.split()[:4]),
            "over_100ms": sum(1 for t in times if t > 0.1), "statements": len(times)}


def mark(ok: bool) -> str:
    return "✔" if ok else "✘"


def fmt(value: float) -> str:
    return f"{value:.2f} ms"


def summary_rows(results: dict, sizes: list[int], new: int) -> list[list[str]]:
    base, top = results[sizes[0]], results[sizes[-1]]
    rows = []
    for case, label in (("idle", "idle tick (nothing to do)"),
                        ("fan_out", f"tick fanning out {new} new events")):
        cells = [f"{fmt(percentile(results[s][case]['times'], 50))} / "
                 f"{fmt(percentile(results[s][case]['times'], 95))}" for s in sizes]
        low = percentile(base[case]["times"], 50)
        high = percentile(top[case]["times"], 50)
        flat = high <= max(low * 1.25, low + 0.5)  # medians within 25 % (or 0.5 ms)
        rows.append([label, *cells, f"≤ 5 ms {mark(high <= 5.0)}, the same as with "
                                    f"{sizes[0]:,} {mark(flat)}"])
        rows.append(["… of which in the database driver; statements per tick",
                     *[f"{fmt(percentile(results[s][case]['sql'], 50))}; "
                       f"{percentile(results[s][case]['count'], 50):.0f}" for s in sizes], ""])
    return rows


def statement_rows(results: dict, sizes: list[int], case: str) -> list[list[str]]:
    """Every statement of one case, slowest at the largest size first."""
    top = results[sizes[-1]][case]
    ranked = sorted(top["statements"], key=lambda s: -percentile(top["statements"][s], 50))
    rows = []
    for statement in ranked:
        short = " ".join(statement.split())
        short = short if len(short) <= 100 else short[:97] + "…"
        cells = [fmt(percentile(results[s][case]["statements"].get(statement, [0.0]), 50))
                 for s in sizes]
        per_tick = sum(top["calls"][statement]) / len(top["times"])
        rows.append([f"`{short.replace('|', '¦')}`", f"{per_tick:g}", *cells])
    return rows


def plans_section(plans: dict[str, list[str]]) -> str:
    blocks = []
    for statement, plan in plans.items():
        blocks.append("```sql\n" + statement.strip() + "\n```\n```\n" + "\n".join(plan)
                      + "\n```")
    return "\n\n".join(blocks) or "(the tick sent no statement on outbox_events)"


def measure(ticking, bench: Bench, clock: Statements, args, plugins, endpoint) -> tuple:
    from webapp.db import database_now
    from webapp.extensions import db

    results, plans = {}, {}
    for size in args.sizes:
        fill(bench, size, plugins, endpoint)
        with ticking():
            now = database_now()
            db.session.remove()
        settle(ticking, now)
        log(f"{size:,} events: {args.rounds} idle ticks, {args.rounds} with {args.new} new events")
        results[size] = {"idle": run_ticks(ticking, bench, clock, now, args.rounds, 0),
                         "fan_out": run_ticks(ticking, bench, clock, now, args.rounds, args.new)}
        if size == args.sizes[-1]:
            plans = explain_outbox(ticking, bench, clock, now, args.new)
    return results, plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--new", type=int, default=5, help="events fanned out per tick")
    parser.add_argument("--no-trim", action="store_true", help="skip timing housekeeping")
    args = parser.parse_args()
    from tests.harness.support import make_app
    from webapp.extensions import db
    from webapp.plugins import registry
    from webapp.scheduling import engines

    with Bench("plugin_tick") as bench:
        # as the runner does: the ticks on the scheduler's own connection, plugin code (hook
        # batches, senders) here on the app's pool
        app = make_app(bench.url)
        ticks = engines.build(app.config).ticks
        clock = Statements(ticks)
        with app.app_context():
            plugins = sorted(n for n, p in registry.enabled_plugins().items() if p.hooks)
        endpoint = bench.execute(ENDPOINT_SQL)[0][0]
        ticking = partial(engines.working_on, app, ticks)
        results, plans = measure(ticking, bench, clock, args, plugins, endpoint)
        trimmed = None if args.no_trim else time_trim(ticking, clock)
        trim_plans = {s: p for s, p in clock.plans.items() if "FROM outbox_events" in s}
        ticks.dispose()
        with app.app_context():
            db.engine.dispose()
    print_report(args, results, plans, trimmed, trim_plans, plugins)


def print_report(args, results, plans, trimmed, trim_plans, plugins) -> None:
    sizes = args.sizes
    heads = [f"{s:,} processed events" for s in sizes]
    sections = [
        (f"Plugin tick, median / p95 of {args.rounds} ticks",
         table(["case", *heads, "target"], summary_rows(results, sizes, args.new))),
        ("Where an idle tick's time goes (median per tick)",
         table(["statement", "per tick", *heads], statement_rows(results, sizes, "idle"))),
        (f"Where a tick fanning out {args.new} events spends its time (median per tick)",
         table(["statement", "per tick", *heads],
               statement_rows(results, sizes, "fan_out"))),
        (f"EXPLAIN (ANALYZE) of the tick's outbox statements at {sizes[-1]:,} events",
         plans_section(plans)),
    ]
    if trimmed:
        counts = ", ".join(f"{n:,} {name}" for name, n in trimmed["counts"].items() if n)
        sections.append((f"Housekeeping trim at {sizes[-1]:,} events (default retention)",
                         table(["deleted", "total", "batches", "statements", "p95 statement",
                                "over 100 ms", "longest statement"],
                               [[counts, f"{trimmed['seconds']:.1f} s", trimmed["batches"],
                                 trimmed["statements"], fmt(trimmed["p95"]),
                                 trimmed["over_100ms"],
                                 f"{fmt(trimmed['longest'])} (`{trimmed['slowest']} …`)"]])))
        sections.append(("EXPLAIN (ANALYZE) of housekeeping's first outbox batches",
                         plans_section(trim_plans)))
    report("Plugin tick with a long outbox history", sections, [
        f"Every processed event also has a done hook delivery per plugin with hooks "
        f"({', '.join(plugins)}) and a delivered webhook delivery (to a switched-off "
        f"endpoint), so the tick's delivery queries face the same history.",
        "Ticks run in this process through tick(now) with a fixed now, as the leader's "
        "scheduler thread calls it (app context, session removed after each); hook workers "
        "started by a tick are drained before the next, outside the timing.",
    ])


if __name__ == "__main__":
    run_main(main)
