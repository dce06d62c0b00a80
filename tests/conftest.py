"""Fixtures: a real PostgreSQL database per test session, SQLite files per test, and
flaskr-style app, client, runner and auth fixtures. The helpers live in tests/harness/, the
run order and the other hooks in its plugin."""

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from tests.harness.cache_apis import CacheAPI
from tests.harness.cluster import (
    Instance,
    LockView,
    drop_database,
    migrated_database,
    stop_all,
)
from tests.harness.database import emptied
from tests.harness.pgserver import throwaway_server
from tests.harness.receiver import Receiver
from tests.harness.support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    LONG_AGO,
    Api,
    AuthActions,
    Fleet,
    make_app,
    migrate,
    new_post,
    postgres_or_skip,
    seed_site,
    serve,
)
from webapp.extensions import db
from webapp.leadership import close_all_sessions
from webapp.site import state as site_state

pytest_plugins = ["tests.harness.plugin"]


@pytest.fixture(autouse=True)
def _close_lock_sessions():
    """Close the per-process lock sessions a test opened through the seed API."""
    yield
    close_all_sessions()


@pytest.fixture(scope="session")
def pg_url() -> str:
    """Return the URL of a freshly migrated PostgreSQL database for this test run."""
    postgres_or_skip()
    url = migrated_database()
    yield url
    drop_database(url)


@pytest.fixture(scope="session")
def _session_app(pg_url):
    """Build the app once per test process: creating one costs ~45 ms (werkzeug compiles a
    builder for each of its 115 routes), a minute of CPU over the suite."""
    app = make_app(pg_url)
    return app, dict(app.config), set(app.extensions)


@pytest.fixture
def app(_session_app):
    """Return an app on the session's PostgreSQL database, emptied before each test.

    One app serves every test of the process, as it was made: a test's changes to its
    config and the caches it filled (app.extensions) are undone after it, its database
    connections closed.
    """
    app, config, extensions = _session_app
    with emptied(app):
        yield app
    app.config.clear()
    app.config.update(config)
    for key in set(app.extensions) - extensions:
        del app.extensions[key]


@pytest.fixture
def fresh_app(pg_url):
    """Return an app of the test's own, emptied database tables and all: for a test that adds
    routes to it (Flask refuses those on an app that has served a request). A module that
    needs one overrides app with it."""
    with emptied(make_app(pg_url)) as app:
        yield app


@pytest.fixture(params=["postgresql", "sqlite"])
def any_app(request):
    """Return an app on PostgreSQL, then on SQLite: the test runs on both."""
    return request.getfixturevalue("app" if request.param == "postgresql" else "sqlite_app")


@pytest.fixture
def client(app):
    """Return a test client of app, signed out."""
    return app.test_client()


@pytest.fixture
def runner(app):
    """Return a runner for app's command-line commands."""
    return app.test_cli_runner()


@pytest.fixture
def auth(client):
    """Return the sign-in helper of client: auth.login(role=...), auth.logout(), auth.client()."""
    return AuthActions(client)


@pytest.fixture
def editor(client, auth):
    """Return the test client, signed in as editor@example.com."""
    auth.login("editor")
    return client


@pytest.fixture
def api(app):
    """Return a JSON client with a bearer token for each role (users viewer/editor/admin@)."""
    return Api(app)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """Return a SQLite file migrated once for the session, for sqlite_url to copy."""
    path = tmp_path_factory.mktemp("sqlite") / "template.db"
    migrate(make_app(f"sqlite:///{path}"))
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """Return the URL of a migrated SQLite file (a copy of sqlite_template)."""
    path = tmp_path / "soloist.db"
    with closing(sqlite3.connect(sqlite_template)) as source, \
            closing(sqlite3.connect(path)) as copy:
        source.backup(copy)  # the whole database, whatever its journal mode left in a -wal
    return f"sqlite:///{path}"


@pytest.fixture
def sqlite_app(sqlite_url):
    """Return an app on a migrated SQLite file."""
    app = make_app(sqlite_url)
    yield app
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def receiver():
    """Return a local webhook receiver (tests/harness/receiver.py) on 127.0.0.1, closed after."""
    running = Receiver().start()
    yield running
    running.close()


@pytest.fixture
def cache_api():
    """Return a stand-in for the caches' purge APIs (tests/harness/cache_apis.py), closed after."""
    server = CacheAPI().start()
    yield server
    server.close()


@pytest.fixture
def hello(app) -> int:
    """Return the id of a post published long ago at /posts/hello (the site last changed then
    too), long enough for its page to be sent gzipped."""
    post_id = new_post(app, "Hello", slug="hello", body="First *words*.\n\n" + "More. " * 400,
                       status="published", published_at=LONG_AGO, updated_at=LONG_AGO)
    with app.app_context():
        site_state.bump(LONG_AGO)
        db.session.commit()
    return post_id


@pytest.fixture
def pg_view(pg_url):
    """Return a pg_locks reader on the test database."""
    view = LockView(pg_url)
    yield view
    view.close()


@pytest.fixture(scope="session")
def browser():
    """Return a real headless Chromium (Debian's package) driven by Playwright."""
    if not Path(CHROMIUM).exists():
        message = ("Chromium is not installed: apt-get install -y chromium-headless-shell "
                   "(make test does it as root)")
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs the browser tests: {message}")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def site(app):
    """Serve app from a thread with a post, a timer and one user per role (support.pages)."""
    found = seed_site(app)
    with serve(app) as url:
        yield {"url": url, **found}


@pytest.fixture
def fleet_db(pg_url):
    """Return a fresh migrated database for a fleet, and a pg_locks view of it."""
    url = migrated_database("soloist_fleet")
    view = LockView(url)
    yield url, view
    view.close()
    drop_database(url)


@pytest.fixture
def launch(fleet_db, tmp_path):
    """Return launch(name, workers=2, **env): a gunicorn instance on the fleet database,
    started now and stopped after the test."""
    url, _view = fleet_db
    started: list[Instance] = []

    def start(name: str, workers: int = 2, **env: str) -> Instance:
        instance = Instance(name, url, workers=workers, log_dir=tmp_path, **env).start()
        started.append(instance)
        return instance

    yield start
    stop_all(started)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Two gunicorn instances kept for the module; each test waits for them to settle first."""
    postgres_or_skip()
    fleet = Fleet(tmp_path_factory.mktemp("fleet"), LEADER_STALE_SECONDS="120")
    try:
        yield fleet
    finally:
        fleet.close()


def _topic(request) -> str:
    """Return what a test module is about: test_faults.py's "faults"."""
    return request.module.__name__.rpartition(".")[2].removeprefix("test_")


@pytest.fixture(scope="module")
def pg_server(request):
    """Return a throwaway PostgreSQL server for the module, which its tests may stop, restart
    and cut (the session's server is never touched)."""
    with throwaway_server(f"soloist-{_topic(request)}", f"the {_topic(request)} tests") as server:
        yield server


@pytest.fixture(scope="module")
def primary_and_standby(request):
    """Return [primary, standby]: a throwaway server committing synchronously, as production
    does (the throwaway's default is off), and its streaming replica, kept for the module."""
    name = f"soloist-{_topic(request)}"
    with throwaway_server(f"{name}-a", f"the {_topic(request)} tests") as primary:
        with psycopg.connect(primary.url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_commit = on")  # copied to the standby
            conn.execute("SELECT pg_reload_conf()")
        standby = primary.replica(f"{name}-b")
        try:
            yield [primary, standby]
        finally:
            standby.close()
