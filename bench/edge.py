"""Readers behind Varnish: how soon each change reaches them, and how much Varnish spares.

A fleet of --instances x --workers gunicorn processes (2 x 2) on a throwaway database, behind
a real Varnish (tests/edge.py: Debian's varnishd, the handbook's VCL docs/soloist.vcl, the
instances taken in turn), run twice: without CACHE_PURGE (the copies' lifetimes alone: the
"before") and with CACHE_PURGE naming the Varnish (purges from the outbox). Readers are
threads, one a page, each a GET every --interval (0.1 s) through Varnish, signed out.

Each scenario, --trials times with new posts, with its time T on the database clock:
- publish: a post scheduled for T; when its page, the home, the feed and the sitemap
  first show it, after T;
- takedown: a live post whose unpublish time is T; when each page first stops showing
  it; and a copy of its page read once before and not since ("a page read once an hour"),
  read again one second after T: is it gone?
- edit: a live post's title changed at T (as an editor's save); when each page shows it;
- scheduled change: a live post's change due at T, swapped in by the publish leader;
- steady reading: --steady seconds of readers with nothing changing: the share of their
  requests Varnish answered from a copy, and the share that reached the origin;
- purger down (with purges only): Varnish refuses purges (503) for --down seconds while
  --changes edits are made, then takes them again: when the last purge was done, and
  when readers saw the last edit, after the purger came back; none may be lost.

    .venv/bin/python bench/edge.py [--trials 5] [--before-trials 1] [--down 60]
        [--changes 10] [--steady 30] [--interval 0.1] [--instances 2] [--workers 2]

Needs varnishd with varnish-modules (make system-deps); exits 2 without it.
"""

import argparse
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from common import Bench, log, percentile, report, run_main, secs, table

from tests.cluster import wait_for
from tests.edge import Read, Varnish

PAGES = ("post", "home", "feed", "sitemap")
TARGET = 1.0  # seconds after the change
PATHS = {"home": "/", "feed": "/feed.xml", "sitemap": "/sitemap.xml"}


