"""Deploys at production size: HEAD's release phase beside the previous release's fleet.

A platform runs the new version's `release:` (the Procfile's line) while the old instances
still serve. For each run, on a fresh database:

1. the previous release (--commit, built from git by tests/harness/previous_release.py, as the
   suite's test builds it) migrates the database with its own release phase;
2. POSTS published posts are seeded (bench/web_perf.py's Markdown bodies, ~1.9 KB) and,
   where that schema has them, two revisions a post and a media file (two widths) for
   every 20 posts, each in one INSERT ... SELECT;
3. its fleet starts (--instances x --workers) with a webhook endpoint (a local receiver)
   and traffic: signed-in editors' pages, API calls (list, create, change), readers'
   pages, and a post due every --interval seconds;
4. after --before seconds HEAD's release runs beside it; traffic goes on --after seconds
   past its end.

Printed, per second of the release: the requests and the slowest, the posts due and the
latest (how late after its time); then the release's duration, whether it succeeded, and
the statements PostgreSQL cancelled (its log, read from the start of the run; each
cancelled session told apart by its application_name: the old fleet's are soloist…).

The release only has work when the database is at an older schema than HEAD's: the default
--commit is 0a7fa1f, a release whose schema lacks migrations 0015–0024.
The suite's previous release (tests/harness/previous_release.PREVIOUS_RELEASE) is the last
one that landed, a new table behind at most: a deploy from it has little to measure.

    .venv/bin/python bench/deploy.py [--posts 10000] [--runs 1] [--commit 0a7fa1f]
"""

import argparse
import math
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import ROOT, Bench, fleet_parser, log, report, run_main, table
from deploy_traffic import DuePosts, Sampler, Traffic, server_log
from web_perf import fill

from tests.harness.cluster import BIN, base_env
from tests.harness.previous_release import build, run_procfile
from tests.harness.receiver import Receiver
from tests.harness.support import PASSWORD, make_app
from webapp.ops.release import backfills

ADMIN = "deploy-admin@example.com"
MEDIA_EVERY = 20  # posts for each media file

REVISIONS_SQL = """
INSERT INTO post_revisions (post_id, title, body, author, reason, was_live, created_at)
SELECT p.id, p.title, p.body, '', r.reason, p.status = 'published', p.updated_at
FROM posts p, (VALUES ('create'), ('edit')) AS r(reason) ORDER BY p.id
"""
MEDIA_SQL = """
INSERT INTO media_files (sha256, name, alt, content_type, ext, width, height, size, widths,
                         uploaded_by, created_at)
SELECT encode(sha256(('photo ' || i)::bytea), 'hex'), 'photo-' || i || '.jpg', 'A photo',
       'image/jpeg', 'jpg', 1600, 1067, 2048, '480', '', now()
FROM generate_series(1, %(n)s) AS i
"""
# placeholder bytes, not images: no migration reads them
VARIANTS_SQL = """
INSERT INTO media_variants (file_id, variant, width, height, data)
SELECT f.id, v.variant, v.width, v.width * 2 / 3,
       (SELECT decode(string_agg(md5(f.id || ':' || j), ''), 'hex')
        FROM generate_series(1, v.width / 12) AS j)
FROM media_files f, (VALUES ('orig', 1600), ('480', 480)) AS v(variant, width)
"""
CANCELLED = re.compile(r"\[(\d+)\] \S*@(\S+) (?:ERROR|FATAL):  (canceling statement due to "
                       r"[a-z ]+|deadlock detected|terminating connection due to [a-z ]+)")
STATEMENT = re.compile(r"\[(\d+)\] \S+ STATEMENT:  (.*)")


def parse_args() -> argparse.Namespace:
    parser = fleet_parser(__doc__, instances=2, workers=2)
    parser.add_argument("--posts", type=int, default=10_000, help="seeded (10k, 200k, 1M)")
    parser.add_argument("--runs", type=int, default=1,
                        help="repeat the deploy, each on a fresh database (a deadlock is rare)")
    parser.add_argument("--commit", default="0a7fa1f", help="the previous release")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between posts due")
    parser.add_argument("--before", type=float, default=3.0, help="seconds of traffic first")
    parser.add_argument("--after", type=float, default=3.0, help="seconds of it after")
    return parser.parse_args()


