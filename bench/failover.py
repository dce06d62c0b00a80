"""Failover: how long the publish key is leaderless when its holder dies, exits or freezes.

Starts INSTANCES gunicorn instances x WORKERS workers on a fresh database and, trial by
trial, signals the worker process whose lock session holds the publish key (found in
pg_locks): SIGKILL (crash), SIGTERM (graceful worker exit: worker_exit hands over with
NOTIFY) and SIGSTOP (frozen: evicted once its heartbeat is LEADER_STALE_SECONDS old).
Every time is measured from the wall-clock instant just before os.kill to timestamps the
database recorded (same host, same clock; the offset is printed), or to the moment a 10 ms
poller saw the change. Then the same fleet size runs the seed's loop (take the lock, tick,
release, every 10 s; bench/seed_worker.py) and loses its last ticker to SIGKILL.

    .venv/bin/python bench/failover.py [--trials 10] [--stop-trials 3] [--stale 10]
        [--only kill,term,stop,seed] [--plugins-off sitemap,webhooks,housekeeping]
"""

import argparse
import random
import signal
import time

from common import (
    PUBLISH_KEY,
    Bench,
    SeedFleet,
    log,
    percentile,
    pid_of,
    report,
    run_main,
    secs,
    seed_label,
    table,
    wait_for,
)

CANARY_SQL = """
SELECT extract(epoch FROM p.published_at)::float8, o.instance
FROM posts p JOIN outbox_events o ON o.post_id = p.id AND o.topic = 'post.published'
WHERE p.id = %s AND p.status = 'published'
"""


def settle(bench: Bench) -> None:
    """Wait for the whole fleet, then a random 0.5-1.5 s so the signal lands at a random
    point of the followers' poll cycles (this pause is not part of any measurement)."""
    bench.wait_fleet(90)
    time.sleep(random.uniform(0.5, 1.5))


def new_leader(bench: Bench, term0: int, victim: str, canary: int | None, seen: dict):
    """Return the new leader's state once it holds the key, has heartbeaten (and has
    published the canary post), else None. Remembers the first heartbeat it saw."""
    st = bench.state()
    if not st or st[0] <= term0 or st[1] == victim or st[4] is None or st[4] <= st[3]:
        return None
    seen.setdefault("heartbeat", st[4])
    observed = time.time()  # the next snapshot is taken after this instant
    if canary is not None:
        rows = bench.query(CANARY_SQL, (canary,))
        if not rows:
            return None
        seen["published"], seen["publisher"] = rows[0]
    seen["observed"] = observed
    seen.update(term=st[0], holder=st[1], acquired=st[3])
    return seen


def event_at(bench: Bench, after: int, kind: str, holder: str | None = None) -> float | None:
    """Return when the first event of kind (by holder, if given) after event id after was."""
    for _id, k, _term, who, at, _detail in bench.events(PUBLISH_KEY, after):
        if k == kind and (holder is None or who == holder):
            return at
    return None


def wait_event(bench: Bench, after: int, kind: str, holder: str, timeout: float) -> float | None:
    """Wait up to timeout for an event of kind by holder; return when it was, or None."""
    try:
        return wait_for(lambda: event_at(bench, after, kind, holder), timeout,
                        f"a {kind!r} event", interval=0.05)
    except AssertionError:
        log(f"no {kind!r} event by {holder} within {timeout:g} s")
        return None


def signal_holder(bench: Bench, sig: int, canary: bool, timeout: float) -> dict:
    """Signal the publish key's holder and wait for a new leader; return times since t0."""
    settle(bench)
    victim = wait_for(lambda: bench.view.holder(PUBLISH_KEY), 30, "a publish leader")
    term0 = bench.state()[0]
    after = bench.last_event_id()
    pid = pid_of(victim)
    t0 = bench.signal_worker(pid, sig)
    post = bench.insert_posts(f"canary-{term0}", 1, lead=0)[0] if canary else None
    seen: dict = {"victim": victim, "pid": pid, "t0": t0, "after": after}
    wait_for(lambda: new_leader(bench, term0, victim, post, seen), timeout,
             f"a new leader after {signal.Signals(sig).name}", interval=0.01)
    if canary and seen["publisher"] == victim:
        raise AssertionError(f"the canary was published by the signalled leader {victim}")
    return seen


