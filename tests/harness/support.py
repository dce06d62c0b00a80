"""Helpers the test modules share: the app, users, signing in, CSRF, the API, leader state.

conftest.py turns the ones a test asks for by name into fixtures (app, client, auth, api,
fleet); test modules import the plain functions from here, never from each other.
"""

import http.cookiejar
import json
import multiprocessing
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import flask_migrate
import psycopg
import pytest
import sqlalchemy as sa
from werkzeug.security import generate_password_hash
from werkzeug.serving import make_server

from tests.harness import media_files
from tests.harness.cluster import (
    ADMIN_URL,
    PLUGINS_KEY,
    PUBLISH_KEY,
    Instance,
    LockView,
    base_env,
    drop_database,
    holding,
    migrated_database,
    stop_all,
    wait_for,
)
from webapp import create_app, media
from webapp.accounts.tokens import create_token
from webapp.config import normalise_database_url
from webapp.extensions import bind_migrations, db
from webapp.models import (
    LeaderEvent,
    LeaderState,
    Post,
    PostReview,
    ScheduledChange,
    User,
    WebhookDelivery,
    WebhookEndpoint,
)
from webapp.plugins import sitemap
from webapp.posts import create_link, releases, revisions

PASSWORD = "correct horse battery"
FAST_HASH = "pbkdf2:sha256:1000"  # tests only (make_app): the app hashes with scrypt
LONG_AGO = datetime(2026, 3, 29, 9, 0, tzinfo=UTC)  # the hello fixture's publication

# Debian's chromium-headless-shell: Chromium's own engine (Blink, V8) without the desktop
# browser around it, the build Playwright itself runs headless. The browser tests cost it
# 73 s of CPU against 125 s for the full browser in headless mode (/usr/bin/chromium, used
# when the shell is missing): a quarter of the suite's time was Chromium's.
CHROMIUMS = ("/usr/lib/chromium/chromium-headless-shell", "/usr/bin/chromium")
CHROMIUM = next((path for path in CHROMIUMS if Path(path).exists()), CHROMIUMS[0])
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
CSRF = re.compile(r'<meta name="csrf-token" content="([^"]+)"|name="csrf_token" value="([^"]+)"')

# a valid timer form: every 5 minutes, in UTC
TIMER = {"name": "Review timer", "action": "sitemap.rebuild", "params": "{}", "kind": "every",
         "every": "5", "unit": "minutes", "cron": "", "run_at": "", "start_at": "",
         "timezone": "UTC", "misfire": "run_once", "grace_seconds": "60",
         "max_runtime_seconds": "300", "max_failures": "5"}


# The app -----------------------------------------------------------------------------------