@dataclass
class Watch:
    """Readers of some pages until each shows what it should (or the deadline passes)."""

    cache: Varnish
    at: float  # T, on this process's clock
    checks: dict[str, tuple[str, Callable[[Read], bool]]]  # page: (path, shows the change)
    interval: float
    deadline: float
    seen: dict[str, float] = field(default_factory=dict)  # page: seconds after T
    early: dict[str, bool] = field(default_factory=dict)  # shown before T (a wrong copy)
    reads: int = 0
    hits: int = 0

    def run(self) -> dict[str, float | None]:
        threads = [threading.Thread(target=self._read, args=(page,)) for page in self.checks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return {page: self.seen.get(page) for page in self.checks}

    def _read(self, page: str) -> None:
        path, shows = self.checks[page]
        while time.time() < self.at + self.deadline:
            started = time.time()
            answer = self.cache.read(path)
            self.reads, self.hits = self.reads + 1, self.hits + answer.hit
            if shows(answer):
                if started >= self.at:
                    self.seen[page] = max(0.0, time.time() - self.at)
                    return
                self.early[page] = True
            time.sleep(max(0.0, self.interval - (time.time() - started)))


class Fleet:
    """The fleet, its Varnish, and an app on its database to make changes with."""

    def __init__(self, bench: Bench, args: argparse.Namespace, purge: bool) -> None:
        from tests.cluster import Instance
        from tests.support import make_app

        self.bench, self.args, self.purge, self.serial = bench, args, purge, 0
        instances = [Instance(f"edge{i + 1}", bench.url, workers=args.workers,
                              log_dir=bench.log_dir) for i in range(args.instances)]
        self.cache = Varnish([i.port for i in instances])
        for instance in instances:
            if purge:
                instance.env["CACHE_PURGE"] = self.cache.purger
            bench.instances.append(instance.start())
        bench.expected = args.instances * args.workers
        bench.wait_fleet(120)
        self.app = make_app(bench.url, CACHE_PURGE=[self.cache.purger] if purge else [])
        self.offset = bench.clock_offset()

    def close(self) -> None:
        self.bench.stop_fleet()
        self.cache.close()

    def db_now(self) -> datetime:
        return datetime.fromtimestamp(time.time() + self.offset, UTC)

    def local(self, at: datetime) -> float:
        return at.timestamp() - self.offset

    def name(self, what: str) -> tuple[str, str]:
        self.serial += 1
        stamp = f"{self.serial} {int(time.time())}"
        return f"{what} {stamp}", f"{what}-{stamp}".lower().replace(" ", "-")

    def live(self, title: str, slug: str, unpublish_at: datetime | None = None) -> int:
        from webapp import posts

        with self.app.app_context():
            post_id = posts.create_post(title, slug, "Text.").id
            posts.publish_now(post_id)
            if unpublish_at is not None:
                posts.set_unpublish_time(post_id, posts.get_post(post_id).version, unpublish_at)
        return post_id

    def watch(self, at: datetime, checks: dict, deadline: float | None = None) -> Watch:
        return Watch(self.cache, self.local(at), checks, self.args.interval,
                     deadline or self.args.deadline)

    def warm(self, paths: list[str]) -> None:
        """Read each path until Varnish holds a copy (readers were there before)."""
        for path in paths:
            wait_for(lambda p=path: self.cache.read(p).hit, 30, f"a copy of {path}")


def listed(text: str) -> Callable[[Read], bool]:
    return lambda answer: text in answer.body


def unlisted(text: str) -> Callable[[Read], bool]:
    return lambda answer: text not in answer.body


def page_checks(slug: str, title: str, show: bool) -> dict:
    """The four pages, each checked for the post (show) or for its absence."""
    on = listed if show else unlisted
    post = ((lambda a: a.status == 200 and title in a.body) if show
            else (lambda a: a.status == 404))
    return {"post": (f"/posts/{slug}", post), "home": ("/", on(title)),
            "feed": ("/feed.xml", on(title)), "sitemap": ("/sitemap.xml", on(f"/posts/{slug}"))}


def publish(fleet: Fleet, lead: float) -> dict:
    from webapp import posts

    title, slug = fleet.name("Publish")
    at = fleet.db_now() + timedelta(seconds=lead)
    with fleet.app.app_context():
        posts.create_post(title, slug, "Text.", at)
    checks = page_checks(slug, title, True)
    fleet.warm([path for path, _ in checks.values()])
    return {"times": fleet.watch(at, checks).run()}


def takedown(fleet: Fleet, lead: float) -> dict:
    title, slug = fleet.name("Takedown")
    at = fleet.db_now() + timedelta(seconds=lead)
    fleet.live(title, slug, unpublish_at=at)
    checks = page_checks(slug, title, False)
    rare = f"/posts/{slug}?read=once"  # a copy of its own, read once before and not since
    fleet.warm([path for path, _ in checks.values()] + [rare])
    times = fleet.watch(at, checks).run()
    time.sleep(max(0.0, fleet.local(at) + 1 - time.time()))
    return {"times": times, "rare_gone": fleet.cache.read(rare).status == 404}


def edit(fleet: Fleet, lead: float) -> dict:
    from webapp import posts

    title, slug = fleet.name("Edit")
    post_id = fleet.live(title, slug)
    checks = {k: v for k, v in page_checks(slug, title + " edited", True).items()
              if k != "sitemap"}  # the sitemap shows no title
    fleet.warm([path for path, _ in checks.values()])
    time.sleep(lead)
    at = fleet.db_now()
    with fleet.app.app_context():
        post = posts.get_post(post_id)
        posts.update_post(post_id, post.version, None, title + " edited", slug, post.body)
    return {"times": fleet.watch(at, checks).run()}


def change(fleet: Fleet, lead: float) -> dict:
    from webapp import posts

    title, slug = fleet.name("Change")
    post_id = fleet.live(title, slug)
    at = fleet.db_now() + timedelta(seconds=lead)
    with fleet.app.app_context():
        posts.schedule_change(post_id, title + " changed", "New text.", at)
    checks = {k: v for k, v in page_checks(slug, title + " changed", True).items()
              if k != "sitemap"}
    fleet.warm([path for path, _ in checks.values()])
    return {"times": fleet.watch(at, checks).run()}


SCENARIOS = {"publish": publish, "takedown": takedown, "edit": edit,
             "scheduled change": change}


def steady(fleet: Fleet, seconds: float) -> dict:
    """Readers on four pages for seconds, nothing changing: hits and origin requests."""
    title, slug = fleet.name("Steady")
    fleet.live(title, slug)
    checks = page_checks(slug, "never shown anywhere", True)
    wait_for(lambda: not waiting(fleet.bench), 60, "the publish's purges", interval=0.05)
    fleet.warm([path for path, _ in checks.values()])  # readers were there before
    watch = Watch(fleet.cache, time.time(), checks, fleet.args.interval, seconds)
    before = fleet.cache.counters()
    watch.run()
    after = fleet.cache.counters()
    client = after["client_req"] - before["client_req"]
    return {"reads": watch.reads, "hit_ratio": watch.hits / max(1, watch.reads),
            "origin": (after["backend_req"] - before["backend_req"]) / max(1, client)}


def purger_down(fleet: Fleet, args: argparse.Namespace) -> dict:
    """Purges refused for args.down seconds while args.changes edits are made; then back."""
    from webapp import posts

    made = [fleet.name("Outage") for _ in range(args.changes)]
    ids = [fleet.live(title, slug) for title, slug in made]
    fleet.warm([f"/posts/{slug}" for _, slug in made])
    fleet.cache.purges(False)
    down_at = time.time()
    try:
        for n, ((title, slug), post_id) in enumerate(zip(made, ids, strict=True)):
            time.sleep(max(0.0, down_at + args.down * n / args.changes - time.time()))
            with fleet.app.app_context():
                post = posts.get_post(post_id)
                posts.update_post(post_id, post.version, None, title + " edited", slug,
                                  post.body)
        time.sleep(max(0.0, down_at + args.down - time.time()))
        stale = sum(title + " edited" not in fleet.cache.read(f"/posts/{slug}").body
                    for title, slug in made)
    finally:
        fleet.cache.purges(True)
    back = time.time()
    wait_for(lambda: not waiting(fleet.bench), 120, "every purge to be done", interval=0.05)
    done = time.time() - back
    checks = {slug: (f"/posts/{slug}", listed(title + " edited")) for title, slug in made}
    watch = Watch(fleet.cache, back, checks, args.interval, 120)
    seen = watch.run()
    failed = fleet.bench.query("SELECT count(*) FROM cache_purges WHERE status = 'failed'")[0][0]
    return {"done": done, "seen": max(v for v in seen.values() if v is not None)
            if all(v is not None for v in seen.values()) else None,
            "stale_while_down": stale, "failed": failed, "changes": args.changes}


def waiting(bench: Bench) -> int:
    return bench.query("SELECT count(*) FROM cache_purges "
                       "WHERE status IN ('pending', 'sending')")[0][0]


def run_fleet(bench: Bench, args: argparse.Namespace, purge: bool, trials: int) -> dict:
    log(f"{args.instances} instances x {args.workers} workers behind Varnish, "
        f"{'CACHE_PURGE set' if purge else 'no CACHE_PURGE'}")
    fleet = Fleet(bench, args, purge)
    found: dict = {"scenarios": {name: [] for name in SCENARIOS}}
    try:
        found["browser"] = _browser_header(fleet)
        for trial in range(trials):
            for name, scenario in SCENARIOS.items():
                log(f"trial {trial + 1}/{trials}: {name}")
                found["scenarios"][name].append(scenario(fleet, args.lead))
        log(f"steady reading for {args.steady:g} s")
        found["steady"] = steady(fleet, args.steady)
        if purge and args.down > 0:
            log(f"the purger down for {args.down:g} s")
            found["down"] = purger_down(fleet, args)
    finally:
        fleet.close()
    return found


def _browser_header(fleet: Fleet) -> str:
    import urllib.request

    with urllib.request.urlopen(fleet.cache.url + "/", timeout=10) as answer:
        return answer.headers.get("Cache-Control", "")


def visible_rows(label: str, found: dict, deadline: float) -> list[list[str]]:
    rows = []
    for name, trials in found["scenarios"].items():
        pages = [p for p in PAGES if p in trials[0]["times"]] if trials else []
        for page in pages:
            values = [t["times"][page] for t in trials]
            late = [v if v is not None else deadline for v in values]
            missed = sum(v is None for v in values)
            p99 = percentile(late, 99)
            rows.append([label, name, page, secs(percentile(late, 50)),
                         secs(p99) + (f" ({missed} not within {deadline:g} s)" if missed else ""),
                         "yes" if p99 <= TARGET and not missed else "**no**"])
        if name == "takedown" and trials:
            gone = sum(t["rare_gone"] for t in trials)
            rows.append([label, name, "post, read once before", "–",
                         f"gone 1 s after: {gone} of {len(trials)}",
                         "yes" if gone == len(trials) else "**no**"])
    return rows


def main() -> None:
    from common import fleet_parser

    from tests.conftest import REFERENCE_LOOP, _reference_loop

    parser = fleet_parser(__doc__.splitlines()[0], instances=2, workers=2)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--before-trials", type=int, default=1,
                        help="trials without CACHE_PURGE (0: skip the 'before')")
    parser.add_argument("--lead", type=float, default=3.0,
                        help="seconds from making a change to its time")
    parser.add_argument("--deadline", type=float, default=90.0,
                        help="seconds after its time a reader waits for a change")
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--steady", type=float, default=30.0)
    parser.add_argument("--down", type=float, default=60.0)
    parser.add_argument("--changes", type=int, default=10)
    args = parser.parse_args()
    results = {}
    with Bench("edge") as bench:
        if args.before_trials:
            results["before"] = run_fleet(bench, args, False, args.before_trials)
        results["after"] = run_fleet(bench, args, True, args.trials)
    loop = min(_reference_loop() for _ in range(3))
    rows, steady_rows = [], []
    for label, key in (("no CACHE_PURGE (before)", "before"), ("CACHE_PURGE", "after")):
        if key not in results:
            continue
        found = results[key]
        rows += visible_rows(label, found, args.deadline)
        s = found["steady"]
        steady_rows.append([label, f"{s['reads']:,}", f"{s['hit_ratio'] * 100:.1f} %",
                            f"{s['origin'] * 100:.2f} %", found["browser"],
                            "yes" if s["hit_ratio"] >= 0.95 and s["origin"] <= 0.01
                            else "**no**"])
    sections = [
        ("A change seen by readers polling every "
         f"{args.interval:g} s, after its time (p50 / p99 of {args.trials} trials)",
         table(["fleet", "change", "page", "p50", "p99", f"<= {TARGET:g} s?"], rows)),
        (f"Steady reading, {args.steady:g} s, nothing changing",
         table(["fleet", "readers' requests", "answered from Varnish's copy",
                "reached the origin", "Cache-Control a browser gets", "hits >= 95 %, "
                "origin <= 1 %?"], steady_rows))]
    down = results["after"].get("down")
    if down:
        sections.append((
            f"The purger down {args.down:g} s ({down['changes']} edits meanwhile), then back",
            table(["edits still stale at the end of the outage", "every purge done after it "
                   "was back", "readers saw every edit after", "purges failed (lost)",
                   "<= 10 s, none lost?"],
                  [[down["stale_while_down"], secs(down["done"]), secs(down["seen"]),
                    down["failed"], "yes" if down["seen"] is not None and down["seen"] <= 10
                    and not down["failed"] else "**no**"]])))
    report("Readers behind Varnish: every change on time at the edge", sections, [
        f"Machine speed: {REFERENCE_LOOP:,} Python additions in {loop * 1000:.0f} ms "
        "(best of 3, after the run; tests/conftest.py).",
        f"Fleet: {args.instances} gunicorn instances x {args.workers} workers, schedulers "
        "running, behind one varnishd (malloc 64 MB, default_grace 60 s, the instances in "
        "turn); readers: one thread a page, a GET every "
        f"{args.interval:g} s, signed out. A change's time T is on the database clock.",
        "'before': the same code with CACHE_PURGE unset (lifetimes alone: max-age=60, "
        "stale-while-revalidate=300, ended at a known change). A page not showing the change "
        f"within --deadline ({args.deadline:g} s) counts as that.",
        "A post page read once before: its own copy (?read=once), cached once before T and "
        "not read again until 1 s after T.",
    ])


if __name__ == "__main__":
    run_main(main)
