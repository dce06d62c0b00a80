"""Deliveries: a dead endpoint, hung plugin hooks and chaos against webhook delivery.

Every row starts its own fleet (gunicorn instances x WORKERS workers, each instance in a
process group of its own) on a fresh database of one throwaway PostgreSQL server
(tests/pgserver.py), with WEBHOOK_ALLOW_PRIVATE=true so local receivers can be subscribed,
and prints the measured value beside its target:

- dead: two endpoints subscribed to post.published through the admin API, one that never
  answers (a listening socket nobody accepts from: the kernel's backlog takes the TCP
  connection, and nothing is ever read or answered) and one healthy receiver; --dead-posts
  posts due evenly over --dead-spread s. For each post, the time from its publish_at to
  the healthy receiver's first request for it.
- hung: 8 real plugins installed through the `soloist.plugins` entry-point group (a
  distribution on the fleet's PYTHONPATH) whose on_publish hook never returns, one healthy
  receiver, --hung-posts posts due over --hung-spread s. The same time to the receiver;
  and the built-in timers' slots: the sitemap and housekeeping timers are set to every
  --timer-every s through the editors' timer form, and every slot falling due in the
  --hung-window s after the first post is due must have run (a timer_runs row, started
  before the next slot).
- chaos: the chaos run of tests/chaos.py (--chaos-seconds of random faults every ~2 s plus
  one database restart, --chaos-instances instances), its receiver failing every 7th
  request; nobody asks the deliver timer to run early. Every post must reach the receiver
  within 60 s after the run ends, under one delivery id; up to --receipt-wait s are
  waited for.
- handover: a receiver that takes --handover-answer s (5) to answer each request,
  --handover-endpoints endpoints (10) with --handover-events deliveries each (5: 50 in
  all) queued at once; once every send slot of the plugins leader has a request in flight,
  SIGTERM to its instance (a deploy). No delivery id may reach the receiver twice, and
  every one must reach it.

    .venv/bin/python bench/deliveries.py [--only dead,hung,chaos,handover] [--instances 2]
        [--chaos-seconds 90] [--receipt-wait 120] [--seed N]
"""

import argparse
import contextlib
import math
import signal
import socket
import subprocess
import textwrap
import time
from pathlib import Path

from common import ROOT, log, percentile, run_main
from faults import Row, fleet_for, run_rows

from tests.chaos import FLEET_ENV, SECRET, Chaos
from tests.cluster import PLUGINS_KEY, wait_for
from tests.faultkit import ADMIN, FaultFleet
from tests.handover import queue_deliveries, received
from tests.pgserver import PgServer
from tests.receiver import Receiver
from tests.support import WebSession, csrf_from
from tests.traffic import WebhookReceiver

ROWS = ("dead", "hung", "chaos", "handover")
ALLOW = {"WEBHOOK_ALLOW_PRIVATE": "true"}
HUNG_PLUGINS = 8

HUNG_MODULE = '''
"""8 plugins whose on_publish hook never returns (bench/deliveries.py)."""

import threading

from webapp.plugins import Plugin


def _hung(n):
    plugin = Plugin(f"hung{n}", f"Hung {n}", "Its publish hook never returns.")

    @plugin.hook("on_publish")
    def published(event):
        threading.Event().wait()  # as a hook stuck on a socket that never answers would

    return plugin


for _n in range(1, 9):
    globals()[f"hung{_n}"] = _hung(_n)
'''

TIMER_SLOTS_SQL = """
SELECT t.plugin, s.slot, r.status, r.trigger, extract(epoch FROM r.started_at - s.slot)::float8
FROM timers t
CROSS JOIN LATERAL generate_series(
    t.start_at + ceil((%(w0)s::float8 - extract(epoch FROM t.start_at)::float8)
                      / %(every)s::float8) * make_interval(secs => %(every)s::float8),
    to_timestamp(%(w1)s::float8), make_interval(secs => %(every)s::float8)) AS s(slot)
LEFT JOIN timer_runs r ON r.timer_id = t.id AND r.scheduled_for = s.slot
WHERE t.id = ANY(%(ids)s)
ORDER BY t.plugin, s.slot
"""


# --- shared steps -----------------------------------------------------------------------------

def subscribe(fleet: FaultFleet, url: str) -> int:
    """Subscribe url to post.published through the admin API; return the endpoint id."""
    status, body = fleet.api("POST", "/api/webhooks", {
        "url": url, "events": ["post.published"], "secret": SECRET})
    assert status == 201, f"could not subscribe {url}: {status} {body}"
    return body["id"]