def postgres_or_skip() -> None:
    """Skip the test when PostgreSQL is not reachable (fail instead on CI)."""
    try:
        psycopg.connect(ADMIN_URL, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        message = (f"PostgreSQL is not reachable at {ADMIN_URL} ({exc}); start it with "
                   "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start")
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs PostgreSQL: {message}")
        pytest.skip(message)


def make_app(database_url: str, **config):
    """Create a test app bound to database_url (migrated separately)."""
    uri = normalise_database_url(database_url)
    settings = {"TESTING": True, "SECRET_KEY": "test", "SQLALCHEMY_DATABASE_URI": uri,
                "LOCK_DATABASE_URL": uri, "INSTANCE_NAME": "pytest",
                "PASSWORD_HASH_METHOD": FAST_HASH}
    settings.update(config)
    return create_app(settings)


def cli_user(database_url: str, email: str, role: str = "admin", password: str = PASSWORD,
             token: bool = True) -> str | None:
    """Create a user (and an API token) with the real `create-user` and `create-token`
    commands, run in this process (a `flask` subprocess costs a second of CPU each);
    return the token (an admin's made for dangerous actions: the fleets' scripts add
    webhook endpoints)."""
    app = make_app(database_url)
    runner = app.test_cli_runner()
    dangerous = ["--dangerous-actions"] if role == "admin" else []
    with app.app_context():
        for args in (["create-user", email, "--role", role, "--password", password],
                     ["create-token", email, *dangerous])[:2 if token else 1]:
            result = runner.invoke(args=args)
            if result.exit_code != 0:
                raise RuntimeError(f"flask {' '.join(args[:2])} failed: {result.output}"
                                   ) from result.exception
        db.session.remove()
        db.engine.dispose()
    return result.output.split()[-1] if token else None


def migrate(app) -> None:
    """Bring app's database to the current schema with the checked-in migrations."""
    bind_migrations(app)
    with app.app_context():
        flask_migrate.upgrade()
        db.engine.dispose()


def text(response) -> str:
    """Return a response's body as text."""
    return response.get_data(as_text=True)


def field_error(page: str, field: str) -> str:
    """Return the error shown next to a form field ('' when there is none)."""
    found = re.search(rf'<small class="error" id="e-{field}">([^<]*)</small>', page)
    return found.group(1) if found else ""


def count(app, model) -> int:
    """Return how many rows model's table holds."""
    with app.app_context():
        return db.session.scalar(sa.select(sa.func.count()).select_from(model))


def new_post(app, title: str = "Hello", status: str = "draft", **fields) -> int:
    """Insert a post directly; return its id."""
    with app.app_context():
        post = Post(title=title, slug=fields.pop("slug", title.lower().replace(" ", "-")),
                    body=fields.pop("body", "Some *text*."), status=status, version=1, **fields)
        db.session.add(post)
        db.session.commit()
        return post.id


def post_status(app, post_id: int) -> str:
    """Return a post's status as the database has it now (read in an app context of its own,
    so a session the test holds open cannot answer from what it read before)."""
    with app.app_context():
        return db.session.get(Post, post_id).status


def race_two(target, *args) -> list:
    """Run target(*args, barrier, results) in two spawned processes that start together at
    the barrier; return what each put on results (two leaders racing for the same rows)."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    children = [ctx.Process(target=target, args=(*args, barrier, results)) for _ in range(2)]
    for child in children:
        child.start()
    done = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(30)
        assert child.exitcode == 0
    results.close()
    return done


# Users, signing in, CSRF -------------------------------------------------------------------

def add_user(app, email: str = "ed@example.com", role: str = "editor", **extra) -> int:
    """Insert an active user with PASSWORD; return its id."""
    with app.app_context():
        fields = {"active": True, "timezone": "UTC", **extra}
        user = User(email=email, role=role,
                    password_hash=generate_password_hash(PASSWORD, FAST_HASH), **fields)
        db.session.add(user)
        db.session.commit()
        return user.id


def csrf_from(html: str) -> str:
    """Return the CSRF token a page carries (its meta tag or a form's hidden field)."""
    found = CSRF.search(html)
    return found.group(1) or found.group(2)


def csrf_token(client, path: str = "/") -> str:
    """Return the CSRF token of client's session, read from the page at path as a browser would."""
    html = text(client.get(path))
    if CSRF.search(html) is None:  # signed out: public pages carry no token, the sign-in form does
        html = text(client.get("/login"))
    return csrf_from(html)


def post_form(client, url: str, data: dict | None = None, **kwargs):
    """POST a form with the session's CSRF token filled in, as the page would."""
    return client.post(url, data={**(data or {}), "csrf_token": csrf_token(client)}, **kwargs)


class AuthActions:
    """Sign a test client in and out through the real forms, as a user of some role."""

    def __init__(self, client) -> None:
        self._client = client

    def login(self, role: str = "editor", *, email: str | None = None,
              password: str = PASSWORD, timezone: str = "UTC", client=None,
              headers: dict | None = None, address: str = "127.0.0.1", **fields: str):
        """Submit the sign-in form on client (this one by default); return the response.

        email defaults to <role>@example.com; when no user has it, an active one with role
        and timezone is created first. address is the client's (REMOTE_ADDR); fields are
        more form fields (next, zone).
        """
        client = client or self._client
        email = email or f"{role}@example.com"
        app = client.application
        with app.app_context():
            known = db.session.scalar(sa.select(User.id).where(
                User.email == email.strip().lower()))
        if known is None:
            add_user(app, email, role, timezone=timezone)
        return post_form(client, "/login", {"email": email, "password": password, **fields},
                         headers=headers or {}, environ_base={"REMOTE_ADDR": address})

    def logout(self, client=None):
        """Submit the sign-out form on client (this one by default); return the response."""
        return post_form(client or self._client, "/logout")

    def client(self, role: str = "editor", *, email: str | None = None, timezone: str = "UTC"):
        """Return a new test client signed in as role (see login)."""
        client = self._client.application.test_client()
        response = self.login(role, email=email, timezone=timezone, client=client)
        assert response.status_code == 302, text(response)[:500]
        return client


# The JSON API ------------------------------------------------------------------------------

class Api:
    """A test client that sends JSON with a role's bearer token (the admin's made for
    dangerous actions, as a script that adds webhook endpoints needs)."""

    def __init__(self, app) -> None:
        self.app = app
        self.client = app.test_client()
        self.tokens: dict[str, str] = {}
        for role in ("viewer", "editor", "admin"):
            add_user(app, f"{role}@example.com", role)
            with app.app_context():
                user = db.session.scalar(sa.select(User).where(User.role == role))
                self.tokens[role] = create_token(user, "tests", dangerous=role == "admin")

    def __call__(self, method: str, path: str, role: str | None = "editor", body=None,
                 raw: str | None = None, token: str | None = None):
        headers = {}
        if token or role:
            headers["Authorization"] = f"Bearer {token or self.tokens[role]}"
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        response = self.client.open(path, method=method, data=data, headers=headers,
                                    content_type="application/json")
        assert response.status_code != 500, response.get_data(as_text=True)
        assert response.is_json, f"{method} {path} answered {response.content_type}"
        return response


# Leadership --------------------------------------------------------------------------------

def record_term(app, key: int, conn: psycopg.Connection, term: int = 1,
                heartbeat_age: float = 0.0) -> None:
    """Record conn's backend as key's holder the way the scheduler does."""
    with app.app_context():
        now = db.session.scalar(sa.text("SELECT now()"))
        db.session.merge(LeaderState(
            key=key, term=term, holder=conn.info.parameter_status("application_name"),
            holder_pid=conn.info.backend_pid, acquired_at=now - timedelta(minutes=5),
            heartbeat_at=now - timedelta(seconds=heartbeat_age), last_result="published 3",
            last_work_at=now, step_down_requested=False))
        db.session.commit()


@contextmanager
def leaders(app, database_url: str):
    """Hold both keys (publish with a stale heartbeat) with two standbys and some history.

    What the status page shows during an incident, without starting a scheduler.
    """
    with holding(database_url, "soloist:web.1:4101", PUBLISH_KEY) as one, \
            holding(database_url, "soloist:web.2:4102", PLUGINS_KEY) as two, \
            holding(database_url, "soloist:web.3:4103"):
        record_term(app, PUBLISH_KEY, one, term=3, heartbeat_age=42)
        record_term(app, PLUGINS_KEY, two, term=2, heartbeat_age=0.4)
        with app.app_context():
            now = db.session.scalar(sa.text("SELECT now()"))
            db.session.add_all([
                LeaderEvent(key=PUBLISH_KEY, kind=kind, term=term, holder=holder,
                            at=now - timedelta(minutes=ago), detail=detail)
                for kind, term, holder, ago, detail in (
                    ("acquired", 2, "soloist:web.2:4102", 30, ""),
                    ("evicted", 2, "soloist:web.2:4102", 6, "heartbeat 12 s old"),
                    ("acquired", 3, "soloist:web.1:4101", 5, ""))])
            db.session.add(LeaderEvent(key=PLUGINS_KEY, kind="acquired", term=2,
                                       holder="soloist:web.2:4102",
                                       at=now - timedelta(minutes=20), detail=""))
            db.session.commit()
        yield


class Fleet:
    """Two gunicorn instances (one worker each) on their own database, with an admin."""

    ADMIN = "admin@example.com"

    def __init__(self, tmp: Path, **env: str) -> None:
        self.url = migrated_database("soloist_leaderview")
        self.env = base_env(self.url)
        self.token = cli_user(self.url, self.ADMIN)
        self.view = LockView(self.url)
        self.instances = [Instance(name, self.url, workers=1, log_dir=tmp, **env).start()
                          for name in ("a", "b")]

    def settled(self) -> bool:
        """Both keys held and one lock session per worker."""
        return (set(self.view.holders()) == {PUBLISH_KEY, PLUGINS_KEY}
                and len(self.view.lock_sessions()) == 2)

    def wait_settled(self) -> None:
        wait_for(self.settled, 60, "both keys held and both workers connected", interval=0.1)

    def other_than(self, application_name: str) -> Instance:
        """Return the instance that does not run the process application_name names."""
        return next(i for i in self.instances if not i.owns(application_name))

    def api(self, instance: Instance, path: str) -> object:
        request = urllib.request.Request(instance.url + path,
                                         headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    def close(self) -> None:
        stop_all(self.instances)
        self.view.close()
        drop_database(self.url)


class WebSession:
    """A signed-in browser session over plain HTTP (cookies, CSRF tokens from the forms)."""

    def __init__(self, base: str, email: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        token = csrf_from(self.get("/login"))
        self.post("/login", {"email": email, "password": PASSWORD, "csrf_token": token})

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=10) as response:
            return response.read().decode()

    def post(self, path: str, form: dict) -> str:
        data = urllib.parse.urlencode(form).encode()
        with self.opener.open(self.base + path, data=data, timeout=15) as response:
            return response.read().decode()

    def submit(self, path: str, form: dict, page: str = "/settings") -> tuple[int, str]:
        """POST form with the CSRF token of page, as a browser would; return the status and
        the answer (after a redirect, the page it leads to), a refusal's included."""
        data = urllib.parse.urlencode({**form, "csrf_token": csrf_from(self.get(page))})
        try:
            with self.opener.open(self.base + path, data=data.encode(), timeout=15) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as refused:
            with refused:
                return refused.code, refused.read().decode()


# Every page, for the browser tests ---------------------------------------------------------

ROLES = ("viewer", "contributor", "editor", "admin")
RANK = {None: 0, "viewer": 1, "contributor": 2, "editor": 3, "admin": 4}


def seed_site(app) -> dict:
    """Give app one user per role, posts, webhooks and a timer; return what pages() needs.

    Something in every state a page draws differently (a badge per status), so the browser
    tests see each colour and control the pages can show.
    """
    for role in ROLES:
        add_user(app, f"{role}@example.com", role)
    now = datetime.now(UTC)
    post_id = new_post(app, "Hello", status="published", published_at=now)
    soon = new_post(app, "Soon", status="scheduled", publish_at=now + timedelta(days=1))
    gone = new_post(app, "Gone", status="unpublished", published_at=now - timedelta(days=1))
    pitch = new_post(app, "Pitch")  # a contributor's, in review; Gone was sent back
    seed_webhooks(app)
    with app.app_context():
        sitemap.rebuild(now)
        media.upload(media_files.jpeg((1000, 700)), "harbour.jpg", "The harbour", 10_000_000,
                     None)  # the Media page shows a row, its thumbnail and delete button
        # a history to compare, and a change waiting to go live (the panel shows it)
        revisions.keep(post_id, "Hello", "Some text.", "create", True)
        revisions.keep(post_id, "Hello", "Some *text*.", "edit", True)
        first = revisions.current_revision_id(post_id) - 1
        db.session.add(ScheduledChange(post_id=post_id, title="Hello", body="Some new *text*.",
                                       apply_at=now + timedelta(days=2), base_version=1,
                                       base_digest="", author="editor@example.com"))
        writer = db.session.scalar(sa.select(User.id).where(User.role == "contributor"))
        db.session.add_all([PostReview(post_id=pitch, state="in_review", author_id=writer,
                                       author="contributor@example.com", submitted_at=now),
                            PostReview(post_id=gone, state="changes_requested",
                                       author_id=writer, author="contributor@example.com",
                                       reviewer="editor@example.com", note="Say when.")])
        db.session.commit()
    admin = AuthActions(app.test_client()).client("admin")
    created = post_form(admin, "/admin/timers/new", TIMER)
    assert created.status_code in (302, 303), text(created)[:300]
    with app.app_context():  # a link to the scheduled post, for its page and its preview
        preview = "/preview/" + create_link(soon, 7, None)[1]
        # a release waiting to go: the draft "Gone" back, a new text for "Hello", a new name
        release = releases.create_release("Spring launch", now + timedelta(days=3), [
            releases.ItemSpec("publish", gone), releases.ItemSpec(
                "change", post_id, title="Hello", body="Some *spring* text."),
            releases.ItemSpec("settings", site_name="Spring", site_description="")]).id
    return {"post": post_id, "timer": created.headers["Location"].rstrip("/"), "soon": soon,
            "preview": preview, "revision": first, "pitch": pitch, "gone": gone,
            "release": release}


def seed_webhooks(app) -> None:
    """Add a working and a failing, switched-off endpoint with a delivery in each state."""
    with app.app_context():
        now = datetime.now(UTC)
        good = WebhookEndpoint(url="https://hooks.example.com/soloist", secret="s" * 32,
                               events=["post.published"], description="CMS cache")
        bad = WebhookEndpoint(url="https://down.example.net/hook", secret="t" * 32,
                              events=["post.published", "ops.no_leader"], active=False,
                              failures=3, last_attempt_at=now,
                              last_error="ConnectionRefusedError: [Errno 111] Connection refused",
                              retry_at=now + timedelta(minutes=5), payload_format="slack")
        db.session.add_all([good, bad])
        db.session.flush()
        db.session.add_all([
            WebhookDelivery(delivery_id=f"00000000-0000-4000-8000-00000000000{n}",
                            endpoint_id=endpoint.id, topic="post.published", body="{}",
                            status=status, attempts=attempts, response_status=answer,
                            last_error=error, next_attempt_at=now + timedelta(minutes=5))
            for n, (endpoint, status, attempts, answer, error) in enumerate((
                (good, "delivered", 1, 200, ""), (bad, "failed", 8, 502, "HTTP 502"),
                (bad, "pending", 3, None, "timed out")))])
        db.session.commit()


def read_whole(app):
    """Return app with each answer read whole and its iterable closed before it is sent.

    werkzeug's development server skips close() when the browser drops the connection
    mid-answer (a favicon request cancelled by the next navigation): the static file's
    handle was then left to the garbage collector, and its ResourceWarning failed the run.
    """
    def wrapped(environ, start_response):
        answer = app(environ, start_response)
        try:
            return [b"".join(answer)]
        finally:
            if hasattr(answer, "close"):
                answer.close()

    return wrapped


@contextmanager
def serve(app):
    """Serve app from a thread on a free local port; yield its base URL."""
    server = make_server("127.0.0.1", 0, read_whole(app), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def pages(site: dict) -> list[tuple[str, str | None]]:
    """Return every page with the least role that may see it (None: anyone).

    The CSP and accessibility browser tests visit each as every role: add new pages here.
    """
    timer = site["timer"]
    return [
        ("/", None), ("/posts/hello", None), ("/feed.xml", None), ("/sitemap.xml", None),
        ("/login", None), ("/no-such-page", None), (site["preview"], None),
        ("/admin/", "viewer"), ("/status/", "viewer"), ("/settings", "viewer"),
        ("/settings/two-factor/", "viewer"), ("/settings/passkeys", "viewer"),
        ("/admin/posts/", "contributor"), ("/admin/posts/new", "contributor"),
        (f"/admin/posts/{site['post']}", "contributor"),
        (f"/admin/posts/{site['soon']}", "contributor"),
        (f"/admin/posts/{site['pitch']}", "contributor"),  # in review: approve or send back
        (f"/admin/posts/{site['gone']}", "contributor"),  # sent back: the note
        ("/admin/timers/", "editor"),
        (f"/admin/posts/{site['post']}/history", "editor"),
        (f"/admin/posts/{site['post']}/history/{site['revision']}", "editor"),
        (f"/admin/posts/{site['post']}/compare?a={site['revision']}", "editor"),
        (f"/admin/posts/{site['post']}/change", "editor"),
        ("/admin/timers/new", "editor"), (timer, "editor"), (f"{timer}/edit", "editor"),
        ("/admin/plugins/", "admin"),
        ("/admin/calendar/", "editor"), ("/admin/calendar/?view=week&timers=1", "editor"),
        ("/status/publish/step-down", "admin"), ("/status/plugins/evict", "admin"),
        ("/admin/webhooks/", "admin"), ("/admin/users/", "admin"),
        ("/admin/users/1", "admin"), ("/admin/freeze/", "admin"), ("/admin/audit/", "admin"),
        ("/admin/site/", "admin"), ("/admin/media/", "editor"),
        ("/admin/releases/", "editor"), (f"/admin/releases/{site['release']}", "editor"),
        (f"/admin/releases/{site['release']}/change?post_id={site['post']}", "editor"),
    ]


def expected_status(path: str, needs: str | None, role: str | None) -> int:
    """Return what role should get: the page, the sign-in form, a 403 or the 404 page."""
    if path == "/no-such-page":
        return 404
    return 200 if role is None or RANK[role] >= RANK[needs] else 403


def sign_in_page(page, email: str) -> None:
    """Sign a Playwright page in through the form, as email (with PASSWORD)."""
    page.goto("/login")
    page.fill("#f-email", email)
    page.fill("#f-password", PASSWORD)
    page.click("button.primary")
    page.wait_for_url("**/admin/")
