"""Faults: what a frozen host, web load, a database restart, SIGTERM and chaos do to publishing.

Every row starts its own fleet (INSTANCES gunicorn instances x WORKERS workers, each
instance in a process group of its own, like a host) on a fresh database of one throwaway
PostgreSQL server (tests/harness/pgserver.py: initdb in a temporary directory, run as the
`postgres` user, restarted at will; the shared server is never touched but to read its
version), and prints the measured value beside the issue's target:

- freeze: BURST posts all due at one moment; as soon as the publish leader is publishing
  them (its transaction holds their row locks, seen with pgrowlocks), SIGSTOP its whole
  instance (master and workers). Time from the freeze until every post is published, while
  the host stays frozen (waited for up to --freeze-wait s); then SIGCONT.
- load: --load-seconds of GETs (--load-processes x --load-connections keep-alive
  connections; public pages and the JSON API) to the publish leader's instance while a post
  falls due every 0.5 s. Leadership changes (leader_events) and publish lag.
- restart: the server is stopped (fast) and started again after each of --downtimes s,
  with a post falling due during the outage. Time from the server accepting connections
  until both keys are held again by live workers (pg_locks, polled every 50 ms).
- term: --term-trials times, a 20 s slow upload is opened to the publish leader's worker,
  then its instance's master gets SIGTERM. Time from the signal to the 'acquired' event
  (database clock, same host) of a standby on another instance, and whether the upload
  was still running then.
- chaos: --chaos-seconds of random faults every ~2 s plus one database restart
  (tests/harness/chaos.py), a local webhook receiver failing 15 % of requests; then every post must
  be published once, never early, received under one delivery id (waiting up to
  --receipt-wait s after the run, asking the webhooks `deliver` timer to run now). A
  second row: the live posts' scheduled changes due through the run, each swapped in once.

- partition: the publish leader's instance runs in a network namespace (tests/harness/netfault.py);
  --partition-posts posts fall due over --partition-spread s while a blackhole cuts it from
  PostgreSQL for --partition-seconds s (both directions, no reset); a standby in the root
  namespace. Posts late (max), posts twice, the longest web request to the cut host,
  workers standing by after the heal, /readyz 200s while stuck, the server's sessions of
  the cut host (tests/harness/partition.py). LEADER_STALE_SECONDS is --stale.
- failover: a primary and its streaming replica, the fleet on the multi-host URL
  (target_session_attrs=read-write); --failover-posts posts over --failover-spread s; a
  third of the way in, the primary stops with -m immediate and the replica is promoted 2 s
  later (tests/harness/failover.py). Both keys led after the promotion, each post once, one
  webhook-id per post at the receiver.
- lossy: the same, with the primary's walsenders SIGSTOPped 1.2 s before the hard stop (the
  last commits never reach the replica).
- standby: after a failover, the old primary comes back as a standby of the new one (fresh
  pg_basebackup, read-only); the app's sessions on it 10 s after it accepts connections.
- pooler: DATABASE_CONNECTION_POOL_URL through a real PgBouncer in transaction mode;
  --pooler-posts posts over 20 s published and delivered, publish lag p99, three timer
  "run now"s started ≤ 2 s, --kill-trials SIGKILLs of the publish leader's host (p95).

    .venv/bin/python bench/faults.py [--only freeze,load,restart,term,chaos,partition,
        failover,lossy,standby,pooler] [--burst 1500] [--load-seconds 60] [--downtimes 1,3,10]
        [--term-trials 5] [--chaos-seconds 90] [--receipt-wait 90] [--seed N] [--stale 10]
        [--partition-seconds 30] [--partition-posts 200] [--partition-spread 40]
        [--failover-posts 300] [--failover-spread 60] [--pooler-posts 200] [--kill-trials 10]
"""

import argparse
import shutil
import signal
import tempfile
import time
from pathlib import Path

from common import log, percentile, report, run_main, table

from tests.harness.chaos import FLEET_ENV, SECRET, Chaos
from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, wait_for
from tests.harness.failover import app_sessions_after, run_failover
from tests.harness.faultkit import FaultFleet
from tests.harness.netfault import Netns
from tests.harness.partition import run_partition, start_partition_fleet
from tests.harness.pgbouncer import PgBouncer
from tests.harness.pgserver import PgServer, multi_host_url
from tests.harness.scenarios import (
    HookReceiver,
    await_receipts,
    freeze_when_burst_starts,
    handover_after,
    keys_led_by_workers,
    load_paths,
    open_transactions,
    p99,
    subscribe,
    upload_to,
)
from tests.harness.traffic import WebhookReceiver, WebLoad

