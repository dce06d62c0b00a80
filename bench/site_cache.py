"""Public site: the post page rendered, kept in the workers' memory, and revalidated (a 304).

One gunicorn instance (WEB_CONCURRENCY=2 gthread workers, schedulers running) serves a fresh
PostgreSQL database holding POSTS published posts with Markdown bodies of a few paragraphs
(bench/web_perf.py's fill). wrk asks, over --connections connections:

- first with SITE_PAGE_CACHE_MB=0 (every 200 rendered, as before webapp/site/pagecache.py):
  a random post per request, then one post page again and again;
- then with the default: that one post page (sent from each worker's memory, validated by
  the one-row version read), a random post of the first --hot (all of them kept), a random
  post of all (mostly misses: a worker keeps at most pagecache.MAX_PAGES);
- the same page with If-None-Match: the ETag that post's page sent (read for every post
  beforehand): a CDN or a browser revalidating its copy; answered 304 from one primary-key
  read, nothing rendered;
- GET /healthz, the framework's floor, for reference (--no-floor skips it).

Each gets a warm-up run, then a measured run (`wrk --latency`); the status codes of the
measured requests are counted from gunicorn's access log, so a 304 run that answered 200 (or
anything else) fails loudly. The database is dropped on the way out.

    .venv/bin/python bench/site_cache.py [--posts 10000] [--connections 16] [--threads 2]
        [--duration 15] [--warmup 5] [--hot 1000] [--no-floor]

Needs wrk (apt-get install -y wrk); exits 2 without it.
"""

import argparse
import collections
import http.client
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from web_perf import POST_LUA, CpuMeter, fill, find_wrk, run_wrk, wrk_command  # noqa: E402

RENDERED_TARGET = 600.0
NOT_MODIFIED_TARGET = 1500.0
KEPT_TARGET = 2000.0  # a post page from a worker's memory
ACCESS_RE = re.compile(r'"GET (\S+) HTTP/[\d.]+" (\d{3}) ')

# Each request asks for a random post with the ETag that post's page was sent with.
CONDITIONAL_LUA = """
local etags = {{}}
for line in io.lines("{path}") do etags[#etags + 1] = line end
math.randomseed(os.time())
request = function()
  local i = math.random(1, #etags)
  return wrk.format("GET", "/posts/bench-" .. i, {{["If-None-Match"] = etags[i]}})
end
"""


