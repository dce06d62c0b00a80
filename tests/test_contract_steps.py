"""Expand, then contract: every process records the code it runs, the status page
shows it, and a contract step (a migration that drops what older code reads) waits until
no lock session runs code older than it allows."""

import os
import shutil

import flask_migrate
import psycopg
import pytest
from flask_migrate import Migrate

from tests.cluster import ROOT, drop_database, migrated_database
from tests.support import make_app
from webapp.extensions import db
from webapp.leadership import pg
from webapp.leadership.pg import PgLockSession
from webapp.ops.release.fleet import lock_sessions
from webapp.ops.release.limits import ReleaseError
from webapp.version import code_version, schema_head

HEAD = schema_head()
EXPAND = f'''"""a fixture: posts get a summary, which the code of 9001 reads instead of their
legacy_teaser (an expand step)"""
import sqlalchemy as sa

from webapp.ops.release import steps

revision = '9001'
down_revision = '{HEAD}'


def upgrade():
    steps.add_columns('posts', sa.Column('summary', sa.Text(), nullable=True))
'''
CONTRACT = '''"""a fixture: posts.legacy_teaser goes, read by no code from 9001 on (a contract)"""
from webapp.ops.release import steps

revision = '9002'
down_revision = '9001'
contract = '9001'


def upgrade():
    steps.check_contract(contract)
    steps.drop_columns('posts', 'legacy_teaser')
'''


@pytest.fixture
def expand_contract(tmp_path):
    """A database at the newest migration, and migrations that add an expand and a contract
    step after it."""
    directory = tmp_path / "migrations"
    shutil.copytree(ROOT / "migrations", directory)
    (directory / "versions" / "9001_expand.py").write_text(EXPAND)
    (directory / "versions" / "9002_contract.py").write_text(CONTRACT)
    url = migrated_database("soloist_contract")
    with psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True) as c:
        c.execute("ALTER TABLE posts ADD COLUMN legacy_teaser text")  # what older code reads
    yield url, directory
    drop_database(url)


def app_on(url, directory):
    app = make_app(url)
    Migrate(app, db, directory=str(directory), render_as_batch=True)
    return app


def release(url, directory, *args):
    app = app_on(url, directory)
    result = app.test_cli_runner().invoke(args=["release", *args])
    with app.app_context():
        db.engine.dispose()
    return result


def database(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url.replace("postgres://", "postgresql://", 1)) as conn:
        return conn.execute(sql).fetchall()


def at(url: str) -> str:
    return database(url, "SELECT version_num FROM alembic_version")[0][0]


def columns(url: str) -> set[str]:
    return {name for name, in database(url, "SELECT column_name FROM information_schema.columns "
                                             "WHERE table_name = 'posts'")}


def test_each_lock_session_shows_the_version_it_runs(app, auth, api):
    session = PgLockSession(app.config["LOCK_DATABASE_URL"], "web.7")
    session.connect()
    try:
        with app.app_context():
            found = [s for s in lock_sessions() if s.instance == "web.7"]
        assert [(s.version, s.schema) for s in found] == [(code_version()[0], HEAD)]
        html = auth.client("viewer").get("/status/").get_data(as_text=True)
        assert f"{code_version()[0]} <span class=\"muted\">(schema {HEAD})</span>" in html
        leaders = api("GET", "/api/leaders", role="viewer").get_json()
        standbys = [s for key in leaders for s in key["standbys"]]
        assert {(s["version"], s["schema"]) for s in standbys} == {(code_version()[0], HEAD)}
    finally:
        session.close()


def test_a_contract_step_waits_until_no_lock_session_runs_older_code(expand_contract,
                                                                     monkeypatch):
    url, directory = expand_contract
    old = PgLockSession(url.replace("postgres://", "postgresql://", 1), "web.1")
    old.connect()  # its code ships migrations up to HEAD: it still reads legacy_teaser
    unknown = psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True,
                              application_name="soloist:web.2:4242:abcdefgh:abcdef")
    try:
        dry = release(url, directory, "--dry-run")
        assert dry.exit_code == 0, dry.output
        assert "9002  a fixture: posts.legacy_teaser goes, read by no code" in dry.stdout
        assert "[contract step: every process must run code of 9001 or later]" in dry.stdout
        assert "Refused now: migration 9002 is a contract step" in dry.stdout
        refused = release(url, directory)
        assert refused.exit_code == 1
        assert (f"web.1 (pid {os.getpid()}) on version {code_version()[0]}, schema {HEAD}"
                in refused.output)
        assert "web.2 (pid 4242), which recorded no version" in refused.output
        assert "Nothing was changed" in refused.output
        assert at(url) == HEAD and "legacy_teaser" in columns(url)
    finally:
        old.close()
        unknown.close()
    # the release that brought 9001 rolled out: every lock session runs its code
    monkeypatch.setattr(pg, "schema_head", lambda: "9001")
    new = PgLockSession(url.replace("postgres://", "postgresql://", 1), "web.3")
    new.connect()
    try:
        done = release(url, directory)
    finally:
        new.close()
    assert done.exit_code == 0, done.output
    assert at(url) == "9002" and "legacy_teaser" not in columns(url) and "summary" in columns(url)


def test_flask_db_upgrade_stops_at_the_contract_step_itself(expand_contract):
    url, directory = expand_contract
    old = PgLockSession(url.replace("postgres://", "postgresql://", 1), "web.1")
    old.connect()
    app = app_on(url, directory)
    try:
        with app.app_context(), pytest.raises(ReleaseError, match="is a contract step"):
            flask_migrate.upgrade(directory=str(directory))
    finally:
        with app.app_context():
            db.engine.dispose()
        old.close()
    assert at(url) == "9001" and {"summary", "legacy_teaser"} <= columns(url)  # expanded
