"""Web performance: req/s and latency of the public post page and the status live fragment.

One gunicorn instance (WEB_CONCURRENCY=2 workers, gthread, GUNICORN_THREADS as configured,
4 by default, schedulers running) serves a fresh PostgreSQL database holding POSTS published
posts with Markdown bodies of a few paragraphs (one INSERT ... SELECT). Beside it, 9 plain
python processes each open a webapp.leadership.pg.PgLockSession (soloist:standbyN:<pid>) and sit
there, so the status page lists 10 instances (the serving one with its 2 workers' lock
sessions, plus 9 standbys: 11 lock sessions). A viewer created with `flask create-user`
signs in through POST /login (urllib, CSRF token from the form); its session cookie goes to
wrk with -H "Cookie: ...".

Each page gets a warm-up run of wrk, then a measured run (`wrk --latency`: p50/p99 from
wrk's histogram). The public page asks for a random one of the POSTS slugs per request (a
Lua script). Measured: GET /healthz first (the framework's floor, for reference; skip with
--no-floor), the public post page and the status live fragment at --connections, and the
fragment with a single connection (one poller; --light-connections 0 skips it). For each
run the script also reads

- gunicorn's access-log request time (%(M)s, whole ms): time inside a worker thread, to
  tell queueing in front of the workers from work in them;
- CPU per request: /proc/<pid>/stat of the gunicorn processes and of every PostgreSQL
  backend of the benchmark's database, wrk's own from getrusage, and how busy the whole
  machine was (the rest is other people's work on this shared machine).

Then the same pages run in-process through the Flask test client (--profile-requests each,
0 skips): time, Python CPU, SQL statements and transactions per request, and a cProfile.
The load average is printed before and after. Everything started is stopped and the
database dropped on the way out, on an error or a Ctrl-C too.

    .venv/bin/python bench/web_perf.py [--posts 10000] [--threads 2] [--connections 16]
        [--fragment-connections N] [--light-connections 1] [--duration 15] [--warmup 5]
        [--profile-requests 300] [--no-floor]

Needs wrk (apt-get install -y wrk); exits 2 without it.
"""

import argparse
import contextlib
import cProfile
import http.cookiejar
import io
import os
import pstats
import re
import resource
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HOLDER_FLAG = "--hold-lock-session"  # internal: run as one standby lock session
ROOT = Path(__file__).resolve().parent.parent

POST_TARGET_RPS = 400.0
FRAGMENT_TARGET_P99_MS = 50.0
STANDBYS = 9
EMAIL = "bench-viewer@example.com"
PASSWORD = "bench-viewer-password-1"

# Sentences with the inline Markdown an editor writes: emphasis, code, links.
SENTENCES = [
    "The harbour opened at dawn and the first boats came in **heavy with the night's catch**.",
    "Nobody on the committee had read the report, so the meeting ran *well past noon*.",
    "Set `publish_at` in your own time zone; the scheduler stores it in UTC.",
    "You can read the [full minutes](https://example.com/minutes) on the council's site.",
    "Rain is forecast for the weekend, which suits the gardeners better than the cyclists.",
    "The museum's new wing doubles the space for the _textile collection_.",
    "Tickets cost less if you book before Friday, and children under twelve go free.",
    "Our reporter spent three days on the glacier and came back with **forty rolls of film**.",
    "The bridge will close for repairs between the 4th and the 18th of next month.",
    "See the [route map](https://example.com/routes/42) for the diversions during the works.",
    "Local bakers say the price of flour has risen by a third since the spring.",
    "A spokesperson said the station would reopen ~~in March~~ in April at the earliest.",
    "Volunteers planted two hundred trees along the valley road on Sunday.",
    "Run `make run` to try it locally; the admin password is printed once.",
    "The orchard's cider won a *silver medal* at the regional fair this year.",
    "Residents have until the end of the month to comment on the plans.",
]
HEADINGS = ["What happened", "Background", "What comes next", "In numbers", "Reactions",
            "How to take part", "The details", "Why it matters"]