ROWS = ("freeze", "load", "restart", "term", "chaos", "chaos-defaults", "partition",
        "failover", "lossy", "standby", "pooler")


class Row:
    """One line of the table: the fault, what was measured, the target, pass or fail."""

    def __init__(self, fault: str, target: str) -> None:
        self.fault, self.target = fault, target
        self.measured, self.met, self.notes = "–", False, []

    def cells(self) -> list[str]:
        return [self.fault, self.measured, self.target, "pass" if self.met else "**FAIL**"]


def fleet_for(pg: PgServer, name: str, args: argparse.Namespace, **env: str) -> FaultFleet:
    """A fresh database on pg, migrated, with an admin; its instances are started later."""
    url = pg.create_database(f"soloist_{name}_{int(time.time())}")
    return FaultFleet(url, args.log_dir, prefix=name[0], **env)


def _close(fleet: FaultFleet, row: Row) -> None:
    left = fleet.close()
    if left:
        row.met = False
        row.notes.append(f"processes left running: {left}")


# --- freeze ----------------------------------------------------------------------------------

def freeze_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row(f"host frozen mid-burst of {args.burst:,} due posts",
              "every post published ≤ 15 s after the freeze, while the host stays frozen")
    fleet = fleet_for(pg, "freeze", args)
    try:
        fleet.start(args.instances, args.workers)
        host, _pid = fleet.leader(PUBLISH_KEY)
        ids = fleet.schedule("burst", args.burst, lead=3.0)
        freeze = freeze_when_burst_starts(fleet, host, ids)
        log(f"froze {host.name} with {freeze['published']} published; open: {freeze['open']}")
        try:
            took = _all_published_within(fleet, ids, freeze["at"], args.freeze_wait)
            frozen_count = fleet.published(ids)
        finally:
            thawed = host.group_signal(signal.SIGCONT)
        after = _all_published_within(fleet, ids, thawed, 120)
        fleet.wait_settled(90)
        wait_for(lambda: not open_transactions(fleet, host), 30, "the thawed host to finish")
        outcome = fleet.outcome(ids)
        if took is not None:
            row.measured = f"all published {took:.1f} s after the freeze"
        else:
            row.measured = (f"{frozen_count:,}/{len(ids):,} published after {args.freeze_wait:g} s"
                            f" frozen; the rest {after:.1f} s after SIGCONT")
        row.met = took is not None and took <= 15 and outcome.ok
        row.notes += [f"freeze: {freeze['published']} published before it; the host's open "
                      f"transactions then: {freeze['open'] or 'none'}", f"outcome: {outcome}"]
    finally:
        _close(fleet, row)
    return row


def _all_published_within(fleet: FaultFleet, ids: list[int], since: float,
                          seconds: float) -> float | None:
    """Wait until every post of ids is published; return seconds since since, or None."""
    try:
        wait_for(lambda: fleet.published(ids) == len(ids), since + seconds - time.time(),
                 "every post to be published", interval=0.05)
    except AssertionError:
        return None
    return time.time() - since


# --- web load --------------------------------------------------------------------------------

def load_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row(f"{args.load_seconds:g} s of web load ({args.load_processes} processes × "
              f"{args.load_connections} connections) on the leader's instance",
              "0 leadership changes; publish lag p99 ≤ 1 s")
    fleet = fleet_for(pg, "load", args)
    try:
        fleet.start(args.instances, args.workers)
        host, _pid = fleet.leader(PUBLISH_KEY)
        paths = load_paths(fleet, 50)
        first = fleet.last_event_id()
        load = WebLoad(host.port, paths, args.load_seconds, args.load_processes,
                       args.load_connections).start()
        try:
            ids = fleet.schedule("load", int(args.load_seconds * 2), lead=2.0,
                                 spread=max(args.load_seconds - 4, 1))  # due under the load
            result = load.join()
        finally:
            load.stop()
        _all_published_within(fleet, ids, time.time(), 30)
        outcome, changes = fleet.outcome(ids), fleet.events_since(first)
        lag = p99(outcome.lags)
        row.measured = f"{len(changes)} leadership changes; publish lag p99 {lag * 1000:.0f} ms"
        row.met = not changes and lag <= 1.0 and outcome.ok
        row.notes += [f"load: {result.requests:,} answers ({result.rate:.0f} req/s), statuses "
                      f"{dict(result.statuses)}, {result.errors} errors, latency p50 "
                      f"{percentile(result.latencies, 50) * 1000:.0f} ms, p99 "
                      f"{percentile(result.latencies, 99) * 1000:.0f} ms",
                      f"outcome: {outcome}", f"leadership events: {changes[:6]}"]
    finally:
        _close(fleet, row)
    return row


