"""A fleet to hurt: gunicorn instances in process groups of their own, on one database.

Shared by the fault tests (tests/test_faults.py, tests/test_chaos.py) and bench/faults.py.
Each instance is a host: `GroupInstance.group_signal(SIGSTOP)` freezes its master and
workers at once, SIGKILL of the group takes the whole host away. `FaultFleet` migrates the
database, creates an admin with an API token, starts and replaces instances, reads
pg_locks through a connection that survives a database restart, schedules posts and says
what became of them. `close()` stops everything and reports what was still running.
"""

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from tests.harness.cluster import (
    BIN,
    PLUGINS_KEY,
    PUBLISH_KEY,
    ROOT,
    Instance,
    LockView,
    pid_of,
    wait_for,
)
from tests.harness.pgserver import group_members
from tests.harness.support import cli_user, make_app, migrate

KEYS = (PUBLISH_KEY, PLUGINS_KEY)
ADMIN = "admin@example.com"
PASSWORD = "correct horse battery"

HOLDERS_SQL = """
SELECT ((l.classid::bigint << 32) | l.objid::bigint), a.application_name
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""

SESSIONS_SQL = """
SELECT application_name FROM pg_stat_activity
WHERE application_name LIKE 'soloist:%' AND datname = current_database()
"""

INSERT_SQL = """
INSERT INTO posts (title, slug, body, status, publish_at, published_at, version, created_at,
                   updated_at)
SELECT p.prefix || ' ' || i, p.prefix || '-' || i, 'Fault test post.', p.status,
       now() + make_interval(secs => p.lead + p.spread * (i - 1) / greatest(p.n - 1, 1)),
       CASE WHEN p.status = 'published' THEN now() END, 1, now(), now()
FROM (SELECT %(prefix)s::text AS prefix, %(status)s::text AS status, %(lead)s::float8 AS lead,
             %(spread)s::float8 AS spread, %(n)s::int AS n) AS p,
     generate_series(1, p.n) AS i ORDER BY i
RETURNING id
"""

OUTCOME_SQL = """
SELECT p.id, p.status, extract(epoch FROM p.publish_at)::float8,
       extract(epoch FROM p.published_at)::float8, count(o.id)
FROM posts p LEFT JOIN outbox_events o ON o.post_id = p.id AND o.topic = 'post.published'
WHERE p.id = ANY(%s) GROUP BY p.id ORDER BY p.id
"""

# a scheduled change for each of some live posts: new text due lead .. lead + spread s on
CHANGE_SQL = """
INSERT INTO scheduled_changes (post_id, title, body, apply_at, base_version, base_digest,
                               author, created_at, updated_at)
SELECT p.id, p.title, 'Changed by its schedule.',
       now() + make_interval(secs => %(lead)s + %(spread)s * (row_number() OVER (ORDER BY p.id)
                                                              - 1) / greatest(%(n)s - 1, 1)),
       p.version, '', '', now(), now()
FROM posts p WHERE p.id = ANY(%(ids)s)
RETURNING post_id
"""

# each changed post: its text, how many post.updated rows, when the first was written and
# when the change was due (kept in the revision the swap wrote: its created_at is the swap's)
CHANGED_SQL = """
SELECT p.id, p.body, count(o.id), extract(epoch FROM min(o.created_at))::float8,
       (SELECT count(*) FROM scheduled_changes c WHERE c.post_id = p.id)
FROM posts p LEFT JOIN outbox_events o ON o.post_id = p.id AND o.topic = 'post.updated'
WHERE p.id = ANY(%s) GROUP BY p.id ORDER BY p.id
"""

# releases due lead .. lead + spread s on, each publishing per drafts of its own
RELEASE_SQL = """
WITH r AS (
  INSERT INTO releases (name, release_at, status, version, author, created_at, updated_at)
  SELECT %(prefix)s || ' ' || g,
         now() + make_interval(secs => %(lead)s + %(spread)s * (g - 1) / greatest(%(n)s - 1, 1)),
         'scheduled', 1, '', now(), now()
  FROM generate_series(1, %(n)s) AS g RETURNING id),
p AS (
  INSERT INTO posts (title, slug, body, status, version, created_at, updated_at)
  SELECT 'Released ' || r.id || ' ' || k, %(prefix)s || '-' || r.id || '-' || k,
         'In a release.', 'draft', 1, now(), now()
  FROM r, generate_series(1, %(per)s) AS k RETURNING id, slug)