FILL_SQL = """
INSERT INTO posts (title, slug, body, status, publish_at, published_at, version,
                   created_at, updated_at)
SELECT 'Notes from the valley, part ' || i, 'bench-' || i,
       para(0) || E'\\n\\n## ' || h[1 + i %% 8] || E'\\n\\n' || para(1) || E'\\n\\n'
       || para(2) || E'\\n\\n- ' || s[1 + (i * 3) %% 16] || E'\\n- ' || s[1 + (i * 5) %% 16]
       || E'\\n- ' || s[1 + (i * 11) %% 16] || E'\\n\\n> ' || s[1 + (i * 13) %% 16]
       || E'\\n\\n## ' || h[1 + (i + 3) %% 8] || E'\\n\\n' || para(3) || E'\\n',
       'published', at, at, 1, at, at
FROM (SELECT i, now() - make_interval(mins => i) AS at FROM generate_series(1, %(n)s) AS i) AS n,
     (SELECT %(sentences)s::text[] AS s, %(headings)s::text[] AS h) AS words
"""
# para(k): five sentences picked by the post number, different for each paragraph k
PARA_SQL = ("(SELECT string_agg(s[1 + (i * {m} + j * {k}) %% 16], ' ' ORDER BY j) "
            "FROM generate_series(0, 4) AS j)")

POST_LUA = """
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/posts/bench-" .. math.random(1, {n}))
end
"""


def fill_sql() -> str:
    """Return the one INSERT statement, with the four paragraph sub-selects inlined."""
    sql = FILL_SQL
    for k, m in enumerate((7, 3, 5, 9)):
        sql = sql.replace(f"para({k})", PARA_SQL.format(m=m, k=2 * k + 1))
    return sql


# --- the standby lock sessions ----------------------------------------------------------


def hold_lock_session() -> None:
    """Child mode: open one PgLockSession and sit there until stdin closes or SIGTERM."""
    import signal

    sys.path.insert(0, str(ROOT))
    from webapp.leadership.pg import PgLockSession

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    session = PgLockSession(os.environ["DATABASE_URL"], os.environ["INSTANCE_NAME"])
    session.connect()
    print(f"holding {session.name}", flush=True)
    try:
        sys.stdin.read()  # EOF when the benchmark closes the pipe or dies
    finally:
        session.close()


class Standbys:
    """Plain python processes, each with one idle lock session."""

    def __init__(self, url: str, log_dir: Path) -> None:
        self.url = url
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []
        self.logs: list = []

    def start(self, n: int) -> None:
        """Start n standbys."""
        from tests.harness.cluster import base_env

        for i in range(1, n + 1):
            log_file = open(self.log_dir / f"standby{i}.log", "w")  # noqa: SIM115
            self.logs.append(log_file)
            self.procs.append(subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), HOLDER_FLAG], cwd=ROOT,
                env=base_env(self.url, INSTANCE_NAME=f"standby{i}"), stdin=subprocess.PIPE,
                stdout=log_file, stderr=subprocess.STDOUT))

    def check_alive(self) -> None:
        """Fail if a standby died on its own."""
        for proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"standby {proc.pid} exited with {proc.returncode}")

    def stop(self) -> None:
        """Close their stdin (they exit), then make sure they are gone."""
        for proc in self.procs:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []
        for log_file in self.logs:
            log_file.close()
        self.logs = []


# --- signing in over HTTP ---------------------------------------------------------------


CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def sign_in(base: str) -> str:
    """Sign the viewer in with POST /login; return the Cookie header value."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{base}/login", timeout=10) as resp:
        form = resp.read().decode()
    token = CSRF_RE.search(form)
    if token is None:
        raise RuntimeError("no csrf_token in the login form")
    data = urllib.parse.urlencode({"email": EMAIL, "password": PASSWORD, "next": "",
                                   "csrf_token": token.group(1)}).encode()
    with opener.open(f"{base}/login", data=data, timeout=10) as resp:
        landed = resp.geturl()
    if landed.rstrip("/").endswith("/login"):
        raise RuntimeError(f"sign-in failed (ended on {landed})")
    cookies = "; ".join(f"{c.name}={c.value}" for c in jar)
    if "session=" not in cookies:
        raise RuntimeError(f"no session cookie after sign-in: {[c.name for c in jar]}")
    return cookies


def get(url: str, headers: dict) -> tuple[int, str]:
    """GET url with headers; return (status, body)."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def listed_instances(fragment: str) -> list[str]:
    """Return the instance names in the fragment's Instances table, one per lock session."""
    match = re.search(r'<table class="instances">(.*?)</table>', fragment, re.S)
    if match is None:
        return []
    return re.findall(r"<tr>\s*<td>([^<]*)</td>", match.group(1))


# --- wrk ---------------------------------------------------------------------------------


UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def to_ms(text: str) -> float:
    """Turn wrk's '12.34ms' / '850.00us' / '1.20s' into milliseconds."""
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip()).groups()
    return float(number) * UNITS[unit]


def parse_wrk(output: str) -> dict:
    """Return req/s, p50/p75/p90/p99 (ms), requests, non-2xx and socket errors from wrk."""
    result = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
              "requests": int(re.search(r"(\d+) requests in", output).group(1))}
    for pct, value in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)$", output, re.M):
        result[f"p{pct}"] = to_ms(value)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    result["non2xx"] = int(bad.group(1)) if bad else 0
    errors = re.search(r"Socket errors:(.*)$", output, re.M)
    result["socket_errors"] = errors.group(1).strip() if errors else ""
    return result


def wrk_command(wrk: str, url: str, threads: int, connections: int, seconds: float,
                script: Path | None, headers: list[str]) -> list[str]:
    """Return the wrk argv."""
    cmd = [wrk, f"-t{min(threads, connections)}", f"-c{connections}", f"-d{seconds:g}s",
           "--latency", "--timeout", "10s"]
    for header in headers:
        cmd += ["-H", header]
    if script is not None:
        cmd += ["-s", str(script)]
    return [*cmd, url]


def run_wrk(cmd: list[str]) -> tuple[dict, str]:
    """Run wrk; return its parsed numbers and its output."""
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0 or "Requests/sec" not in result.stdout:
        raise RuntimeError(f"wrk failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return parse_wrk(result.stdout), result.stdout


def shown(cmd: list[str], cookie: str) -> str:
    """Return the command as printed: the session cookie's value is not worth showing."""
    return shlex.join(cmd).replace(cookie, "session=<the viewer's session cookie>")


# --- server-side time from the access log --------------------------------------------------


ACCESS_RE = re.compile(r'"GET (\S+) HTTP/[\d.]+" (\d{3}) \S+ (\d+)ms$', re.M)


def server_times(log_text: str, prefix: str) -> list[int]:
    """Return the access log's request times (ms) of GETs whose path starts with prefix."""
    return [int(ms) for path, _status, ms in ACCESS_RE.findall(log_text)
            if path.startswith(prefix)]


# --- in-process profile ------------------------------------------------------------------


def profile_pages(url: str, paths: dict[str, list[str]], rounds: int) -> dict[str, dict]:
    """Time, count SQL and cProfile each page through the Flask test client (one thread).

    The fragment is asked for signed in (as the viewer), the public page anonymously, as
    wrk does. The timed loop runs without the profiler; a second loop runs under it.
    """
    import sqlalchemy as sa

    from tests.harness.support import make_app
    from webapp.extensions import db

    app = make_app(url, TESTING=False, WTF_CSRF_ENABLED=True, SCHEDULER_ENABLED=False,
                   SECRET_KEY=secrets.token_urlsafe(32), SITE_URL="http://localhost")
    client = app.test_client()
    form = client.get("/login").get_data(as_text=True)
    resp = client.post("/login", data={"email": EMAIL, "password": PASSWORD, "next": "",
                                       "csrf_token": CSRF_RE.search(form).group(1)})
    if resp.status_code != 302:
        raise RuntimeError(f"test-client sign-in answered {resp.status_code}")
    anonymous = app.test_client()  # wrk asks for the public page without a cookie
    statements = {"n": 0, "begin": 0}
    with app.app_context():
        engine = db.engine

    def count(*_args: object) -> None:
        statements["n"] += 1

    def begin(*_args: object) -> None:
        statements["begin"] += 1

    sa.event.listen(engine, "before_cursor_execute", count)
    sa.event.listen(engine, "begin", begin)
    out = {}
    for what, urls in paths.items():
        user = client if what == "fragment" else anonymous
        for u in urls[:20]:  # warm the templates, the pool and the caches
            user.get(u, headers={"HX-Request": "true"})
        statements.update(n=0, begin=0)
        times, cpu = [], 0.0
        for i in range(rounds):
            u = urls[i % len(urls)]
            started, cpu_started = time.perf_counter(), time.process_time()
            resp = user.get(u, headers={"HX-Request": "true"})
            cpu += time.process_time() - cpu_started
            times.append((time.perf_counter() - started) * 1000)
            if resp.status_code != 200:
                raise RuntimeError(f"{u} answered {resp.status_code} in the test client")
        n_sql, n_tx = statements["n"] / rounds, statements["begin"] / rounds
        profiler = cProfile.Profile()
        for i in range(rounds):
            profiler.enable()
            user.get(urls[i % len(urls)], headers={"HX-Request": "true"})
            profiler.disable()
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("cumulative").print_stats(32)
        stats.sort_stats("tottime").print_stats(10)
        times.sort()
        out[what] = {"median": times[len(times) // 2], "p99": times[int(0.99 * len(times))],
                     "cpu": cpu / rounds * 1000, "sql": n_sql, "transactions": n_tx,
                     "profile": tidy_profile(text.getvalue())}
    sa.event.remove(engine, "before_cursor_execute", count)
    sa.event.remove(engine, "begin", begin)
    with app.app_context():
        db.engine.dispose()
    return out


def tidy_profile(text: str) -> str:
    """Shorten the paths in a pstats listing and drop its blank noise."""
    text = re.sub(r"\S*/site-packages/", "", text).replace(str(ROOT) + "/", "")
    return "\n".join(line.rstrip()[:150] for line in text.splitlines()
                     if line.strip() and "List reduced" not in line)


def component_times(url: str, rounds: int) -> list[tuple[str, float]]:
    """Time the public page's parts alone: the query, markdown.render, the template."""
    from flask import render_template

    from tests.harness.support import make_app
    from webapp import posts
    from webapp.extensions import db
    from webapp.site import markdown, state

    app = make_app(url, SCHEDULER_ENABLED=False)
    found = []
    parts = {"SELECT the post (published_by_slug)": 0.0, "markdown.render(body)": 0.0,
             "render_template(site/post.html)": 0.0}
    with app.test_request_context("/posts/bench-1"):
        site = state.current()
        for i in range(rounds):
            slug = f"bench-{1 + (i * 37) % 10_000}"
            t0 = time.perf_counter()
            post = posts.published_by_slug(slug)
            t1 = time.perf_counter()
            body = markdown.render(post.body)
            t2 = time.perf_counter()
            render_template("site/post.html", post=post, body=body, site=site,
                            description=markdown.excerpt(post.body))
            t3 = time.perf_counter()
            db.session.rollback()
            if i >= 20:  # the first few warm up
                parts["SELECT the post (published_by_slug)"] += t1 - t0
                parts["markdown.render(body)"] += t2 - t1
                parts["render_template(site/post.html)"] += t3 - t2
                found.append(len(post.body))
        db.engine.dispose()
    n = max(1, rounds - 20)
    return [(what, total / n * 1000) for what, total in parts.items()] + [
        ("(mean body length, characters)", sum(found) / max(1, len(found)))]


# --- CPU accounting ----------------------------------------------------------------------


CLK_TCK = os.sysconf("SC_CLK_TCK")
PG_PIDS_SQL = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
               "AND pid <> pg_backend_pid()")


def proc_cpu(pid: int) -> float:
    """Return the CPU seconds (user + system) a live process has used, 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def machine_cpu() -> tuple[float, float]:
    """Return (busy, total) CPU seconds of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:8]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values) - idle) / CLK_TCK, sum(values) / CLK_TCK