# --- database restart ---------------------------------------------------------------------------

def restart_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row("PostgreSQL restart", "both keys led again ≤ 5 s after it accepts connections")
    fleet = fleet_for(pg, "restart", args)
    times, ok = [], True
    try:
        fleet.start(args.instances, args.workers)
        for downtime in args.downtimes:
            took, trial_ok = _restart_trial(fleet, pg, downtime, row)
            times.append(took)
            ok = ok and trial_ok
        row.measured = f"max {max(times):.2f} s (" + ", ".join(
            f"down {d:g} s → {t:.2f} s" for d, t in zip(args.downtimes, times, strict=True)) + ")"
        row.met = ok and max(times) <= 5.0
    finally:
        _close(fleet, row)
    return row


def _restart_trial(fleet: FaultFleet, pg: PgServer, downtime: float,
                   row: Row) -> tuple[float, bool]:
    fleet.wait_settled(90)
    workers = sorted(fleet.worker_pids())
    ids = fleet.schedule(f"outage{downtime:g}", 1, lead=downtime / 2)
    accepting = pg.restart(downtime=downtime)
    wait_for(lambda: fleet.view.quiet(keys_led_by_workers, fleet), 120,
             "both keys to be led again", interval=0.05)
    took = time.time() - accepting
    _all_published_within(fleet, ids, time.time(), 30)
    fleet.wait_settled(90)
    outcome = fleet.outcome(ids)
    same = sorted(fleet.worker_pids()) == workers
    log(f"restart after {downtime:g} s down: both keys led {took:.2f} s after accepting")
    row.notes.append(f"down {downtime:g} s: keys led {took:.2f} s after accepting; the post "
                     f"due in the outage: {outcome}; worker pids unchanged: {same}")
    return took, outcome.ok and same


# --- SIGTERM with a long request ------------------------------------------------------------------

def term_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row("SIGTERM with a 20 s request in flight", "handover p95 ≤ 0.5 s")
    fleet = fleet_for(pg, "term", args)
    times, running = [], []
    try:
        fleet.start(args.instances, args.workers)
        for trial in range(args.term_trials):
            took, still = _term_trial(fleet, args)
            times.append(took)
            running.append(still)
            log(f"SIGTERM trial {trial + 1}: handover {took:.3f} s, request still running: "
                f"{still}")
        p95 = percentile(times, 95)
        row.measured = f"p95 {p95:.3f} s ({', '.join(f'{t:.3f}' for t in times)})"
        row.met = p95 <= 0.5 and all(running)
        row.notes.append(f"the 20 s request was still running at the handover in "
                         f"{sum(running)}/{len(running)} trials")
    finally:
        _close(fleet, row)
    return row


def _term_trial(fleet: FaultFleet, args: argparse.Namespace) -> tuple[float, bool]:
    while len(fleet.instances) < args.instances:
        fleet.spawn(args.workers)
    fleet.wait_settled(90)
    host, pid = fleet.leader(PUBLISH_KEY)
    upload = upload_to(fleet, host, pid, seconds=20)
    first = fleet.last_event_id()
    fleet.retire(host)
    try:
        sent = time.time()
        host.signal(signal.SIGTERM)
        took = wait_for(lambda: handover_after(fleet, first, host, sent), 40,
                        "a standby on another instance to take the publish key", interval=0.02)
        still = upload.running
        if host.owns(fleet.view.holder(PLUGINS_KEY)):
            wait_for(lambda: not host.owns(fleet.view.holder(PLUGINS_KEY)), 40, "plugins key")
    finally:
        upload.close()
        host.stop()
    return took, still


# --- chaos --------------------------------------------------------------------------------------

