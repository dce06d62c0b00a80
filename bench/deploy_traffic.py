"""What bench/deploy.py runs against the old fleet: people's requests, posts falling due,
and who each database session is (to tell whose statements PostgreSQL cancelled)."""

import itertools
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import psycopg
from common import ADMIN_URL, log, wait_for

from tests.harness.cluster import Instance, instance_api
from tests.harness.support import WebSession

Steps = Iterator[tuple[str, Callable[[], object]]]

EDITOR_PAGES = ("/admin/", "/admin/posts/", "/admin/posts/<id>", "/status/")
DUE_SQL = """
INSERT INTO posts (title, slug, body, status, publish_at, version, created_at, updated_at)
SELECT 'Due ' || (%(first)s + n), 'due-' || (%(first)s + n), 'Due *now*.', 'scheduled', at,
       1, now(), now()
FROM unnest(%(times)s::timestamptz[]) WITH ORDINALITY AS due(at, n)
"""
LATENESS_SQL = """
SELECT extract(epoch FROM publish_at)::float8,
       extract(epoch FROM coalesce(published_at, now()) - publish_at)::float8
FROM posts WHERE slug LIKE 'due-%%' AND publish_at <= %s ORDER BY publish_at
"""
TWICE_SQL = """
SELECT count(*) FROM (SELECT post_id FROM outbox_events WHERE topic = 'post.published'
                      GROUP BY post_id HAVING count(*) > 1) AS twice
"""


@dataclass
class Sent:
    """One request: when it was sent (wall clock), how long it took, what it was."""

    at: float
    seconds: float
    what: str
    error: str  # "" when it was answered 2xx/3xx

    @property
    def ok(self) -> bool:
        return not self.error