class CpuMeter:
    """CPU used during a run by gunicorn, by this database's backends, by wrk, by the rest."""

    def __init__(self, bench, inst) -> None:
        self.bench, self.inst = bench, inst

    def _app_pids(self) -> list[int]:
        return [self.inst.proc.pid, *self.inst.worker_pids()]

    def _pg_pids(self) -> list[int]:
        return [r[0] for r in self.bench.query(PG_PIDS_SQL)]

    def start(self) -> None:
        """Take the first readings."""
        self.app = {pid: proc_cpu(pid) for pid in self._app_pids()}
        self.pg = {pid: proc_cpu(pid) for pid in self._pg_pids()}
        self.children = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.machine = machine_cpu()

    def stop(self) -> dict[str, float]:
        """Return the CPU seconds used since start: app, pg, wrk, machine, others; and cores."""
        app = sum(proc_cpu(pid) - self.app.get(pid, 0.0) for pid in self._app_pids())
        pg_pids = set(self._pg_pids()) | set(self.pg)
        pg = sum(max(0.0, proc_cpu(pid) - self.pg.get(pid, 0.0)) for pid in pg_pids)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        wrk = (children.ru_utime + children.ru_stime
               - self.children.ru_utime - self.children.ru_stime)
        busy, total = machine_cpu()
        busy -= self.machine[0]
        total -= self.machine[1]
        return {"app": app, "pg": pg, "wrk": wrk, "busy": busy,
                "others": max(0.0, busy - app - pg - wrk), "wall_cores": total}