def chaos_row(pg: PgServer, args: argparse.Namespace) -> list[Row]:
    row = Row(f"chaos, {args.chaos_seconds:g} s, a fault every 2 s plus one database restart",
              "0 missing, 0 early, 0 posts with two delivery ids; publish lag p99 ≤ 12 s")
    fleet = fleet_for(pg, "chaos", args, **FLEET_ENV)
    receiver = WebhookReceiver(SECRET, fail_rate=0.15, seed=args.seed).start()
    try:
        fleet.start(args.instances, args.workers)
        chaos = Chaos(fleet, pg, receiver, args.seed, args.instances, args.workers)
        chaos.report.instances = args.instances
        rep = chaos.run(args.chaos_seconds, receipt_wait=args.receipt_wait, log=log)
    finally:
        fleet.close()
        receiver.close()
    out = rep.outcome
    missing = len(set(out.missing) | set(rep.not_received))
    lag = p99(out.lags)
    row.measured = (f"{missing} missing ({len(out.missing)} unpublished, {len(rep.not_received)}"
                    f" not received), {len(out.early)} early, {len(rep.two_ids)} with two "
                    f"delivery ids; publish lag p99 {lag:.1f} s")
    row.met = (not missing and not out.early and not out.not_once and not rep.two_ids
               and not rep.leftovers and lag <= 12)
    row.notes += [line for line in str(rep).splitlines()[:7]]
    row.notes.append(f"first receipt after publish_at: p99 {p99(rep.receipt_lags):.1f} s, "
                     f"max {max(rep.receipt_lags, default=float('nan')):.1f} s")
    return [row, changes_row(rep.changes, args)]


def changes_row(changes: dict[str, list], args: argparse.Namespace) -> Row:
    """The chaos run's scheduled changes on live posts: each swapped in once, never early."""
    row = Row(f"chaos, {args.chaos_seconds:g} s: scheduled changes of live posts falling due "
              "through the faults", "each swapped in exactly once, 0 early; lag p99 ≤ 12 s")
    lags, not_once, early = changes["lags"], changes["not_once"], changes["early"]
    total = len(lags) + len(not_once) + len(early)
    row.measured = (f"{total} changes: {len(not_once)} not once, {len(early)} early; "
                    f"lag p99 {p99(lags):.1f} s, max {max(lags, default=float('nan')):.1f} s")
    row.met = bool(total) and not not_once and not early and p99(lags) <= 12
    row.notes += [f"not swapped in once (post, post.updated rows, still pending): {c}"
                  for c in not_once[:10]]
    return row


def chaos_defaults_row(pg: PgServer, args: argparse.Namespace) -> Row:
    """The chaos run with the default webhook settings and no nudging: when does the last
    post reach a receiver that fails every 7th call, counted from the end of the faults?"""
    row = Row(f"chaos, {args.chaos_seconds:g} s, default webhook settings, receiver failing "
              "every 7th call", "every post delivered ≤ 60 s after the run; one id per post")
    fleet = fleet_for(pg, "chaosd", args, WEBHOOK_ALLOW_PRIVATE="true")
    receiver = WebhookReceiver(SECRET, fail_rate=0.0, fail_every=7).start()
    try:
        fleet.start(args.instances, args.workers)
        chaos = Chaos(fleet, pg, receiver, args.seed, args.instances, args.workers)
        chaos.report.instances = args.instances
        rep = chaos.run(args.chaos_seconds, receipt_wait=args.receipt_wait, log=log,
                        nudge=False)
    finally:
        fleet.close()
        receiver.close()
    delivered = [min(r.at for r in got if 200 <= r.status < 300)
                 for got in receiver.by_post().values()
                 if any(200 <= r.status < 300 for r in got)]
    last = max(delivered, default=float("nan")) - rep.ended_at
    missing = len(set(rep.outcome.missing) | set(rep.not_received))
    row.measured = (f"{missing} missing, {len(rep.two_ids)} with two delivery ids; last "
                    f"delivery {last:.1f} s after the run")
    row.met = not missing and not rep.two_ids and last <= 60
    row.notes += [line for line in str(rep).splitlines()[:4]]
    return row


# --- partition ------------------------------------------------------------------------------