def seed(bench: Bench, posts: int) -> str:
    """Fill the database the previous release migrated; return what it holds."""
    fill(bench, posts)
    tables = {name for (name,) in bench.query(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    if "post_revisions" in tables:
        bench.execute(REVISIONS_SQL)
    if "media_files" in tables:
        bench.execute(MEDIA_SQL, {"n": max(1, posts // MEDIA_EVERY)})
        bench.execute(VARIANTS_SQL)
    bench.execute("VACUUM ANALYZE")
    size = bench.query("SELECT pg_size_pretty(pg_total_relation_size('posts'))")[0][0]
    counts = [f"{bench.query(f'SELECT count(*) FROM {name}')[0][0]:,} {name}"  # noqa: S608
              for name in ("posts", "post_revisions", "media_files") if name in tables]
    return f"{', '.join(counts)}; posts {size}"


def admin_token(bench: Bench) -> str:
    """Make an admin and its API token with the previous release's own commands."""
    env = base_env(bench.url)
    bench.release.flask(env, "create-user", ADMIN, "--role", "admin", "--password", PASSWORD)
    return bench.release.flask(env, "create-token", ADMIN).stdout.split()[-1]


def release(bench: Bench) -> dict:
    """Run HEAD's release phase (the Procfile's release: line) as a platform would."""
    env = base_env(bench.url, SOURCE_VERSION="head")
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    log("HEAD's release starts")
    started = time.time()
    done = run_procfile(ROOT, "release", env, timeout=3600)  # 1,000,000 posts: ~10 min
    ended = time.time()
    said = (done.stdout + done.stderr).splitlines()
    why = [line for line in said if "Error: " in line][-1:] or said[-1:]  # the exception
    log(f"HEAD's release ended in {ended - started:.1f} s with {done.returncode}")
    report = [line for line in done.stdout.splitlines()
              if line.startswith(("Migrated in", "  ", "Left to the fleet"))]
    return {"start": started, "end": ended, "ok": done.returncode == 0,
            "last": why[0][:200] if why else "", "report": report}


def deploy(bench: Bench, args: argparse.Namespace, receiver: Receiver) -> dict:
    """Run the old fleet with traffic, and HEAD's release beside it; return what happened."""
    held = seed(bench, args.posts)
    token = admin_token(bench)
    bench.start_fleet(args.instances, args.workers, WEBHOOK_ALLOW_PRIVATE="true")
    traffic = Traffic(bench.instances, ADMIN, token, args.posts)
    traffic.api("POST", "/api/webhooks", {"url": receiver.url, "events": ["post.published"]})
    log_at = server_log()
    with Sampler(bench.url) as sessions, DuePosts(bench.url, args.interval) as due, traffic:
        time.sleep(args.before)  # the fleet as it serves on an ordinary day, for comparison
        result = release(bench)
        time.sleep(args.after)
    due.wait_published(bench)
    result.update(held=held, requests=traffic.requests, posts=due.lateness(bench),
                  cancelled=cancelled(bench, log_at, sessions.names), twice=due.twice(bench),
                  left=finish_backfills(bench))
    return result


def finish_backfills(bench: Bench) -> str:
    """Finish what the release left to the fleet as HEAD's housekeeping timer does (here, the
    fleet gone: nothing to pause for); return what was left and what finishing it took."""
    if not bench.query("SELECT to_regclass('release_backfills') IS NOT NULL")[0][0]:
        return "nothing"
    left = bench.query("SELECT name, batches, after_key FROM release_backfills "
                       "WHERE finished_at IS NULL")
    if not left:
        return "nothing"

    batches: list[float] = []
    app = make_app(bench.url)
    with app.app_context():
        started = time.monotonic()
        backfills.finish(lambda: True, batches.append)
        took = time.monotonic() - started
    batches.sort()
    p95 = batches[int(len(batches) * 0.95)] if batches else 0.0
    said = "; ".join(f"{name} from {key:,} after {n} batch(es) in the release"
                     for name, n, key in left)
    return (f"{said}; the rest in {len(batches)} batches, {took:.1f} s of copying "
            f"(a batch p95 {p95 * 1000:.0f} ms, longest {max(batches, default=0) * 1000:.0f} ms)")


def cancelled(bench: Bench, log_at: tuple[Path, int] | None, names: dict[int, str]
              ) -> list[tuple[str, str, str]] | None:
    """Return (whose, what, the statement) for each statement PostgreSQL's log says it
    cancelled in this database; None when the log cannot be read."""
    if log_at is None:
        return None
    path, offset = log_at
    with open(path, errors="replace") as server:
        server.seek(offset)
        lines = server.read().replace("\n\t", " ").splitlines()  # a statement's lines joined
    database = bench.url.rsplit("/", 1)[1]
    found: list[tuple[str, str, str]] = []
    waiting: dict[str, int] = {}  # pid -> the entry its STATEMENT line completes
    for line in lines:
        match = CANCELLED.search(line)
        if match and match[2] == database:
            name = names.get(int(match[1]), "")
            who = "old fleet" if name.startswith("soloist") else f"release ({name or '?'})"
            waiting[match[1]] = len(found)
            found.append((who, match[3], ""))
        elif (statement := STATEMENT.search(line)) and statement[1] in waiting:
            index = waiting.pop(statement[1])
            found[index] = (*found[index][:2], shorter(statement[2]))
    return found


def shorter(statement: str) -> str:
    """Return the start of a statement, its select list left out."""
    return re.sub(r"^SELECT (?!\().*? FROM ", "SELECT … FROM ", " ".join(statement.split()))[:110]


# --- the tables -----------------------------------------------------------------------------

def per_second(result: dict, args: argparse.Namespace) -> str:
    """One row per second from --before ahead of the release to --after past it."""
    start = result["start"]
    last = math.ceil(result["end"] - start + args.after)
    rows = []
    for second in range(-math.ceil(args.before), last):
        lo, hi = start + second, start + second + 1
        sent = [r for r in result["requests"] if lo <= r.at < hi]
        due = [late for at, late in result["posts"] if lo <= at < hi]
        slowest = max(sent, key=lambda r: r.seconds, default=None)
        phase = "release" if lo < result["end"] and hi > start else ""
        rows.append([f"{second:+d}", phase, len(sent),
                     f"{slowest.seconds:.2f} s `{slowest.what}`" if slowest else "–",
                     len(due), f"{max(due):.2f} s" if due else "–"])
    return table(["second", "", "requests", "slowest request", "posts due", "latest post"],
                 rows)


def during(result: dict) -> tuple[str, str]:
    """Return the slowest request and the latest post due during the release."""
    start, end = result["start"], result["end"]
    sent = [r for r in result["requests"] if start - 1 < r.at < end]
    slowest = max(sent, key=lambda r: r.seconds, default=None)
    late = [late for at, late in result["posts"] if start - 1 < at < end]
    return (f"{slowest.seconds:.2f} s (`{slowest.what}`)" if slowest else "–",
            f"{max(late):.2f} s" if late else "–")


def failures(result: dict) -> str:
    """Return how many requests failed, of how many, and which."""
    failed = Counter(f"`{r.what}`: {r.error}" for r in result["requests"] if not r.ok)
    which = ", ".join(f"{what} ×{n}" for what, n in failed.most_common())
    return f"{failed.total()} of {len(result['requests'])}" + (f" ({which})" if which else "")


def counted(found: list[tuple[str, str, str]] | None) -> str:
    if found is None:
        return "– (the server's log is not readable)"
    by_kind = Counter(f"{who}: {what}" for who, what, _ in found)
    return ", ".join(f"{kind} ×{n}" for kind, n in by_kind.items()) or "none"


def totals(results: list[dict]) -> str:
    rows = [[n, f"{r['end'] - r['start']:.1f} s",
             "yes" if r["ok"] else f"**no**: {r['last']}", *during(r), counted(r["cancelled"]),
             failures(r), r["twice"], r["left"]] for n, r in enumerate(results, 1)]
    return table(["run", "release", "succeeded", "slowest request during it",
                  "latest post due during it", "statements cancelled",
                  "requests failed", "posts published twice", "left to the fleet"], rows)


def statements(results: list[dict]) -> str:
    rows = [[n, who, what, f"`{statement}`"] for n, r in enumerate(results, 1)
            for who, what, statement in r["cancelled"] or []]
    return table(["run", "whose", "why", "the statement"], rows)


def main() -> None:
    args = parse_args()
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="soloist-previous-") as tmp:
        previous = build(args.commit, Path(tmp))
        venv = "its own venv" if previous.own_venv else "this venv"
        log(f"previous release {args.commit} built, in {venv}")
        for run in range(1, args.runs + 1):
            log(f"run {run} of {args.runs}: {args.posts:,} posts")
            receiver = Receiver().start()
            try:
                with Bench("deploy", previous) as bench:
                    results.append(deploy(bench, args, receiver))
            finally:
                receiver.close()
    sections = [(f"Run {n}: {r['held']}", per_second(r, args))
                for n, r in enumerate(results, 1)]
    sections.append(("Totals", totals(results)))
    sections += [(f"Run {n}: the release's own report", "```\n" + "\n".join(r["report"]) + "\n```")
                 for n, r in enumerate(results, 1) if r.get("report")]
    if any(r["cancelled"] for r in results):
        sections.append(("The statements PostgreSQL cancelled", statements(results)))
    report(f"Deploy: HEAD's release beside release {args.commit}'s fleet ({args.instances} × "
           f"{args.workers}), {args.posts:,} posts", sections,
           ["A second's requests are those sent in it; its posts, those due in it (a post "
            "not published by the end counts as late as the end).",
            "'During it' is from a second before the release to its end."])


if __name__ == "__main__":
    run_main(main)