def times(seen: dict) -> dict:
    """Turn a trial's timestamps into seconds since the signal."""
    t0 = seen["t0"]
    out = {"held": seen["acquired"] - t0, "beat": seen["heartbeat"] - t0,
           "work": seen["observed"] - t0}
    if "published" in seen:
        out["tick_clock"] = seen["published"] - t0
    return out


def kill_trial(bench: Bench, timeout: float) -> dict:
    """SIGKILL the holder; gunicorn respawns the worker before the next trial."""
    return times(signal_holder(bench, signal.SIGKILL, canary=True, timeout=timeout))


def term_trial(bench: Bench, timeout: float) -> dict:
    """SIGTERM the holder worker: it finishes, unlocks, NOTIFYs; a standby takes over."""
    seen = signal_holder(bench, signal.SIGTERM, canary=False, timeout=timeout)
    out = times(seen)
    released = wait_event(bench, seen["after"], "released", seen["victim"], 5)
    out["released"] = released - seen["t0"] if released else float("nan")
    return out


def stop_trial(bench: Bench, stale: float) -> dict:
    """SIGSTOP the holder until it is evicted, then SIGCONT it and wait until it knows."""
    try:
        seen = signal_holder(bench, signal.SIGSTOP, canary=True, timeout=stale + 30)
    finally:
        t_cont = max((bench.cont(pid) for pid in list(bench.stopped)), default=time.time())
    out = times(seen)
    # the evicting statement records its event after pg_terminate_backend has returned, so
    # it may commit after the new leader's first tick
    evicted = wait_event(bench, seen["after"], "evicted", seen["victim"], 10)
    out["evicted"] = evicted - seen["t0"] if evicted else float("nan")
    lost = wait_for(lambda: event_at(bench, seen["after"], "lost", seen["victim"]), 30,
                    "the thawed worker to record that it lost the key", interval=0.05)
    out["lost_after_cont"] = lost - t_cont
    if seen["pid"] not in bench.worker_pids():
        log(f"note: thawed worker {seen['pid']} is gone (gunicorn timeout?)")
    return out


def seed_trials(bench: Bench, processes: int, trials: int, interval: float) -> list[dict]:
    """Run the seed's loop in `processes` processes; SIGKILL the last ticker each trial."""
    fleet = SeedFleet(bench, interval, publish=True)
    log(f"seed: starting {processes} seed workers (tick every {interval:g} s, random phase)")
    fleet.start(processes)
    results = []
    for i in range(trials):
        last = bench.query("SELECT coalesce(max(id), 0) FROM bench_seed_ticks")[0][0]
        tick_id, pid = wait_for(lambda last=last: _tick_after(bench, last), interval + 10,
                                "a seed tick", interval=0.01)
        t0 = fleet.kill(pid)
        at = wait_for(lambda tid=tick_id, pid=pid, t0=t0: _other_tick(bench, tid, pid, t0),
                      2 * interval + 10, "another seed worker to tick", interval=0.01)
        results.append({"ticked": at - t0})
        log(f"seed trial {i + 1}/{trials}: next tick by another process {at - t0:.3f} s "
            "after the kill")
        fleet.spawn()
        fleet.check_alive()
    fleet.stop()
    return results


def _tick_after(bench: Bench, last: int):
    rows = bench.query("SELECT id, pid FROM bench_seed_ticks WHERE id > %s ORDER BY id DESC "
                       "LIMIT 1", (last,))
    return rows[0] if rows else None


def _other_tick(bench: Bench, tick_id: int, pid: int, t0: float):
    rows = bench.query(
        "SELECT extract(epoch FROM at)::float8 FROM bench_seed_ticks "
        "WHERE id > %s AND pid <> %s AND at > to_timestamp(%s) ORDER BY id LIMIT 1",
        (tick_id, pid, t0))
    return rows[0][0] if rows else None