def partition_row(_pg: PgServer, args: argparse.Namespace) -> Row:
    stale = args.stale
    row = Row(f"publish leader's host partitioned {args.partition_seconds:g} s, "
              f"{args.partition_posts} posts due over {args.partition_spread:g} s",
              f"late ≤ {stale + 5:g} s, 0 twice; requests ≤ {stale:g} s; sessions gone, "
              f"standing by ≤ 10 s after heal; /readyz not 200 while stuck")
    with Netns() as netns, PgServer("soloist-bench-partition", listen=(netns.db_host,)) as pg:
        receiver = HookReceiver(netns.web_host).start()
        fleet = fleet_for(pg, "partition", args, LEADER_STALE_SECONDS=str(stale), **FLEET_ENV)
        try:
            host = start_partition_fleet(pg, netns, fleet)
            subscribe(fleet, receiver)
            run = run_partition(fleet, netns, host, receiver, args.partition_posts,
                                args.partition_spread, args.partition_seconds, stale)
        finally:
            _close(fleet, row)
            receiver.close()
    out = run.outcome
    slowest = max((r[2] for r in run.requests), default=0.0)
    rejoin = [s for s in run.rejoined.values() if s is not None]
    stood = len(rejoin) == len(run.rejoined) and max(rejoin, default=99) <= 10
    gone = run.sessions_gone
    row.measured = (f"late max {max(out.lags):.1f} s, {len(out.not_once)} twice, "
                    f"{len(run.two_ids)} with two ids; takeover {run.takeover or 0:.1f} s; "
                    f"slowest request {slowest:.1f} s; sessions gone "
                    f"{'never' if gone is None else f'{gone:.1f} s'}; standing by "
                    f"{len(rejoin)}/{len(run.rejoined)} (max {max(rejoin, default=0):.1f} s); "
                    f"/readyz 200 while stuck ×{len(run.readyz_ok_while_stuck)}")
    row.met = (out.ok and max(out.lags) <= stale + 5 and not run.two_ids and slowest <= stale
               and gone is not None and gone <= stale + 4 and stood
               and not run.readyz_ok_while_stuck and not run.not_received)
    row.notes += [f"requests to the cut host (path, status, s): {run.requests}",
                  f"its sessions still on the server: {run.lingering[:6]}",
                  f"outcome: {out}"]
    return row


# --- failover --------------------------------------------------------------------------------

def _failover_pair(args: argparse.Namespace, name: str):
    """Start a primary with a database, its replica, a receiver and a fleet on both."""
    primary = PgServer(f"soloist-bench-{name}-a").__enter__()
    dbname = f"soloist_{name}"
    primary.create_database(dbname)
    replica = primary.replica(f"soloist-bench-{name}-b")
    url = multi_host_url([primary, replica], dbname)
    receiver = HookReceiver().start()
    fleet = FaultFleet(primary.url(dbname, scheme="postgres"), args.log_dir, prefix=name[0],
                       view_url=url, DATABASE_URL=url, LEADER_STALE_SECONDS=str(args.stale),
                       **FLEET_ENV)
    return primary, replica, receiver, fleet, dbname


def _failover(args: argparse.Namespace, name: str, lossy: bool, standby: bool = False) -> Row:
    kind = "lossy failover (walsender stopped 1.2 s first)" if lossy else "failover"
    row = Row(f"primary stopped -m immediate, replica promoted 2 s later, "
              f"{args.failover_posts} posts over {args.failover_spread:g} s ({kind})",
              "both keys led ≤ 10 s after promote; each post once; one webhook-id per post")
    if standby:
        row = Row("old primary back as a read-only standby",
                  "no app connection on it 10 s after it accepts connections")
    primary, replica, receiver, fleet, dbname = _failover_pair(args, name)
    try:
        fleet.start(args.instances, args.workers)
        subscribe(fleet, receiver)
        run = run_failover(fleet, receiver, primary, replica, args.failover_posts,
                           args.failover_spread, lossy=lossy)
        if standby:
            accepting = primary.rebuild_as_standby_of(replica)
            sessions = app_sessions_after(primary, dbname, accepting)
            row.measured = f"{len(sessions)} app sessions on it 10 s on"
            row.met = not sessions and primary.in_recovery()
            row.notes.append(f"sessions: {sessions[:6]}")
            return row
        _failover_measured(row, run)
    except Exception as exc:  # a fleet that cannot start on a multi-host URL is a result
        row.measured = f"{type(exc).__name__}: {str(exc).splitlines()[-1][:160]}"
    finally:
        _close(fleet, row)
        receiver.close()
        replica.close()
        primary.close()
    return row