def due_times(fleet: FaultFleet, ids: list[int]) -> dict[int, float]:
    """Return each post's publish_at (epoch seconds, database clock)."""
    return dict(fleet.view.query(
        "SELECT id, extract(epoch FROM publish_at)::float8 FROM posts WHERE id = ANY(%s)",
        (ids,)))


def first_receipts(receiver: WebhookReceiver) -> dict[int, float]:
    """Return when the receiver first accepted (200) each post."""
    found: dict[int, float] = {}
    for post_id, receipts in receiver.by_post().items():
        ok = [r.at for r in receipts if r.status == 200]
        if ok:
            found[post_id] = min(ok)
    return found


def await_receipts(receiver: WebhookReceiver, ids: list[int], deadline: float) -> None:
    """Wait until the receiver has accepted every post of ids, or until deadline (epoch)."""
    try:
        wait_for(lambda: set(ids) <= set(first_receipts(receiver)), deadline - time.time(),
                 "every post at the healthy receiver", interval=0.1)
    except AssertionError:
        log("not every post reached the healthy receiver; reckoning anyway")


def receipt_lags(receiver: WebhookReceiver, due: dict[int, float]) -> tuple[list[float], int]:
    """Return (first receipt - publish_at for each post received, how many never came)."""
    got = first_receipts(receiver)
    lags = [got[i] - due[i] for i in due if i in got]
    return lags, len(due) - len(lags)


def lag_cells(lags: list[float], missing: int, total: int) -> str:
    """Describe receipt lags for the table."""
    if not lags:
        return f"0/{total} received"
    text = (f"max {max(lags):.2f} s after publish_at (p50 {percentile(lags, 50):.2f} s, "
            f"p95 {percentile(lags, 95):.2f} s)")
    return text + (f"; {missing}/{total} never received" if missing else f"; {total}/{total}")


def spread(values: list[float]) -> str:
    """Return p50, p99 and max of some seconds, in words."""
    return (f"p50 {percentile(values, 50):.1f} s, p99 {percentile(values, 99):.1f} s, max "
            f"{max(values, default=math.nan):.1f} s")


def close(fleet: FaultFleet, row: Row) -> None:
    left = fleet.close()
    if left:
        row.met = False
        row.notes.append(f"processes left running: {left}")


# --- a dead endpoint --------------------------------------------------------------------------

def silent_endpoint() -> socket.socket:
    """Listen on a local port and never accept: the kernel's backlog takes the connections."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def dead_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row(f"one endpoint that never answers plus one healthy, {args.dead_posts} posts due "
              f"over {args.dead_spread:g} s",
              "every `post.published` reaches the healthy endpoint ≤ 5 s after its `publish_at`")
    fleet = fleet_for(pg, "dead", args, **ALLOW)
    receiver = WebhookReceiver(SECRET, fail_rate=0.0).start()
    silent = silent_endpoint()
    try:
        fleet.start(args.instances, args.workers)
        dead_id = subscribe(fleet, f"http://127.0.0.1:{silent.getsockname()[1]}/never")
        subscribe(fleet, receiver.url)
        ids = fleet.schedule("dead", args.dead_posts, lead=2.0, spread=args.dead_spread)
        due = due_times(fleet, ids)
        await_receipts(receiver, ids, max(due.values()) + args.late_wait)
        lags, missing = receipt_lags(receiver, due)
        outcome = fleet.outcome(ids)
        row.measured = lag_cells(lags, missing, len(ids))
        row.met = not missing and bool(lags) and max(lags) <= 5.0 and outcome.ok
        with contextlib.suppress(AssertionError):  # its first try ends after its timeout
            wait_for(lambda: endpoint_state(fleet, dead_id)[0], 30, "the dead endpoint to fail")
        row.notes += [f"publishing: {outcome}",
                      f"the dead endpoint: {endpoint_state(fleet, dead_id)[1]}"]
    finally:
        close(fleet, row)
        receiver.close()
        silent.close()
    return row


def endpoint_state(fleet: FaultFleet, endpoint_id: int) -> tuple[int, str]:
    """Return an endpoint's failures, and its health and deliveries by status in words."""
    failures, error, retry = fleet.view.query(
        "SELECT failures, last_error, retry_at FROM webhook_endpoints WHERE id = %s",
        (endpoint_id,))[0]
    counts = dict(fleet.view.query(
        "SELECT status, count(*) FROM webhook_deliveries WHERE endpoint_id = %s GROUP BY status",
        (endpoint_id,)))
    return failures, (f"{failures} failures, last error {error!r}, retry at {retry}; "
                      f"deliveries {counts}")