# --- main --------------------------------------------------------------------------------


def fmt_load(load: tuple[float, float, float]) -> str:
    """Format a load average triple."""
    return " / ".join(f"{x:.2f}" for x in load)


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections")
    parser.add_argument("--fragment-connections", type=int, default=None,
                        help="wrk connections for the fragment (default: --connections)")
    parser.add_argument("--light-connections", type=int, default=1,
                        help="also measure the fragment with this many connections (0: skip)")
    parser.add_argument("--no-floor", dest="floor", action="store_false",
                        help="skip the reference run of GET /healthz")
    parser.add_argument("--duration", type=float, default=15, help="seconds per measured run")
    parser.add_argument("--warmup", type=float, default=5, help="seconds of warm-up per page")
    parser.add_argument("--profile-requests", type=int, default=300,
                        help="requests per page for the in-process cProfile (0: skip)")
    return parser.parse_args()


def find_wrk() -> str:
    """Return wrk's path, or exit saying how to install it."""
    wrk = shutil.which("wrk") or ("/usr/bin/wrk" if Path("/usr/bin/wrk").exists() else None)
    if wrk is None:
        print("wrk is not installed; install it with: apt-get install -y wrk", file=sys.stderr)
        sys.exit(2)
    return wrk


def fill(bench, n: int) -> int:
    """Insert n published posts in one statement; return their mean body length."""
    from common import log

    log(f"inserting {n:,} published posts")
    started = time.monotonic()
    bench.execute(fill_sql(), {"n": n, "sentences": SENTENCES, "headings": HEADINGS})
    bench.execute("VACUUM ANALYZE posts")
    count, avg_len = bench.query("SELECT count(*), avg(length(body))::int FROM posts "
                                 "WHERE status = 'published'")[0]
    log(f"{count:,} posts (mean body {avg_len} characters) in "
        f"{time.monotonic() - started:.1f} s")
    if count != n:
        raise RuntimeError(f"expected {n} published posts, found {count}")
    return avg_len


def check_pages(base: str, cookie: str) -> list[str]:
    """Check both pages answer 200; return the instances the fragment lists."""
    status, fragment = get(f"{base}/status/live", {"Cookie": cookie, "HX-Request": "true"})
    if status != 200:
        raise RuntimeError(f"/status/live answered {status} to the viewer")
    seen = listed_instances(fragment)
    if len(set(seen)) != 1 + STANDBYS:
        raise RuntimeError(f"the fragment lists instances {seen}, expected {1 + STANDBYS}")
    status, _ = get(f"{base}/posts/bench-1", {})
    if status != 200:
        raise RuntimeError(f"/posts/bench-1 answered {status}")
    return seen


def measure(bench, inst, wrk: str, args: argparse.Namespace, page: tuple,
            cookie: str) -> dict:
    """Warm up, then measure one page with wrk; add the server-side times from the log."""
    from common import log

    what, tag, url, script, headers, conns = page
    warm = wrk_command(wrk, url, args.threads, conns, args.warmup, script, headers)
    log(f"warming up {what} for {args.warmup:g} s")
    run_wrk(warm)
    cmd = wrk_command(wrk, url, args.threads, conns, args.duration, script, headers)
    log(f"measuring {what} for {args.duration:g} s")
    offset = inst.log_path.stat().st_size
    load = os.getloadavg()
    meter = CpuMeter(bench, inst)
    meter.start()
    numbers, _output = run_wrk(cmd)
    cpu = meter.stop()
    time.sleep(0.5)  # let the access-log lines of the last requests land
    with open(inst.log_path) as log_file:
        log_file.seek(offset)
        served = server_times(log_file.read(), {"post": "/posts/", "healthz": "/healthz"}
                              .get(tag, "/status/live"))
    command = shown(cmd, cookie)
    if script is not None:
        command = command.replace(str(script), script.name)
    numbers.update(what=what, tag=tag, connections=conns, load=load, server=sorted(served),
                   command=command, cpu=cpu)
    log(f"{what}: {numbers['rps']:.0f} req/s, p50 {numbers['p50']:.1f} ms, "
        f"p99 {numbers['p99']:.1f} ms, non-2xx {numbers['non2xx']}")
    return numbers