def _failover_measured(row: Row, run) -> None:
    out = run.outcome
    led = run.led_after_promote
    row.measured = (f"keys led {'never' if led is None else f'{led:.1f} s'} after promote; "
                    f"{len(out.missing)} missing, {len(out.not_once)} twice, "
                    f"{len(run.two_ids)} with two webhook-ids, {len(run.not_received)} "
                    f"not received")
    row.met = (led is not None and led <= 10 and out.ok and not run.two_ids
               and not run.not_received)
    row.notes += [f"published before the stop: {run.published_before}; walsenders stopped "
                  f"{run.lost_window:.1f} s; outcome: {out}",
                  f"two ids: {dict(list(run.two_ids.items())[:3])}",
                  f"posts received more than once under one id (a publication the lost "
                  f"commits undid and the new primary redid, or a retry): {run.sent_again}"]


def failover_row(_pg: PgServer, args: argparse.Namespace) -> Row:
    return _failover(args, "failover", lossy=False)


def lossy_row(_pg: PgServer, args: argparse.Namespace) -> Row:
    return _failover(args, "lossy", lossy=True)


def standby_row(_pg: PgServer, args: argparse.Namespace) -> Row:
    return _failover(args, "standby", lossy=False, standby=True)


# --- pooler ----------------------------------------------------------------------------------

def pooler_row(pg: PgServer, args: argparse.Namespace) -> Row:
    row = Row(f"fleet behind PgBouncer (transaction mode), {args.pooler_posts} posts over 20 s",
              "all published and delivered; lag p99 ≤ 50 ms; SIGKILL handover p95 ≤ 0.5 s; "
              "timers start ≤ 2 s")
    dbname = f"soloist_pooler_{int(time.time())}"
    url = pg.create_database(dbname)
    directory = Path(tempfile.mkdtemp(prefix="soloist-bench-bouncer-"))
    with PgBouncer(pg.port, directory) as bouncer:
        receiver = HookReceiver().start()
        fleet = FaultFleet(url, args.log_dir, prefix="b", LEADER_STALE_SECONDS=str(args.stale),
                           DATABASE_CONNECTION_POOL_URL=bouncer.url(dbname), **FLEET_ENV)
        try:
            fleet.start(args.instances, args.workers)
            subscribe(fleet, receiver)
            _pooler_measure(fleet, receiver, args, row)
        finally:
            _close(fleet, row)
            receiver.close()
    shutil.rmtree(directory, ignore_errors=True)
    return row


def _pooler_measure(fleet: FaultFleet, receiver: HookReceiver, args: argparse.Namespace,
                    row: Row) -> None:
    ids = fleet.schedule("pooled", args.pooler_posts, lead=2.0, spread=20.0)
    _all_published_within(fleet, ids, time.time(), 40)
    out = fleet.outcome(ids)
    missing = await_receipts(receiver, ids, 30)
    starts = [_timer_start(fleet) for _ in range(3)]
    kills = []
    for _ in range(args.kill_trials):
        while len(fleet.instances) < args.instances:
            fleet.spawn(args.workers)
        fleet.wait_settled(90)
        host, _pid = fleet.leader(PUBLISH_KEY)
        first = fleet.last_event_id()
        fleet.retire(host)
        sent = host.group_signal(signal.SIGKILL)
        host.stop()
        kills.append(wait_for(lambda h=host, f=first, s=sent: handover_after(fleet, f, h, s),
                              60, "a standby to take the publish key"))
    lag = p99(out.lags) if out.lags else float("nan")
    late = [s for s in starts if s is None or s > 2]
    row.measured = (f"{len(ids) - len(out.missing)}/{len(ids)} published, {len(missing)} not "
                    f"delivered; lag p99 {lag:.2f} s; SIGKILL handover p95 "
                    f"{percentile(kills, 95):.2f} s; timer starts {starts}")
    row.met = (out.ok and not missing and lag <= 0.05 and percentile(kills, 95) <= 0.5
               and not late)
    row.notes.append(f"outcome: {out}; handovers {[f'{k:.2f}' for k in kills]}")