def run_trials(name: str, n: int, fn) -> list[dict]:
    """Run n trials of fn, logging each one."""
    results = []
    for i in range(n):
        result = fn()
        results.append(result)
        log(f"{name} trial {i + 1}/{n}: " + ", ".join(f"{k} {v:.3f} s"
                                                       for k, v in result.items()))
    return results


def stat_row(label: str, approach: str, values: list[float], target: float | None,
             target_text: str, at: float = 95) -> list[str]:
    """One summary row: p50, p95, max and whether the p95 (or max) meets the target."""
    p50, p95, top = percentile(values, 50), percentile(values, 95), max(values)
    check = percentile(values, at)
    met = "–" if target is None else ("yes" if check <= target else "**no**")
    return [label, approach, str(len(values)), secs(p50), secs(p95), secs(top), target_text, met]


def summary(results: dict, args: argparse.Namespace, stale: float) -> str:
    """The main table: every scenario, both approaches, and the ratio."""
    rows = []
    kill, term, stop, seed = (results.get(k) for k in ("kill", "term", "stop", "seed"))
    procs = args.seed_procs
    if kill:
        rows.append(stat_row("SIGKILL holder → another process holds the key", "Soloist",
                             [r["held"] for r in kill], None, ""))
        rows.append(stat_row("SIGKILL holder → new leader has ticked (a due post is live)",
                             "Soloist", [r["work"] for r in kill], 1.5, "p95 ≤ 1.5 s"))
    if seed:
        rows.append(stat_row("SIGKILL last ticker → another process ticks",
                             seed_label(procs, args.seed_interval),
                             [r["ticked"] for r in seed], None, ""))
    if kill and seed:
        rows.append(ratio_row([r["work"] for r in kill], [r["ticked"] for r in seed]))
    if term:
        rows.append(stat_row("SIGTERM holder worker → another process holds the key",
                             "Soloist", [r["held"] for r in term], 0.5, "p95 ≤ 0.5 s"))
    if stop:
        rows.append(stat_row("SIGSTOP holder → evicted, replaced and ticked", "Soloist",
                             [r["work"] for r in stop], stale + 2, f"max ≤ {stale + 2:g} s",
                             at=100))
    headers = ["scenario", "approach", "trials", "p50", "p95", "max", "target", "met"]
    return table(headers, rows)


def ratio_row(soloist: list[float], seed: list[float]) -> list[str]:
    """seed / Soloist for p50, p95 and max."""
    def ratio(p: float) -> str:
        return f"{percentile(seed, p) / percentile(soloist, p):.1f}×"
    return ["ratio seed / Soloist (time until the work resumes)", "", "", ratio(50),
            ratio(95), ratio(100), "", ""]


def details(results: dict) -> str:
    """Where the time goes in each scenario (medians)."""
    rows = []
    if results.get("kill"):
        k = results["kill"]
        rows.append(["SIGKILL", f"new leader holds {_med(k, 'held')}, first heartbeat "
                     f"{_med(k, 'beat')}", f"its publish tick starts {_med(k, 'tick_clock')} "
                     f"({_med(k, 'tick_clock', 'beat')} after that heartbeat)",
                     f"due post seen published {_med(k, 'work')}"])
    if results.get("term"):
        t = results["term"]
        rows.append(["SIGTERM", f"old leader released {_med(t, 'released')}",
                     f"new leader holds {_med(t, 'held')}, first heartbeat {_med(t, 'beat')}",
                     f"heartbeat seen {_med(t, 'work')}"])
    if results.get("stop"):
        s = results["stop"]
        rows.append(["SIGSTOP", f"evicted {_med(s, 'evicted')}",
                     f"new leader holds {_med(s, 'held')}, due post seen published "
                     f"{_med(s, 'work')}",
                     f"thawed worker recorded 'lost' {_med(s, 'lost_after_cont')} after SIGCONT"])
    return table(["signal", "step 1 (median, since the signal)", "step 2", "step 3"], rows)