# --- hung plugin hooks ------------------------------------------------------------------------

def install_hung_plugins(where: Path) -> Path:
    """Write a distribution with HUNG_PLUGINS soloist.plugins entry points; return its path
    entry (the fleet gets it on PYTHONPATH, so importlib.metadata finds the entry points)."""
    where.mkdir(parents=True, exist_ok=True)
    info = where / "soloist_bench_hung-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: soloist-bench-hung\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[soloist.plugins]\n" + "".join(
        f"hung{n} = soloist_bench_hung:hung{n}\n" for n in range(1, HUNG_PLUGINS + 1)))
    (where / "soloist_bench_hung.py").write_text(textwrap.dedent(HUNG_MODULE).lstrip())
    return where


def set_timers_every(fleet: FaultFleet, actions: tuple[str, ...], seconds: int) -> list[int]:
    """Set the timers of actions to run every seconds, through the editors' timer form (as
    the admin); return their ids."""
    status, body = fleet.api("GET", "/api/timers")
    assert status == 200, f"GET /api/timers answered {status} {body}"
    timers = {t["action"]: t for t in body["timers"]}
    web = WebSession(fleet.instances[0].url, ADMIN)
    for action in actions:
        timer = timers[action]
        path = f"/admin/timers/{timer['id']}/edit"
        page = web.post(path, {
            "csrf_token": csrf_from(web.get(path)), "name": timer["name"], "action": action,
            "params": "{}", "kind": "every", "every": str(seconds), "unit": "seconds",
            "timezone": "UTC", "misfire": "run_once"})
        assert "Timer saved" in page, f"the timer form refused {action}: {page[:500]}"
    return [timers[a]["id"] for a in actions]


def hung_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row(f"{HUNG_PLUGINS} plugins whose hooks never return, {args.hung_posts} posts due "
              f"over {args.hung_spread:g} s",
              "every `post.published` reaches a healthy endpoint ≤ 10 s after its `publish_at`;"
              " the built-in timers still run in their next slot")
    path = install_hung_plugins(args.log_dir / "plugins")
    fleet = fleet_for(pg, "hung", args, PYTHONPATH=str(path), **ALLOW)
    receiver = WebhookReceiver(SECRET, fail_rate=0.0).start()
    try:
        fleet.start(args.instances, args.workers)
        subscribe(fleet, receiver.url)
        timer_ids = set_timers_every(fleet, ("sitemap.rebuild", "housekeeping.trim"),
                                     args.timer_every)
        ids = fleet.schedule("hung", args.hung_posts, lead=2.0, spread=args.hung_spread)
        due = due_times(fleet, ids)
        w0 = min(due.values())
        first_seen = wait_for(lambda: hung_hooks_running(fleet), 30, "a hung hook call")
        await_receipts(receiver, ids, max(due.values()) + args.late_wait)
        at_receipts = hung_hooks_running(fleet)
        wait_for(lambda: time.time() > w0 + args.hung_window + args.timer_every,
                 args.hung_window + 60, "the end of the timer window", interval=0.5)
        sitemap = builtin_hook_wait(fleet, ids, "sitemap", args.hook_wait)
        lags, missing = receipt_lags(receiver, due)
        timers_ok, timers_cell, timers_note = timer_check(fleet, timer_ids, w0, args)
        outcome = fleet.outcome(ids)
        row.measured = f"{lag_cells(lags, missing, len(ids))}; {timers_cell}"
        row.met = (not missing and bool(lags) and max(lags) <= 10.0 and timers_ok
                   and outcome.ok)
        row.notes += [f"publishing: {outcome}",
                      f"hung plugins with a hook call running: {first_seen} when first seen, "
                      f"{at_receipts} once the receipts were in (hook slots per process: 4)",
                      f"hook deliveries of the hung plugins at the end: {hook_states(fleet)}",
                      timers_note,
                      f"the built-in sitemap plugin's on_publish hook (shares the 4 hook slots "
                      f"with the hung plugins): {sitemap}"]
    finally:
        close(fleet, row)
        receiver.close()
    return row


def hung_hooks_running(fleet: FaultFleet) -> int:
    """Return how many of the hung plugins have a hook call running now."""
    return fleet.view.query(
        "SELECT count(DISTINCT plugin) FROM hook_deliveries WHERE plugin LIKE 'hung%%' "
        "AND status = 'running' AND started_at IS NOT NULL")[0][0]


HOOK_DONE_SQL = """
SELECT count(h.done_at), count(*), max(extract(epoch FROM h.done_at - o.created_at))::float8
FROM outbox_events o
LEFT JOIN hook_deliveries h ON h.event_id = o.id AND h.plugin = %s
WHERE o.post_id = ANY(%s) AND o.topic = 'post.published'
"""