def run(args: argparse.Namespace, wrk: str) -> dict:
    """Set everything up, measure, profile, tear everything down; return what was found."""
    from common import Bench, base_env, flask_cmd, log, wait_for

    found: dict = {"results": {}, "profiles": {}, "parts": []}
    with Bench("web") as bench, tempfile.TemporaryDirectory(prefix="soloist-wrk-") as tmp:
        found["avg_len"] = fill(bench, args.posts)
        flask_cmd(base_env(bench.url), "create-user", EMAIL, "--role", "viewer",
                  "--password", PASSWORD)
        log("starting 1 gunicorn instance x 2 workers")
        bench.start_fleet(1, 2)
        inst = bench.instances[0]
        standbys = Standbys(bench.url, bench.log_dir)
        try:
            log(f"starting {STANDBYS} standby lock sessions")
            standbys.start(STANDBYS)

            def all_connected() -> bool:
                standbys.check_alive()
                return len(bench.view.lock_sessions()) == 1 + STANDBYS

            wait_for(all_connected, 60, f"{1 + STANDBYS} lock sessions", interval=0.1)
            cookie = sign_in(inst.url)
            found["instances"] = check_pages(inst.url, cookie)
            lua = Path(tmp) / "random_post.lua"
            lua.write_text(POST_LUA.format(n=args.posts))
            pages = [
                ("public post page (random of the posts)", "post", f"{inst.url}/posts/", lua,
                 [], args.connections),
                ("status live fragment (viewer)", "fragment", f"{inst.url}/status/live", None,
                 [f"Cookie: {cookie}", "HX-Request: true"],
                 args.fragment_connections or args.connections),
            ]
            if args.floor:
                pages.insert(0, ("GET /healthz (the framework's floor, for reference)", "healthz",
                                 f"{inst.url}/healthz", None, [], args.connections))
            if args.light_connections:
                pages.append((f"status live fragment (viewer), {args.light_connections} "
                              f"connection(s)", "fragment-light", f"{inst.url}/status/live", None,
                              [f"Cookie: {cookie}", "HX-Request: true"], args.light_connections))
            for page in pages:
                found["results"][page[1]] = measure(bench, inst, wrk, args, page, cookie)
            if args.profile_requests > 0:
                log(f"profiling in-process, {args.profile_requests} requests per page")
                post_urls = [f"/posts/bench-{1 + (i * 37) % args.posts}"
                             for i in range(args.profile_requests)]
                found["profiles"] = profile_pages(
                    bench.url, {"post": post_urls, "fragment": ["/status/live"]},
                    args.profile_requests)
                found["parts"] = component_times(bench.url, args.profile_requests)
            standbys.check_alive()
        finally:
            standbys.stop()
    return found


def server_ms(values: list[int], p: float) -> str:
    """Return the p-quantile of the access log's whole-ms times."""
    return "–" if not values else f"{values[min(len(values) - 1, int(p * len(values)))]} ms"