def _med(results: list[dict], key: str, minus: str | None = None) -> str:
    return secs(percentile([r[key] - (r[minus] if minus else 0) for r in results], 50))


def raw(results: dict) -> list[str]:
    """Every trial's headline number, for the record."""
    keys = {"kill": "work", "term": "held", "stop": "work", "seed": "ticked"}
    return [f"{name} per trial (s): " + ", ".join(f"{r[keys[name]]:.3f}" for r in rs)
            for name, rs in results.items() if rs]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10, help="SIGKILL and SIGTERM trials")
    parser.add_argument("--stop-trials", type=int, default=3, help="SIGSTOP trials")
    parser.add_argument("--seed-trials", type=int, default=None, help="default: --trials")
    parser.add_argument("--plugins-off", default="",
                        help="comma-separated plugins to switch off first, e.g. "
                             "sitemap,webhooks,housekeeping (default: none, as shipped)")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per instance")
    parser.add_argument("--stale", type=float, default=None,
                        help="LEADER_STALE_SECONDS for the whole fleet (default: the app's, 10)")
    parser.add_argument("--poll", type=float, default=None,
                        help="FOLLOWER_POLL_SECONDS (default: the app's, 1)")
    parser.add_argument("--seed-interval", type=float, default=10.0)
    parser.add_argument("--seed-procs", type=int, default=None,
                        help="seed worker processes (default: instances x workers)")
    parser.add_argument("--only", default="kill,term,stop,seed",
                        help="comma-separated subset of kill,term,stop,seed")
    args = parser.parse_args()
    args.seed_procs = args.seed_procs or args.instances * args.workers
    return args


def run(bench: Bench, args: argparse.Namespace, results: dict) -> None:
    only = set(args.only.split(","))
    stale = args.stale or 10.0
    if only & {"kill", "term", "stop"}:
        log(f"starting {args.instances} instances x {args.workers} workers")
        bench.disable_plugins(filter(None, args.plugins_off.split(",")))
        bench.start_fleet(args.instances, args.workers, FOLLOWER_POLL_SECONDS=args.poll,
                          LEADER_STALE_SECONDS=args.stale)
        log(f"fleet ready; database clock offset {bench.clock_offset() * 1000:+.2f} ms")
    if "kill" in only:
        results["kill"] = run_trials("SIGKILL", args.trials, lambda: kill_trial(bench, 30))
    if "term" in only:
        results["term"] = run_trials("SIGTERM", args.trials, lambda: term_trial(bench, 30))
    if "stop" in only:
        results["stop"] = run_trials("SIGSTOP", args.stop_trials, lambda: stop_trial(bench, stale))
    bench.stop_fleet()  # the seed's workers must not compete with Soloist's leaders
    if "seed" in only:
        results["seed"] = seed_trials(bench, args.seed_procs,
                                      args.seed_trials or args.trials, args.seed_interval)


def main() -> None:
    args = parse_args()
    if args.stale and args.stale + 2 > 28:
        raise SystemExit("--stale must stay well below gunicorn's 30 s worker timeout")
    results: dict = {}
    stale = args.stale or 10.0
    try:
        with Bench("failover") as bench:
            run(bench, args, results)
    finally:
        if any(results.values()):
            settings = (f"{args.instances} instances × {args.workers} workers, "
                        f"FOLLOWER_POLL_SECONDS={args.poll or 1:g}, "
                        f"LEADER_STALE_SECONDS={stale:g}, plugins off: "
                        f"{args.plugins_off or 'none'}")
            report(f"Failover ({settings})",
                   [("Summary", summary(results, args, stale)),
                    ("Where the time goes", details(results))],
                   ["Times run from the instant just before the signal was sent. "
                    "Percentiles are nearest-rank (p95 of 10 trials is the largest).",
                    "'holds the key' = the new term's acquired_at in leader_state (database "
                    "clock); 'ticked' = a post made due right after the signal was seen "
                    "published by a 10 ms poller (commit visible; its published_at is the "
                    "earlier 'tick's clock').",
                    *raw(results)])


if __name__ == "__main__":
    run_main(main)