def builtin_hook_wait(fleet: FaultFleet, ids: list[int], plugin: str, seconds: float) -> str:
    """Wait up to seconds for plugin's on_publish hook to be done for every post of ids; say
    how long after its event the last one was done (or how many were still waiting)."""
    def state() -> tuple:
        return fleet.view.query(HOOK_DONE_SQL, (plugin, ids))[0]

    with contextlib.suppress(AssertionError):
        wait_for(lambda: state()[0] == len(ids), seconds, f"the {plugin} hooks", interval=1)
    done, total, latest = state()
    if done == total:
        return f"{done}/{total} done, the last {latest:.1f} s after its event"
    return f"{done}/{total} done after waiting {seconds:g} s more" + (
        f" (the last of those {latest:.1f} s after its event)" if done else "")


def hook_states(fleet: FaultFleet) -> dict:
    """Return the hung plugins' hook deliveries by status (and attempts)."""
    return {f"{status} (attempt {attempts})": n for status, attempts, n in fleet.view.query(
        "SELECT status, attempts, count(*) FROM hook_deliveries WHERE plugin LIKE 'hung%%' "
        "GROUP BY status, attempts ORDER BY status, attempts")}


def timer_slots(fleet: FaultFleet, timer_ids: list[int], w0: float, w1: float,
                every: int) -> list[tuple]:
    """Return (plugin, slot, run status, trigger, start delay s) of every slot in [w0, w1]."""
    return fleet.view.query(TIMER_SLOTS_SQL, {"ids": timer_ids, "every": every, "w0": w0,
                                              "w1": w1})


def timer_check(fleet: FaultFleet, timer_ids: list[int], w0: float,
                args: argparse.Namespace) -> tuple[bool, str, str]:
    """Judge the built-in timers' slots in the window after w0: (every one ran in its slot,
    a table cell, a note)."""
    slots = timer_slots(fleet, timer_ids, w0, w0 + args.hung_window, args.timer_every)
    late = [s for s in slots if not on_time(s, args.timer_every)]
    delays = [s[4] for s in slots if s[4] is not None]
    cell = f"built-in timer slots run in their slot: {len(slots) - len(late)}/{len(slots)}"
    note = (f"sitemap and housekeeping every {args.timer_every} s, slots in the "
            f"{args.hung_window:g} s after the first post was due: start delay max "
            f"{max(delays, default=math.nan):.2f} s; not run in their slot: {late[:10]}")
    return bool(slots) and not late, cell, note


def on_time(slot: tuple, every: int) -> bool:
    """A slot ran in its place: claimed on schedule and started before the next slot."""
    _plugin, _at, status, trigger, delay = slot
    return (status in ("running", "succeeded") and trigger == "schedule"
            and delay is not None and delay < every)


# --- chaos ------------------------------------------------------------------------------------

def chaos_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row(f"chaos run as in the faults issue ({args.chaos_seconds:g} s, a fault every 2 s "
              "plus one database restart), receiver failing every 7th call",
              "every post delivered ≤ 60 s after the run ends; one delivery id per post")
    fleet = fleet_for(pg, "chaos", args, **FLEET_ENV)
    receiver = WebhookReceiver(SECRET, fail_every=7).start()
    try:
        fleet.start(args.chaos_instances, args.workers)
        chaos = Chaos(fleet, pg, receiver, args.seed, args.chaos_instances, args.workers)
        chaos.report.instances = args.chaos_instances
        rep = chaos.run(args.chaos_seconds, receipt_wait=args.receipt_wait, log=log, nudge=False)
    finally:
        fleet.close()
        receiver.close()
    got = first_receipts(receiver)
    total = rep.outcome.total
    after = [got[p] - rep.ended_at for p in got]
    missing = total - len(got)
    latest = max(after, default=math.nan)
    when = (f"the last {latest:.1f} s after the run ended" if latest > 0
            else "all before the run ended")
    row.measured = (f"{len(got)}/{total} delivered, {when}"
                    + (f", {missing} not delivered {args.receipt_wait:g}+ s after" if missing
                       else "") + f"; {len(rep.two_ids)} posts with two delivery ids")
    row.met = (not missing and latest <= 60 and not rep.two_ids and rep.outcome.ok
               and not rep.leftovers)
    row.notes += [line for line in str(rep).splitlines()[:7]]
    row.notes.append(f"receiver: {receiver.calls} requests, every 7th answered 500; after "
                     f"publish_at, each post's first request came {spread(rep.receipt_lags)}, "
                     f"its publication {spread(rep.outcome.lags)}")
    return row