def print_report(args: argparse.Namespace, found: dict, load_before: tuple,
                 load_after: tuple) -> None:
    """Print the tables."""
    from common import ms, report, table

    results = found["results"]
    rows = []
    for tag, target in (("healthz", "–"), ("post", f">= {POST_TARGET_RPS:.0f} req/s"),
                        ("fragment", f"p99 <= {FRAGMENT_TARGET_P99_MS:.0f} ms"),
                        ("fragment-light", f"(for reference) p99 <= "
                                           f"{FRAGMENT_TARGET_P99_MS:.0f} ms")):
        if tag not in results:
            continue
        r = results[tag]
        met = (r["rps"] >= POST_TARGET_RPS if tag == "post"
               else r["p99"] <= FRAGMENT_TARGET_P99_MS)
        rows.append([r["what"], f"{r['rps']:.0f}", f"{r['p50']:.1f} ms", f"{r['p99']:.1f} ms",
                     target, "–" if tag == "healthz" else "yes" if met else "**no**"])
    detail = [[r["what"], r["connections"], f"{r['requests']:,}", r["non2xx"],
               r["socket_errors"] or "none", f"{r['p75']:.1f} ms", f"{r['p90']:.1f} ms",
               server_ms(r["server"], 0.5), server_ms(r["server"], 0.99),
               fmt_load(r["load"])] for r in results.values()]
    cpu_rows = []
    for r in results.values():
        c, n = r["cpu"], max(1, r["requests"])
        own = (c["app"] + c["pg"]) / n * 1000
        cpu_rows.append([
            r["what"], f"{c['app'] / n * 1000:.2f} ms", f"{c['pg'] / n * 1000:.2f} ms",
            f"{c['wrk'] / n * 1000:.2f} ms", f"{c['busy'] / c['wall_cores'] * 100:.0f} %",
            f"{c['others'] / c['wall_cores'] * 100:.0f} %",
            f"{(os.cpu_count() or 1) * 1000 / own:.0f} req/s" if own else "–"])
    lua = "\n".join(f"    {line}" for line in POST_LUA.format(n=args.posts).strip().splitlines())
    sections = [
        ("Results (wrk, measured run after a warm-up)",
         table(["page", "req/s", "p50", "p99", "target", "met?"], rows)),
        ("Details",
         table(["page", "wrk connections", "requests", "non-2xx", "socket errors", "p75",
                "p90", "server time p50", "server time p99", "load avg at start"], detail)),
        ("CPU per request during the measured runs",
         table(["page", "gunicorn (master + workers)", "PostgreSQL backends", "wrk",
                "machine busy", "busy with other processes",
                "ceiling if gunicorn + PostgreSQL had every CPU"], cpu_rows)
         + "\n\nCPU from /proc/<pid>/stat (utime + stime) of the gunicorn processes and of "
           "every backend connected to the benchmark's database, wrk's from getrusage; "
           "'machine busy' and 'other processes' are shares of all CPUs (from /proc/stat), "
           "the latter what neither gunicorn, PostgreSQL for this database nor wrk used "
           "(other work on this shared machine). The ceiling is CPUs / (gunicorn + "
           "PostgreSQL CPU per request): what the page could reach with the machine to "
           "itself and the load generator elsewhere."),
        ("wrk commands",
         "\n".join(f"    {r['command']}" for r in results.values())
         + f"\n\nrandom_post.lua:\n\n{lua}"),
    ]
    profiles = found["profiles"]
    if profiles:
        sections.append((
            f"In-process (Flask test client, one thread, {args.profile_requests} requests)",
            table(["page", "median", "p99", "Python CPU / request", "SQL statements / request",
                   "transactions / request"],
                  [[tag, ms(p["median"]), ms(p["p99"]), f"{p['cpu']:.2f} ms", f"{p['sql']:.1f}",
                    f"{p['transactions']:.1f}"] for tag, p in profiles.items()])
            + "\n\nPublic page, by part:\n\n"
            + table(["part", "mean"], [[w, f"{v:.0f}" if w.startswith("(") else f"{v:.2f} ms"]
                                       for w, v in found["parts"]])))
        for tag, p in profiles.items():
            sections.append((f"cProfile, {tag}", "```\n" + p["profile"].strip() + "\n```"))
    seen = found["instances"]
    report("Web performance: public post page and status fragment", sections, [
        f"Server: 1 gunicorn instance, WEB_CONCURRENCY=2 workers, gthread, GUNICORN_THREADS="
        f"{os.environ.get('GUNICORN_THREADS', '4 (default)')}, schedulers running; "
        f"{args.posts:,} published posts (mean body {found['avg_len']} characters of "
        f"Markdown: headings, paragraphs with emphasis, code and links, a list, a quote).",
        f"Connected: the serving instance's candidate's lock session plus {STANDBYS} plain "
        f"python processes each holding an idle webapp.leadership.pg.PgLockSession; the fragment "
        f"listed {len(set(seen))} instances ({len(seen)} lock sessions).",
        f"wrk runs on the same {os.cpu_count()}-CPU machine as gunicorn and PostgreSQL and "
        f"competes with them for CPU.",
        "server time = gunicorn's access-log request time (%(M)s, whole ms) of the measured "
        "requests: time inside a worker thread; wrk's latency adds the wait for a thread.",
        f"Load average (1/5/15 min) before: {fmt_load(load_before)}; after: "
        f"{fmt_load(load_after)}.",
    ])


def main() -> None:
    args = parse_args()
    wrk = find_wrk()
    load_before = os.getloadavg()
    found = run(args, wrk)
    print_report(args, found, load_before, os.getloadavg())


if __name__ == "__main__":
    if HOLDER_FLAG in sys.argv:
        hold_lock_session()
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from common import run_main

        run_main(main)