class Traffic:
    """Threads acting as people, two of each: editors signed in (their pages), API clients
    (list, create, change a post), readers (the home and a post); each request is followed
    by a pause of PAUSE seconds, and every instance gets its share."""

    PAUSE = 0.1

    def __init__(self, instances: list[Instance], email: str, token: str, posts: int) -> None:
        self.instances, self.email, self.token, self.posts = instances, email, token, posts
        self.requests: list[Sent] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []

    def api(self, method: str, path: str, body: dict | None = None, n: int = 0) -> dict:
        """Call the n-th instance's API with the token."""
        return instance_api(self.instances[n % len(self.instances)], self.token, method, path,
                            body)

    def __enter__(self) -> "Traffic":
        for steps in (self._editor, self._api_client, self._reader):
            for n in range(2):
                thread = threading.Thread(target=self._run, args=(steps(n),), daemon=True)
                thread.start()
                self.threads.append(thread)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(60)

    def _run(self, steps: Steps) -> None:
        for what, call in steps:
            if self.stopping.wait(self.PAUSE):
                return
            at, started = time.time(), time.monotonic()
            error = ""
            try:
                call()
            except urllib.error.HTTPError as exc:
                error = f"{exc.code}"
            except (OSError, ValueError) as exc:  # a timeout, a reset, a broken answer
                error = type(exc).__name__
            with self.lock:
                self.requests.append(Sent(at, time.monotonic() - started, what, error))

    def _post_id(self) -> str:
        return str(random.randint(1, self.posts))

    def _editor(self, n: int) -> Steps:
        sessions = [WebSession(instance.url, self.email) for instance in self.instances]
        for i in itertools.count(n):
            page = EDITOR_PAGES[i % len(EDITOR_PAGES)]
            web = sessions[i // len(EDITOR_PAGES) % len(sessions)]
            yield f"GET {page}", partial(web.get, page.replace("<id>", self._post_id()))

    def _api_client(self, n: int) -> Steps:
        for i in itertools.count(n):
            made: dict = {}
            yield "GET /api/posts", partial(self.api, "GET", "/api/posts", None, i)
            yield "POST /api/posts", partial(self._create, made, f"Draft {n}.{i}", i + 1)
            if made:
                yield "PATCH /api/posts/<id>", partial(
                    self.api, "PATCH", f"/api/posts/{made['id']}",
                    {"title": f"Draft {n}.{i}, edited", "version": made["version"]}, i)

    def _create(self, made: dict, title: str, n: int) -> None:
        made.update(self.api("POST", "/api/posts", {"title": title, "body": "Words."}, n))

    def _reader(self, n: int) -> Steps:
        for i in itertools.count(n):
            base = self.instances[i % len(self.instances)].url
            if i % 4 == 0:
                yield "GET /", partial(read, base + "/")
            else:
                yield "GET /posts/<slug>", partial(read, f"{base}/posts/bench-{self._post_id()}")


def read(url: str) -> bytes:
    """GET url as a reader does (no cookie); raise on an error status."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read()


class DuePosts:
    """A post due every interval seconds, from 2 s after the start: inserted HORIZON seconds
    ahead of time, so that an insert waiting on a lock still lands before its post is due."""

    HORIZON = 15.0

    def __init__(self, url: str, interval: float) -> None:
        self.conn = psycopg.connect(url, autocommit=True, application_name="bench-due")
        self.interval = interval
        self.next = time.time() + 2.0
        self.made = 0
        self.end = float("inf")  # set when the traffic stops
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "DuePosts":
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.end = time.time()
        self.stopping.set()
        self.thread.join(60)
        self.conn.close()

    def _run(self) -> None:
        while not self.stopping.is_set():
            times = []
            while self.next <= time.time() + self.HORIZON:
                times.append(datetime.fromtimestamp(self.next, UTC))
                self.next += self.interval
            if times:
                self.conn.execute(DUE_SQL, {"first": self.made, "times": times})
                self.conn.execute("SELECT pg_notify('soloist_wake', 'publish')")
                self.made += len(times)
                if time.time() > times[0].timestamp():
                    log(f"posts inserted after they were due (waited on a lock): {times[0]}")
            self.stopping.wait(0.5)

    def _due_until_end(self) -> datetime:
        return datetime.fromtimestamp(self.end, UTC)

    def wait_published(self, bench) -> None:
        """Wait (30 s at most) until every post due by the end is published."""
        left = "SELECT count(*) FROM posts WHERE slug LIKE 'due-%%' AND status = 'scheduled' " \
               "AND publish_at <= %s"
        try:
            wait_for(lambda: bench.query(left, (self._due_until_end(),))[0][0] == 0, 30,
                     "every post due to be published", interval=0.2)
        except AssertionError as exc:
            log(str(exc))

    def lateness(self, bench) -> list[tuple[float, float]]:
        """Return (due, seconds late) of every post due by the end (one not published: late
        until now)."""
        return bench.query(LATENESS_SQL, (self._due_until_end(),))

    def twice(self, bench) -> int:
        """Return how many posts have two post.published events."""
        return bench.query(TWICE_SQL)[0][0]


class Sampler:
    """Remembers the application_name of each backend of the database (every 0.1 s)."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True, application_name="bench-sampler")
        self.names: dict[int, str] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Sampler":
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.conn.close()

    def _run(self) -> None:
        while not self.stopping.wait(0.1):
            self.names.update(self.conn.execute(
                "SELECT pid, application_name FROM pg_stat_activity "
                "WHERE datname = current_database()").fetchall())


def server_log() -> tuple[Path, int] | None:
    """Return PostgreSQL's log file and its size now, if this process can read it and its
    lines name the backend's pid and database ([%p], %d in log_line_prefix)."""
    with psycopg.connect(ADMIN_URL) as conn:
        prefix, data, current = conn.execute(
            "SELECT current_setting('log_line_prefix'), current_setting('data_directory'), "
            "pg_current_logfile()").fetchone()
    if "[%p]" not in prefix or "@%d" not in prefix:
        return None
    found = [Path(data) / current] if current else sorted(
        Path("/var/log/postgresql").glob("postgresql-*.log"), key=lambda p: p.stat().st_mtime)
    path = found[-1] if found else None
    if path is None or not os.access(path, os.R_OK):
        return None
    return path, path.stat().st_size
