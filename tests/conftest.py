"""Fixtures: a real PostgreSQL database per test session, SQLite files per test, and
flaskr-style app, client, runner and auth fixtures (the helpers live in tests/harness/)."""

import os
import sqlite3
import time
from collections import Counter
from contextlib import closing, contextmanager
from functools import cache
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.harness.cluster import Instance, LockView, drop_database, migrated_database, stop_all
from tests.harness.receiver import Receiver
from tests.harness.support import (
    CHROMIUM,
    Api,
    AuthActions,
    Fleet,
    make_app,
    migrate,
    postgres_or_skip,
    seed_site,
    serve,
)
from webapp.extensions import db
from webapp.leadership import close_all_sessions


def pytest_terminal_summary(terminalreporter):
    """Print how fast this machine ran a fixed loop just now, to read the run's time against:
    the same commit's suite took 338 s on one 2-core machine and 808 s on another, whose
    loop took from 36 to 69 ms from one minute to the next (a shared host)."""
    best = min(_reference_loop() for _ in range(3))
    terminalreporter.write_line(
        f"machine speed: {REFERENCE_LOOP:,} Python additions in {best * 1000:.0f} ms "
        "(best of 3, after the run; the suite's time grows with it)")


REFERENCE_LOOP = 1_000_000


def _reference_loop() -> float:
    started, total = time.perf_counter(), 0
    for i in range(REFERENCE_LOOP):
        total += i
    return time.perf_counter() - started


# The modules that take longest (each runs whole on one xdist worker: --dist loadfile), handed
# out first so that none starts last and keeps the run waiting on one worker; fleets, browsers
# and throwaway servers alternate so that the first minutes are not four fleets at once.
# Then the modules that mostly wait (on a fleet, a timeout, a poll): while they wait, the
# other workers' tests use the CPU, and none of them is left at the end, when nothing else
# runs beside it (the last 15 s of a run were a test waiting on an idle machine). The rest
# follow, most tests first.
RUN_FIRST = ["test_failover", "test_every_page_browser", "test_candidates", "test_editor_browser",
             "test_cluster", "test_hostile_forms", "test_faults", "test_chaos",
             "test_every_page_on_a_phone", "test_partition", "test_api_contract",
             "test_pooler_fleet", "test_authz_matrix", "test_edge_fleet", "test_previous_release",
             "test_deploy_report", "test_webhook_senders", "test_ops_alerts_fleet", "test_freezes",
             "test_status_browser", "test_calendar", "test_metrics_fleet", "test_hung_plugins",
             "test_procfile_on_heroku", "test_scheduler_thread", "test_passkeys_browser",
             "test_frozen_process", "test_long_ticks", "test_containers", "test_silent_holders",
             "test_deliveries_wait_for_a_replica", "test_handover_sends", "test_site_browser",
             "test_keyboard_browser",
             "test_media_fleet", "test_media_browser", "test_status_phone"]


def pytest_collection_modifyitems(items):
    """Order the modules as RUN_FIRST says (make test runs xdist with --no-loadscope-reorder)."""
    module = {item: item.module.__name__.rpartition(".")[2] for item in items}
    counts = Counter(module.values())

    def rank(item) -> tuple[int, int, str]:
        name = module[item]
        first = RUN_FIRST.index(name) if name in RUN_FIRST else len(RUN_FIRST)
        return first, -counts[name], name

    items.sort(key=rank)  # stable: each module keeps its own tests' order


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the tail of every gunicorn log a failed test left in its tmp_path."""
    report = yield
    tmp = item.funcargs.get("tmp_path") if hasattr(item, "funcargs") else None
    if report.failed and tmp is not None:
        for log in sorted(Path(tmp).rglob("soloist-*.log")):
            tail = log.read_text(errors="replace").splitlines()[-60:]
            report.sections.append((f"gunicorn log {log.name}", "\n".join(tail)))
    return report


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


# DELETE, children first, then every sequence back to 1: what TRUNCATE ... RESTART IDENTITY
# did, at a tenth of its cost (28 ms against 143 ms a test: TRUNCATE makes new files)
RESTART_SEQUENCES = sa.text(
    "SELECT setval(c.oid::regclass, 1, false) FROM pg_class c "
    "WHERE c.relkind = 'S' AND c.relnamespace = 'public'::regnamespace")


@cache
def _children_first() -> tuple[list[sa.Table], sa.TextClause]:
    """Return the app's tables, children first, and the query naming those with a row."""
    tables = list(reversed(db.metadata.sorted_tables))
    filled = " UNION ALL ".join(f"SELECT {i} WHERE EXISTS (SELECT 1 FROM \"{table.name}\")"
                                for i, table in enumerate(tables))
    return tables, sa.text(filled)


def empty_every_table() -> None:
    """Empty every table of the app's database and restart its ids, in one transaction.

    Only the tables that have a row are emptied (a test fills a few of the 29), found in one
    statement: emptying an empty database takes 7.6 ms (1.4 ms of this process's CPU)
    against 11.2 ms (4.0 ms) for a DELETE on each table, connection included.
    """
    tables, filled = _children_first()
    for i in sorted(db.session.scalars(filled)):
        db.session.execute(tables[i].delete())
    db.session.execute(RESTART_SEQUENCES)
    db.session.commit()


@contextmanager
def emptied(app):
    """Empty app's tables for a test, then close the connections the test left.

    Closed, not kept for the next test: a test may leave session settings (a SET), a
    revalidation connection or an advisory lock on them.
    """
    with app.app_context():
        empty_every_table()
    yield app
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


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
def pg_view(pg_url):
    """Return a pg_locks reader on the test database."""
    view = LockView(pg_url)
    yield view
    view.close()


CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


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
