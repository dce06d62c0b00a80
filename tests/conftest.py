"""Fixtures: a real PostgreSQL database per test session, SQLite files per test."""

import os
from pathlib import Path

import flask_migrate
import psycopg
import pytest
import sqlalchemy as sa

from tests.cluster import ADMIN_URL, LockView, create_database, drop_database
from webapp import create_app
from webapp.config import normalise_database_url
from webapp.extensions import db
from webapp.locks import close_all_sessions


def _postgres_or_skip() -> None:
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
                "LOCK_DATABASE_URL": uri, "INSTANCE_NAME": "pytest"}
    settings.update(config)
    return create_app(settings)


def migrate(app) -> None:
    """Bring app's database to the current schema with the checked-in migrations."""
    with app.app_context():
        flask_migrate.upgrade()
        db.engine.dispose()


@pytest.fixture(autouse=True)
def _close_lock_sessions():
    """Close the per-process lock sessions a test opened through the seed API."""
    yield
    close_all_sessions()


@pytest.fixture(scope="session")
def pg_url() -> str:
    """Return the URL of a freshly migrated PostgreSQL database for this test run."""
    _postgres_or_skip()
    url = create_database()
    migrate(make_app(url))
    yield url
    drop_database(url)


@pytest.fixture
def app(pg_url):
    """Return an app on the session's PostgreSQL database, emptied before each test."""
    app = make_app(pg_url)
    with app.app_context():
        tables = ", ".join(t.name for t in db.metadata.sorted_tables)
        db.session.execute(sa.text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
        db.session.commit()
    yield app
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """Return the URL of a migrated SQLite file."""
    url = f"sqlite:///{tmp_path / 'soloist.db'}"
    migrate(make_app(url))
    return url


@pytest.fixture
def sqlite_app(sqlite_url):
    """Return an app on a migrated SQLite file."""
    app = make_app(sqlite_url)
    yield app
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def pg_view(pg_url):
    """Return a pg_locks reader on the test database."""
    view = LockView(pg_url)
    yield view
    view.close()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


@pytest.fixture(scope="session")
def browser():
    """Return a real headless Chromium (Debian's package) driven by Playwright."""
    if not Path(CHROMIUM).exists():
        message = ("Chromium is not installed: apt-get install -y chromium "
                   "(make test does it as root)")
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs the browser tests: {message}")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