def read_etags(base: str, n: int) -> list[str]:
    """GET every post page once (keep-alive, 4 at a time); return their ETags in post order."""
    parts = urlsplit(base)

    def batch(numbers: range) -> list[str]:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        found = []
        for i in numbers:
            conn.request("GET", f"/posts/bench-{i}")
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200 or not resp.getheader("ETag"):
                raise RuntimeError(f"/posts/bench-{i}: {resp.status}, ETag "
                                   f"{resp.getheader('ETag')!r}")
            found.append(resp.getheader("ETag"))
        conn.close()
        return found

    step = -(-n // 4)
    with ThreadPoolExecutor(4) as pool:
        chunks = pool.map(batch, [range(1 + k, min(n, k + step) + 1) for k in range(0, n, step)])
    return [etag for chunk in chunks for etag in chunk]


def statuses(log_path: Path, offset: int, prefix: str) -> collections.Counter:
    """Count the access log's statuses, after offset, of GETs whose path starts with prefix."""
    with open(log_path) as log_file:
        log_file.seek(offset)
        return collections.Counter(status for path, status in ACCESS_RE.findall(log_file.read())
                                   if path.startswith(prefix))


def measure(bench, inst, wrk: str, args: argparse.Namespace, what: str, url: str,
            script: Path | None, prefix: str) -> dict:
    """Warm up, then measure one run; return wrk's numbers with the statuses served."""
    from common import log

    log(f"warming up: {what}")
    run_wrk(wrk_command(wrk, url, args.threads, args.connections, args.warmup, script, []))
    time.sleep(0.5)
    offset = inst.log_path.stat().st_size
    load = os.getloadavg()[0]
    log(f"measuring: {what}")
    meter = CpuMeter(bench, inst)
    meter.start()
    numbers, output = run_wrk(wrk_command(wrk, url, args.threads, args.connections,
                                          args.duration, script, []))
    numbers["cpu"] = meter.stop()
    if "p99" not in numbers:
        raise RuntimeError(f"no latency distribution in wrk's output:\n{output}")
    time.sleep(0.5)  # let the last access-log lines land
    numbers.update(what=what, load=load, statuses=statuses(inst.log_path, offset, prefix))
    log(f"{what}: {numbers['rps']:.0f} req/s, p50 {numbers['p50']:.1f} ms, "
        f"p99 {numbers['p99']:.1f} ms, statuses {dict(numbers['statuses'])}")
    return numbers


def scripts(tmp: str, args: argparse.Namespace, base: str) -> dict[str, Path]:
    """Write wrk's scripts: a random post of all, of the hot set, and with its ETag."""
    paths = {name: Path(tmp) / f"{name}.lua" for name in ("all", "hot", "conditional")}
    paths["all"].write_text(POST_LUA.format(n=args.posts))
    paths["hot"].write_text(POST_LUA.format(n=min(args.hot, args.posts)))
    etags = Path(tmp) / "etags.txt"
    etags.write_text("\n".join(read_etags(base, args.posts)) + "\n")
    paths["conditional"].write_text(CONDITIONAL_LUA.format(path=etags))
    return paths


def run(args: argparse.Namespace, wrk: str) -> tuple[list[dict], int]:
    """Fill; measure renders with no page kept, then pages from memory; return the results."""
    from common import Bench, log

    results = []
    with Bench("site") as bench, tempfile.TemporaryDirectory(prefix="soloist-site-") as tmp:
        avg_len = fill(bench, args.posts)
        for memory in (0, None):  # before (every 200 rendered), then the default
            log(f"starting 1 gunicorn instance x 2 workers, SITE_PAGE_CACHE_MB={memory}")
            bench.start_fleet(1, 2, SITE_PAGE_CACHE_MB=memory)
            inst = bench.instances[0]
            log(f"reading the ETag of each of the {args.posts:,} post pages")
            lua = scripts(tmp, args, inst.url)
            for _ in range(0 if memory == 0 else 6):  # each worker keeps all the hot set
                read_etags(inst.url, min(args.hot, args.posts))
            for what, url, script, prefix in runs(args, inst.url, lua, memory == 0):
                results.append(measure(bench, inst, wrk, args, what, url, script, prefix))
            bench.stop_fleet()
    return results, avg_len


def runs(args: argparse.Namespace, base: str, lua: dict[str, Path], before: bool) -> list:
    """Return the runs of one fleet: (what, url, script, access-log prefix, target, status)."""
    one = f"{base}/posts/bench-1"
    if before:
        return [("post page, random of all the posts (200, rendered: no page kept)",
                 f"{base}/posts/", lua["all"], "/posts/"),
                ("one post page (200, rendered: no page kept)", one, None, "/posts/")]
    found = [("one post page (200, from memory)", one, None, "/posts/"),
             (f"post page, random of the first {min(args.hot, args.posts):,} (200, from memory)",
              f"{base}/posts/", lua["hot"], "/posts/"),
             ("post page, random of all the posts (200, a miss renders)", f"{base}/posts/",
              lua["all"], "/posts/"),
             ("post page, If-None-Match with its ETag (304)", f"{base}/posts/",
              lua["conditional"], "/posts/")]
    if args.floor:
        found.append(("GET /healthz (the framework's floor, for reference)",
                      f"{base}/healthz", None, "/healthz"))
    return found


def print_report(args: argparse.Namespace, results: list[dict], avg_len: int) -> None:
    """Print the table, with the machine's loop speed."""
    from common import report, table

    from tests.conftest import REFERENCE_LOOP, _reference_loop

    targets = [(RENDERED_TARGET, "200"), (None, "200"), (KEPT_TARGET, "200"),
               (KEPT_TARGET, "200"), (None, "200"), (NOT_MODIFIED_TARGET, "304"), (None, "200")]
    rows = [row(r, target, status) for r, (target, status) in zip(results, targets, strict=False)]
    loop = min(_reference_loop() for _ in range(3))
    report("Public site: rendered, kept and revalidated post pages", [
        ("Results (wrk, measured run after a warm-up)",
         table(["run", "req/s", "p50", "p99", "answers (access log)",
                "CPU / request (gunicorn + PostgreSQL)", "ceiling with every CPU",
                "CPU used by other work", "target", "met?"], rows)),
    ], [
        f"Machine speed: {REFERENCE_LOOP:,} Python additions in {loop * 1000:.0f} ms "
        "(best of 3, after the run; tests/conftest.py).",
        f"Server: 1 gunicorn instance, WEB_CONCURRENCY=2 workers, gthread, GUNICORN_THREADS="
        f"{os.environ.get('GUNICORN_THREADS', '4 (default)')}, schedulers running; "
        f"{args.posts:,} published posts (mean body {avg_len} characters of Markdown). "
        "The first two runs with SITE_PAGE_CACHE_MB=0 (every 200 rendered, as before "
        "webapp/site/pagecache.py), the others with the default.",
        f"wrk -t{args.threads} -c{args.connections} -d{args.duration:g}s, on the same "
        f"{os.cpu_count()}-CPU machine as gunicorn and PostgreSQL (and other people's work).",
        "CPU / request: /proc/<pid>/stat of the gunicorn processes and of this database's "
        "backends over the measured run, divided by its requests (web_perf.py's CpuMeter); "
        "the ceiling is CPUs / that: the rate with the machine to itself and wrk elsewhere. "
        "'Other work' is the share of all CPUs that neither they nor wrk used.",
    ])


def row(r: dict, target: float | None, status: str) -> list[str]:
    """Return one run's row of the table."""
    served = r["statuses"]
    right = served.get(status, 0) == sum(served.values()) > 0
    met = "–" if target is None else ("yes" if r["rps"] >= target and right else "**no**")
    cpu, n = r["cpu"], max(1, r["requests"])
    own = (cpu["app"] + cpu["pg"]) / n * 1000
    return [r["what"], f"{r['rps']:.0f}", f"{r['p50']:.1f} ms", f"{r['p99']:.1f} ms",
            ", ".join(f"{n:,} × {s}" for s, n in sorted(served.items())),
            f"{own:.2f} ms", f"{(os.cpu_count() or 1) * 1000 / own:,.0f} req/s",
            f"{cpu['others'] / cpu['wall_cores'] * 100:.0f} %",
            "–" if target is None else f">= {target:,.0f} req/s", met]


def wrk_arguments(description: str) -> argparse.ArgumentParser:
    """Return a parser with wrk's options (threads, connections, duration, warm-up)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections")
    parser.add_argument("--duration", type=float, default=15, help="seconds per measured run")
    parser.add_argument("--warmup", type=float, default=5, help="seconds of warm-up per run")
    return parser


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = wrk_arguments(__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=10_000)
    parser.add_argument("--hot", type=int, default=1_000,
                        help="the posts read most: kept in memory by every worker")
    parser.add_argument("--no-floor", dest="floor", action="store_false",
                        help="skip the reference run of GET /healthz")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    wrk = find_wrk()
    results, avg_len = run(args, wrk)
    print_report(args, results, avg_len)


if __name__ == "__main__":
    from common import run_main

    run_main(main)