INSERT INTO release_items (release_id, kind, post_id, created_at)
SELECT split_part(p.slug, '-', 2)::int, 'publish', p.id, now() FROM p
RETURNING release_id
"""

# each release: its status, when due and when it went, its release.published rows, its
# items, those published in its transaction (at its published_at) and their post.published rows
RELEASED_SQL = """
SELECT r.id, r.status, extract(epoch FROM r.release_at)::float8,
       extract(epoch FROM r.published_at)::float8,
       (SELECT count(*) FROM outbox_events o WHERE o.topic = 'release.published'
          AND (o.payload->>'release_id')::int = r.id),
       (SELECT count(*) FROM release_items i WHERE i.release_id = r.id),
       (SELECT count(*) FROM release_items i JOIN posts p ON p.id = i.post_id
          WHERE i.release_id = r.id AND p.status = 'published'
          AND p.published_at = r.published_at),
       (SELECT count(*) FROM release_items i JOIN outbox_events o ON o.post_id = i.post_id
          AND o.topic = 'post.published' WHERE i.release_id = r.id)
FROM releases r WHERE r.id = ANY(%s) ORDER BY r.id
"""


class GroupInstance(Instance):
    """A gunicorn instance in a session of its own: one process group, like one host."""

    def start(self) -> "GroupInstance":
        """Start gunicorn the way the Procfile does, as the leader of a new process group."""
        self.log = open(self.log_path, "w")  # noqa: SIM115  (closed in stop)
        self.proc = subprocess.Popen(
            [str(BIN / "gunicorn"), "-c", "webapp/gunicorn_conf.py", "webapp:create_app()"],
            cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.started = time.time()
        return self

    @property
    def pgid(self) -> int:
        return self.proc.pid

    def group_signal(self, sig: int) -> float:
        """Send sig to the master and every worker at once; return the time just before."""
        sent = time.time()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, sig)
        return sent

    def alive(self) -> list[int]:
        """Return the group's processes that are still running (zombies excluded)."""
        return group_members(self.pgid) if self.proc is not None else []

    @property
    def exited(self) -> bool:
        """Return whether the master has exited (it is reaped here)."""
        return self.proc is None or self.proc.poll() is not None

    def stop(self, timeout: float = 30) -> int | None:
        """Continue the group, SIGTERM the master and wait; SIGKILL the group if it hangs."""
        if self.proc is None:
            return None
        self.group_signal(signal.SIGCONT)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.group_signal(signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class View(LockView):
    """pg_locks and the fleet's tables through a connection that reconnects when cut."""

    def __init__(self, database_url: str) -> None:
        self.url = database_url
        super().__init__(database_url)

    @property
    def backend_pid(self) -> int:
        return self.conn.info.backend_pid

    def query(self, sql: str, params: object = None) -> list[tuple]:
        """Run one statement, reconnecting once if the connection was lost; return its rows
        (none for a statement that returns nothing)."""
        try:
            return self._run(sql, params)
        except psycopg.OperationalError:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = psycopg.connect(self.url, autocommit=True, connect_timeout=3)
            return self._run(sql, params)

    def _run(self, sql: str, params: object) -> list[tuple]:
        cur = self.conn.execute(sql, params)
        return cur.fetchall() if cur.description else []

    def holders(self) -> dict[int, str]:
        return dict(self.query(HOLDERS_SQL))

    def lock_sessions(self) -> list[str]:
        return [row[0] for row in self.query(SESSIONS_SQL)]

    def quiet(self, fn, *args: object):
        """Return fn(*args), or None while the database does not answer."""
        try:
            return fn(*args)
        except psycopg.OperationalError:
            return None


@dataclass
class Outcome:
    """What became of some scheduled posts."""

    total: int = 0
    missing: list[int] = field(default_factory=list)  # not published
    not_once: dict[int, int] = field(default_factory=dict)  # post id -> post.published rows
    early: list[int] = field(default_factory=list)  # published_at < publish_at
    lags: list[float] = field(default_factory=list)  # published_at - publish_at, s
    published_at: dict[int, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.not_once or self.early)

    def __str__(self) -> str:
        not_once = dict(list(self.not_once.items())[:10])
        return (f"{self.total - len(self.missing)}/{self.total} published; missing "
                f"{self.missing[:10]}; outbox rows other than one {not_once}; "
                f"early {self.early[:10]}; max lag {max(self.lags, default=0):.3f} s")


class FaultFleet:
    """gunicorn instances (GroupInstance) on one migrated database, with an admin token."""

    def __init__(self, url: str, log_dir: Path, prefix: str = "f", view_url: str | None = None,
                 migrated: bool = False, **env: str) -> None:
        """Migrate url (one host; not when it is migrated already) and make an admin;
        view_url (default url) is what the fleet's own reads go through: a multi-host URL
        follows a failover."""
        self.url = url
        self.dbname = url.rsplit("/", 1)[1]
        self.log_dir = log_dir
        self.prefix = prefix
        self.env = env  # for every instance
        self.instances: list[GroupInstance] = []  # serving (or meant to)
        self.gone: list[GroupInstance] = []  # killed, terminated or stopped
        self.count = 0
        # the real migrations and create-user/create-token commands, run in this process:
        # three `flask` subprocesses cost seconds of CPU each on a busy 2-core machine
        if not migrated:
            migrate(make_app(url))
        self.token = cli_user(url, ADMIN, "admin", PASSWORD)
        self.view = View((view_url or url).replace("postgres://", "postgresql://", 1))

    # --- instances ------------------------------------------------------------------------

    def spawn(self, workers: int = 2, kind=GroupInstance, **env: str) -> GroupInstance:
        """Start one more instance (a new name) with the fleet's settings plus env
        (DATABASE_URL among them overrides the fleet's); kind makes the instance."""
        self.count += 1
        settings = {**self.env, **env}
        instance = kind(f"{self.prefix}{self.count}", self.url, workers=workers,
                        log_dir=self.log_dir, **settings)
        instance.workers = workers
        self.instances.append(instance.start())
        return instance

    def start(self, n: int, workers: int = 2, **env: str) -> None:
        """Start n instances and wait until the fleet has settled."""
        for _ in range(n):
            self.spawn(workers, **env)
        self.wait_settled()

    def retire(self, instance: GroupInstance) -> None:
        """Count instance as gone (it was killed or told to stop)."""
        if instance in self.instances:
            self.instances.remove(instance)
            self.gone.append(instance)

    def worker_pids(self) -> set[int]:
        return {pid for inst in self.instances for pid in inst.worker_pids()}

    def instance_of(self, application_name: str | None) -> GroupInstance | None:
        """Return the instance a soloist[-role]:<instance>:<pid> connection belongs to."""
        if not application_name or application_name.count(":") < 2:
            return None
        name = application_name.split(":")[1]
        return next((i for i in self.instances + self.gone if i.name == name), None)

    def settled(self) -> bool:
        """Every worker of every instance up, each instance's one candidate connected, and
        both keys held by live workers."""
        workers = self.worker_pids()
        expected = sum(i.workers for i in self.instances)
        sessions = self.view.lock_sessions()
        holders = self.view.holders()
        candidates = sorted(self.instance_of(n).name if self.instance_of(n) else ""
                            for n in sessions)
        return (len(workers) == expected and all(pid_of(n) in workers for n in sessions)
                and candidates == sorted(i.name for i in self.instances)
                and all(k in holders and pid_of(holders[k]) in workers for k in KEYS)
                and not self.unrecorded_losses(workers))

    def unrecorded_losses(self, workers: set[int]) -> list[tuple]:
        """Return the evictions of a worker still alive that has not recorded its "lost"
        yet (a thawed worker writes it when it next runs: not settled until it has)."""
        rows = self.view.query(
            "SELECT e.key, e.term, e.holder FROM leader_events e WHERE e.kind = 'evicted' "
            "AND NOT EXISTS (SELECT 1 FROM leader_events l WHERE l.kind = 'lost' "
            "AND l.key = e.key AND l.term = e.term AND l.holder = e.holder)")
        return [row for row in rows if pid_of(row[2]) in workers]

    def wait_settled(self, timeout: float = 60) -> None:
        """Wait until settled(); fail at once, with its log, if an instance has exited."""
        def settled() -> bool:
            self.check_running()
            return self.view.quiet(self.settled)

        wait_for(settled, timeout, "every worker's lock session and both keys held",
                 interval=0.05)

    def check_running(self) -> None:
        """Raise with the end of its log if an instance meant to serve has exited."""
        for inst in self.instances:
            if inst.proc is not None and inst.proc.poll() is not None:
                tail = "\n".join(inst.read_log().splitlines()[-15:])
                raise AssertionError(f"instance {inst.name} exited with {inst.proc.returncode}"
                                     f":\n{tail}")

    def sessions_of(self, instance: GroupInstance) -> list[tuple[str, str, str]]:
        """Return (application_name, state, backend start) of every connection the server
        has for instance, whatever its role (soloist[-role]:<instance>:<pid>)."""
        rows = self.view.query(
            "SELECT application_name, coalesce(state, ''), backend_start::text "
            "FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name LIKE 'soloist%'")
        return [row for row in rows if self.instance_of(row[0]) is instance]

    def leader(self, key: int = PUBLISH_KEY) -> tuple[GroupInstance, int]:
        """Return the instance and worker pid leading key now."""
        name = wait_for(lambda: self.view.holder(key), 30, f"a leader of key {key:#x}")
        return self.instance_of(name), pid_of(name)

    def close(self, grace: float = 10) -> list[str]:
        """Stop every instance; return a description of any process that was still running
        grace seconds after its instance stopped (then it is killed)."""
        everything = self.instances + self.gone
        for inst in everything:
            inst.group_signal(signal.SIGCONT)
            inst.signal(signal.SIGTERM)
        for inst in everything:
            inst.stop()
        left = []
        for inst in everything:
            try:
                wait_for(lambda i=inst: not i.alive(), grace, "", interval=0.1)
            except AssertionError:
                left += [f"{inst.name}: pid {pid} {_cmdline(pid)}" for pid in inst.alive()]
                inst.group_signal(signal.SIGKILL)
        self.instances, self.gone = [], everything
        self.view.close()
        return left

    # --- the JSON API -----------------------------------------------------------------------

    def api(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        """Call the JSON API as the admin on the first instance that answers."""
        error: Exception | None = None
        for inst in self.instances:
            request = urllib.request.Request(
                inst.url + path, method=method,
                data=None if body is None else json.dumps(body).encode(),
                headers={"Authorization": f"Bearer {self.token}",
                         "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return response.status, json.load(response)
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode(errors="replace")
            except OSError as exc:
                error = exc
        raise RuntimeError(f"no instance answered {method} {path}: {error}")

    # --- posts -----------------------------------------------------------------------------

    def schedule(self, prefix: str, n: int, lead: float, spread: float = 0.0) -> list[int]:
        """Schedule n posts due lead .. lead + spread s from now (evenly), wake the leader."""
        return self._insert(prefix, n, lead, spread, "scheduled")

    def add_published(self, prefix: str, n: int) -> list[int]:
        """Add n posts published already (pages for a web load to read)."""
        return self._insert(prefix, n, -60, 0, "published")

    def _insert(self, prefix: str, n: int, lead: float, spread: float, status: str) -> list[int]:
        rows = self.view.query(INSERT_SQL, {"prefix": prefix, "n": n, "lead": lead,
                                            "spread": spread, "status": status})
        self.view.query("SELECT pg_notify('soloist_wake', 'publish')")
        return [r[0] for r in rows]

    def schedule_changes(self, prefix: str, n: int, lead: float, spread: float) -> dict:
        """Add n live posts, each with a change due lead .. lead + spread s from now; return
        {post id: apply_at epoch}."""
        return schedule_changes(self.view, self.add_published(prefix, n), lead, spread)

    def changed(self, due: dict) -> dict[str, list]:
        """Say which changes (post id -> apply_at) went in other than once, or early."""
        return changed(self.view, due)

    def schedule_releases(self, prefix: str, n: int, per: int, lead: float,
                          spread: float) -> list[int]:
        """Add n releases of per drafts each due lead .. lead + spread s from now; their ids."""
        return schedule_releases(self.view, prefix, n, per, lead, spread)

    def released(self, ids: list[int]) -> dict[str, list]:
        """Say which releases went other than once and whole, or early, and the others' lags."""
        return released(self.view, ids)

    def published(self, ids: list[int]) -> int:
        """Return how many of ids are published."""
        return self.view.query("SELECT count(*) FROM posts WHERE id = ANY(%s) AND "
                               "status = 'published'", (ids,))[0][0]

    def outcome(self, ids: list[int]) -> Outcome:
        """Say which of ids are published, how often, how late, and whether any was early."""
        result = Outcome(total=len(ids))
        for post_id, status, due, done, rows in self.view.query(OUTCOME_SQL, (ids,)):
            if status != "published":
                result.missing.append(post_id)
                continue
            if rows != 1:
                result.not_once[post_id] = rows
            if done < due:
                result.early.append(post_id)
            result.lags.append(done - due)
            result.published_at[post_id] = done
        return result

    def last_event_id(self) -> int:
        return self.view.query("SELECT coalesce(max(id), 0) FROM leader_events")[0][0]

    def events_since(self, event_id: int) -> list[tuple]:
        """Return (kind, key, term, holder, at epoch, detail) of leadership events after id."""
        return self.view.query(
            "SELECT kind, key, term, holder, extract(epoch FROM at)::float8, detail "
            "FROM leader_events WHERE id > %s ORDER BY id", (event_id,))

    def db_clock(self) -> float:
        return self.view.query("SELECT extract(epoch FROM clock_timestamp())::float8")[0][0]


def schedule_changes(view, ids: list[int], lead: float, spread: float) -> dict:
    """Give each live post of ids a change due lead .. lead + spread s from now (evenly) and
    wake the publish leader; return {post id: apply_at epoch}. view: anything with query()."""
    view.query(CHANGE_SQL, {"ids": ids, "n": len(ids), "lead": lead, "spread": spread})
    view.query("SELECT pg_notify('soloist_wake', 'publish')")
    return dict(view.query(
        "SELECT post_id, extract(epoch FROM apply_at)::float8 FROM scheduled_changes "
        "WHERE post_id = ANY(%s)", (ids,)))


def changed(view, due: dict) -> dict[str, list]:
    """Say which changes (post id -> apply_at epoch) went in other than once, or early, and
    the others' lags (the post.updated row's created_at, the swap's clock, minus apply_at)."""
    result: dict[str, list] = {"not_once": [], "early": [], "lags": []}
    for post_id, body, events, first, pending in view.query(CHANGED_SQL, (list(due),)):
        if events != 1 or pending or body != "Changed by its schedule.":
            result["not_once"].append((post_id, events, pending))
        elif first < due[post_id]:
            result["early"].append(post_id)
        else:
            result["lags"].append(first - due[post_id])
    return result


def schedule_releases(view, prefix: str, n: int, per: int, lead: float,
                      spread: float) -> list[int]:
    """Add n releases of per drafts each, due lead .. lead + spread s from now (evenly), and
    wake the publish leader; return their ids. prefix: letters only (slugs carry the id)."""
    rows = view.query(RELEASE_SQL, {"prefix": prefix, "n": n, "per": per, "lead": lead,
                                    "spread": spread})
    view.query("SELECT pg_notify('soloist_wake', 'publish')")
    return sorted({r[0] for r in rows})


def released(view, ids: list[int]) -> dict[str, list]:
    """Say which releases went other than once and whole (one release.published row, every
    post published in its transaction with one post.published row), or early, and the
    others' lags (published_at, the leader's tick clock, minus release_at)."""
    result: dict[str, list] = {"not_once": [], "early": [], "lags": []}
    for rid, status, due, done, events, items, together, post_events in view.query(
            RELEASED_SQL, (ids,)):
        if status != "published" or events != 1 or together != items or post_events != items:
            result["not_once"].append((rid, status, events, items, together, post_events))
        elif done < due:
            result["early"].append(rid)
        else:
            result["lags"].append(done - due)
    return result


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def served_pids(instance: Instance, path: str, status: int, since: float) -> set[int]:
    """Return the worker pids whose access log shows `GET path` answered status after since.

    Every log line carries the process id ([%(process)d], webapp/gunicorn_conf.py).
    """
    found = set()
    for line in instance.read_log().splitlines():
        if f'"GET {path} HTTP/1.1" {status} ' not in line or "gunicorn.access" not in line:
            continue
        try:
            stamp = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
            pid = int(line.split("] [", 1)[1].split("]", 1)[0])
        except (ValueError, IndexError):
            continue
        if stamp >= int(since):
            found.add(pid)
    return found