# --- a deploy with slow sends in flight ------------------------------------------------------

def handover_row(pg: PgServer, args: argparse.Namespace) -> Row:
    total = args.handover_endpoints * args.handover_events
    row = Row(f"SIGTERM of the plugins leader with {total} slow sends queued "
              f"({args.handover_endpoints} endpoints, each answer {args.handover_answer:g} s)",
              "0 delivery ids received twice; every delivery received")
    fleet = fleet_for(pg, "handover", args, **ALLOW)
    receiver = Receiver().start()
    receiver.answers = [float(args.handover_answer)] * (3 * total)
    try:
        fleet.start(args.instances, args.workers)
        ids = queue_deliveries(fleet.url, receiver.url, args.handover_endpoints,
                               args.handover_events)
        slots = min(4, args.handover_endpoints)  # a process's send slots (workers.SLOTS)
        wait_for(lambda: receiver.calls >= slots, 30, "every send slot of the leader busy")
        leader, _pid = fleet.leader(PLUGINS_KEY)
        in_flight, sigterm = receiver.calls, time.time()
        leader.signal(signal.SIGTERM)
        fleet.retire(leader)
        with contextlib.suppress(AssertionError):
            wait_for(lambda: set(received(receiver)) == ids, total * args.handover_answer + 60,
                     "every delivery at the receiver", interval=0.2)
        got = received(receiver)
        twice = sum(1 for count in got.values() if count > 1)
        last = max(r.at for r in receiver.received())
        row.measured = (f"{twice} delivery ids received twice; {len(set(got) & ids)}/{total} "
                        f"received, the last {last - sigterm:.1f} s after the SIGTERM")
        row.met = twice == 0 and set(got) == ids
        row.notes += [f"{in_flight} requests in flight at the SIGTERM (the leader's send "
                      f"slots); {receiver.calls} requests in all"]
    finally:
        close(fleet, row)
        receiver.close()
    return row


# --- main -------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(ROWS), help="comma-separated rows")
    parser.add_argument("--instances", type=int, default=2, help="instances (dead, hung)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per instance")
    parser.add_argument("--dead-posts", type=int, default=30)
    parser.add_argument("--dead-spread", type=float, default=10.0)
    parser.add_argument("--hung-posts", type=int, default=10)
    parser.add_argument("--hung-spread", type=float, default=5.0)
    parser.add_argument("--hung-window", type=float, default=40.0,
                        help="s after the first post is due in which every timer slot must run")
    parser.add_argument("--timer-every", type=int, default=5, help="built-in timers' period, s")
    parser.add_argument("--hook-wait", type=float, default=180.0,
                        help="s to wait for the sitemap's own hook after the window (hung)")
    parser.add_argument("--late-wait", type=float, default=60.0,
                        help="s after the last post is due to wait for receipts (dead, hung)")
    parser.add_argument("--chaos-instances", type=int, default=3)
    parser.add_argument("--chaos-seconds", type=float, default=90.0)
    parser.add_argument("--receipt-wait", type=float, default=120.0,
                        help="s to wait for receipts once the chaos fleet has settled")
    parser.add_argument("--seed", type=int, default=None, help="chaos seed (default: random)")
    parser.add_argument("--handover-endpoints", type=int, default=10)
    parser.add_argument("--handover-events", type=int, default=5,
                        help="deliveries queued to each endpoint (handover)")
    parser.add_argument("--handover-answer", type=float, default=5.0,
                        help="s the receiver takes to answer each request (handover)")
    args = parser.parse_args()
    args.only = [r for r in args.only.split(",") if r]
    unknown = set(args.only) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(ROWS)}")
    if args.seed is None:
        args.seed = int(time.time()) % 100_000
    return args


def measured_commit() -> str:
    """Return the commit the fleet runs, marked when webapp/ or migrations/ differ from it."""
    def git(*words: str) -> str:
        return subprocess.run(["git", *words], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "webapp", "migrations")
    return commit + (" with uncommitted changes in webapp/ or migrations/" if dirty else "")


def main() -> None:
    args = parse_args()
    runners = {"dead": dead_row, "hung": hung_row, "chaos": chaos_row, "handover": handover_row}
    commit = measured_commit()
    run_rows("deliveries", runners, args, f"Deliveries at commit {commit} ({args.workers} "
             f"workers per instance, default settings, chaos seed {args.seed})", "case",
             header=f"commit {commit}; ")


if __name__ == "__main__":
    run_main(main)