def _timer_start(fleet: FaultFleet) -> float | None:
    """Queue a run of the webhooks deliver timer now; return s until it started (None)."""
    status, body = fleet.api("GET", "/api/timers")
    timer = next((t for t in body["timers"] if t["action"] == "webhooks.deliver"), None) if (
        status == 200) else None
    if timer is None:
        return None
    status, body = fleet.api("POST", f"/api/timers/{timer['id']}/run")
    sql = ("SELECT extract(epoch FROM started_at - queued_at)::float8 FROM timer_runs "
           "WHERE id = %s AND started_at IS NOT NULL")
    try:
        return round(wait_for(lambda: fleet.view.query(sql, (body["run"]["id"],)), 10,
                              "the run to start", interval=0.05)[0][0], 2)
    except AssertionError:
        return None


# --- main ----------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(ROWS), help="comma-separated rows")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per instance")
    parser.add_argument("--burst", type=int, default=1500)
    parser.add_argument("--freeze-wait", type=float, default=45.0)
    parser.add_argument("--load-seconds", type=float, default=60.0)
    parser.add_argument("--load-processes", type=int, default=4)
    parser.add_argument("--load-connections", type=int, default=16)
    parser.add_argument("--downtimes", default="1,3,10", help="seconds, comma-separated")
    parser.add_argument("--term-trials", type=int, default=5)
    parser.add_argument("--chaos-seconds", type=float, default=90.0)
    parser.add_argument("--receipt-wait", type=float, default=90.0,
                        help="s to wait for webhooks after the run (a dead sender's claim "
                             "is retaken after WEBHOOK_TIMEOUT_SECONDS + 60 s)")
    parser.add_argument("--seed", type=int, default=None, help="chaos seed (default: random)")
    parser.add_argument("--stale", type=float, default=10.0,
                        help="LEADER_STALE_SECONDS of the partition, failover and pooler rows")
    parser.add_argument("--partition-seconds", type=float, default=30.0)
    parser.add_argument("--partition-posts", type=int, default=200)
    parser.add_argument("--partition-spread", type=float, default=40.0)
    parser.add_argument("--failover-posts", type=int, default=300)
    parser.add_argument("--failover-spread", type=float, default=60.0)
    parser.add_argument("--pooler-posts", type=int, default=200)
    parser.add_argument("--kill-trials", type=int, default=10)
    args = parser.parse_args()
    args.only = [r for r in args.only.split(",") if r]
    unknown = set(args.only) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(ROWS)}")
    args.downtimes = [float(d) for d in args.downtimes.split(",")]
    if args.seed is None:
        args.seed = int(time.time()) % 100_000
    return args


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_rows(name: str, runners: dict, args: argparse.Namespace, title: str,
             first: str, header: str = "") -> None:
    """Run the rows args.only names on a throwaway server; report them as one table.

    The instance logs are removed when every row passes and kept otherwise.
    """
    signal.signal(signal.SIGTERM, _interrupt)  # clean up (fleet, server) as on Ctrl-C
    args.log_dir = Path(tempfile.mkdtemp(prefix=f"soloist-bench-{name}-logs-"))
    rows: list[Row] = []
    try:
        with PgServer(f"soloist-bench-{name}") as pg:
            log(f"{header}throwaway PostgreSQL on port {pg.port}; logs in {args.log_dir}")
            for row_name in args.only:
                log(f"row {row_name}")
                made = runners[row_name](pg, args)  # a Row, or a list (chaos: two)
                rows += made if isinstance(made, list) else [made]
                log(f"row {row_name}: {rows[-1].measured}")
        if all(row.met for row in rows):
            shutil.rmtree(args.log_dir, ignore_errors=True)
        else:
            log(f"instance logs kept in {args.log_dir}")
    finally:
        if rows:
            report(title, [("Summary", table([first, "measured", "target", "met"],
                                             [r.cells() for r in rows]))],
                   [f"{r.fault}: {note}" for r in rows for note in r.notes])


def main() -> None:
    args = parse_args()
    runners = {"freeze": freeze_row, "load": load_row, "restart": restart_row,
               "term": term_row, "chaos": chaos_row, "chaos-defaults": chaos_defaults_row,
               "partition": partition_row,
               "failover": failover_row, "lossy": lossy_row, "standby": standby_row,
               "pooler": pooler_row}
    run_rows("faults", runners, args, f"Faults ({args.instances} instances × {args.workers} "
             f"workers, default settings, chaos seed {args.seed})", "fault")


if __name__ == "__main__":
    run_main(main)
