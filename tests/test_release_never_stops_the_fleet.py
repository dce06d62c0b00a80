"""A release's migrations wait for a gap in the running fleet's work; the fleet
never waits long behind them (two real PostgreSQL sessions stand in for the old fleet)."""

import contextlib
import json
import re
import threading
import time

import flask_migrate
import psycopg
import pytest

from tests.cluster import create_database, drop_database, wait_for
from tests.support import make_app, postgres_or_skip
from webapp.extensions import bind_migrations, db
from webapp.ops.release.fleet import revision_order
from webapp.ops.release.report import Recorder

LOCK_TIMEOUT = 0.3
FLEET_TIMEOUT = 3.0  # the old fleet's statements give up here (its own statement_timeout)

WAITING_ON = """
SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass
"""


def fleet_session(url: str) -> psycopg.Connection:
    """Return a connection of the old fleet, whose statements end after FLEET_TIMEOUT."""
    return psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True,
                           options=f"-c statement_timeout={int(FLEET_TIMEOUT * 1000)}")


def timed(conn: psycopg.Connection, sql: str, params: tuple = ()) -> float:
    """Run sql; return how long it took (FLEET_TIMEOUT and more: it gave up waiting)."""
    started = time.monotonic()
    with contextlib.suppress(psycopg.errors.QueryCanceled):
        conn.execute(sql, params)
    return time.monotonic() - started


class Release(threading.Thread):
    """`flask db upgrade` to the newest revision, as the release phase runs it."""

    def __init__(self, url: str, **config) -> None:
        super().__init__(daemon=True)
        self.app = make_app(url, **config)
        self.error: BaseException | None = None

    def run(self) -> None:
        bind_migrations(self.app)
        try:
            with self.app.app_context():
                flask_migrate.upgrade()
                db.engine.dispose()
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            self.error = exc


def upgrade_to(url: str, revision: str) -> None:
    app = make_app(url)
    bind_migrations(app)
    with app.app_context():
        flask_migrate.upgrade(revision=revision)
        db.engine.dispose()


@pytest.fixture
def behind():
    """A database at migration 0016 (a release behind), with a user and two posts."""
    postgres_or_skip()
    url = create_database("soloist_behind")
    upgrade_to(url, "0016")
    with fleet_session(url) as conn:
        conn.execute("INSERT INTO users (email, password_hash, role, active, created_at) "
                     "VALUES ('ed@example.com', '', 'editor', true, now())")
        conn.execute("INSERT INTO posts (title, slug, body, status, version, created_at, "
                     "updated_at) SELECT 'p' || i, 'p' || i, '', 'draft', 1, now(), now() "
                     "FROM generate_series(1, 2) i")
    yield url
    drop_database(url)


def test_a_release_waiting_for_one_table_keeps_no_other_locked_and_no_writer_long(behind):
    writer, reader, publisher = (fleet_session(behind) for _ in range(3))
    # an old-fleet transaction writing posts stays open: 0021's foreign key to posts waits
    writer.execute("BEGIN")
    writer.execute("UPDATE posts SET title = title WHERE slug = 'p1'")
    release = Release(behind, MIGRATION_LOCK_TIMEOUT_SECONDS=LOCK_TIMEOUT)
    release.start()
    try:
        wait_for(lambda: writer.execute(WAITING_ON, ("posts",)).fetchone()[0], 30,
                 "the release to wait for a lock on posts")
        # every signed-in request reads users, which 0017 changed before: free again
        assert timed(reader, "SELECT count(*) FROM users") < 0.5
        # the publish leader's UPDATE of another post waits at most one lock_timeout
        assert timed(publisher, "UPDATE posts SET title = title WHERE slug = 'p2'") < (
            LOCK_TIMEOUT + 0.5)
    finally:
        writer.execute("ROLLBACK")
        for conn in (writer, reader, publisher):
            conn.close()
        release.join(60)
    assert release.error is None, release.error
    with fleet_session(behind) as conn:
        assert conn.execute("SELECT count(*) FROM preview_links").fetchone() == (0,)


def test_a_column_added_while_a_request_reads_users_gives_way_to_every_sign_in(behind):
    reading = fleet_session(behind)
    # a request of the old fleet in the middle of its transaction, having read users
    reading.execute("BEGIN")
    reading.execute("SELECT count(*) FROM users")
    release = Release(behind, MIGRATION_LOCK_TIMEOUT_SECONDS=LOCK_TIMEOUT)
    release.start()
    signing_in = fleet_session(behind)
    try:
        wait_for(lambda: reading.execute(WAITING_ON, ("users",)).fetchone()[0], 30,
                 "0017 to wait for users")
        # every sign-in and API token lookup reads users: they wait one lock_timeout at most
        for _ in range(3):
            assert timed(signing_in, "SELECT email FROM users") < LOCK_TIMEOUT + 0.5
    finally:
        reading.execute("COMMIT")
        signing_in.close()
        release.join(60)
        reading.close()
    assert release.error is None, release.error
    assert revision(behind) == revision_order()[-1]


def released(url: str, *args: str, **config):
    """Run `flask --app webapp release ARGS` in this process against url; return the result."""
    app = make_app(url, **config)
    result = app.test_cli_runner().invoke(args=["release", *args])
    with app.app_context():
        db.session.remove()
        db.engine.dispose()
    return result


def revision(url: str) -> str:
    with fleet_session(url) as conn:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def test_the_dry_run_prints_each_step_and_its_locks_and_changes_nothing(behind):
    result = released(behind, "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("The database is at 0016: ")
    # 0017: users' columns alone, in a moment's lock every request would wait for
    assert "ALTER TABLE users ADD COLUMN IF NOT EXISTS totp_secret" in out
    assert "ACCESS EXCLUSIVE on users: blocks reads and writes; waits for it at most" in out
    # 0022: the copy of every post, in batches outside the transaction, blocking nothing
    copy = out[out.index("-- backfill: posts in batches of 1000 by id"):]
    assert copy.splitlines()[2].strip().startswith(
        "ROW EXCLUSIVE on post_revisions, new: nobody waits; ACCESS SHARE on posts: blocks "
        "neither reads nor writes")
    assert revision(behind) == "0016"


def test_the_release_reports_each_migration_and_the_deploy_report_its_cost(behind):
    writer = fleet_session(behind)
    writer.execute("BEGIN")
    writer.execute("UPDATE posts SET title = title WHERE slug = 'p1'")  # until 0021 gave way
    gave_way = threading.Thread(target=lambda: (
        wait_for(lambda: writer.execute(WAITING_ON, ("posts",)).fetchone()[0], 30,
                 "0021 to wait for posts"),
        wait_for(lambda: not writer.execute(WAITING_ON, ("posts",)).fetchone()[0], 30,
                 "0021 to give way"),
        writer.execute("ROLLBACK")))
    gave_way.start()
    try:
        result = released(behind, "--version", "v43", MIGRATION_LOCK_TIMEOUT_SECONDS=0.2)
    finally:
        gave_way.join(30)
        writer.close()
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    pending = revision_order()[revision_order().index("0016") + 1:]
    assert re.match(rf"Migrated in \d+\.\d\d s: {len(pending)} migration\(s\); the longest "
                    r"wait seen behind them \d\.\d\d s; [1-9]\d* gave way to the fleet",
                    lines[0]), lines[0]
    report = "\n".join(lines)
    assert re.search(r"  0017 +\d+\.\d\d s  TOTP two-factor sign-in.*\n +ACCESS EXCLUSIVE on "
                     r"users for \d\.\d{3} s \(blocks reads and writes\)", report)
    assert re.search(r"  0021 .*\n +gave way \d+ time\(s\): \d+\.\d\d s waiting for a gap\n"
                     r" +SHARE ROW EXCLUSIVE on ", report)
    with fleet_session(behind) as conn:
        seconds, wait, steps = conn.execute(
            "SELECT release_seconds, release_wait_seconds, release_report FROM deploys "
            "WHERE version = 'v43'").fetchone()
    assert 0 < seconds < 60 and 0 <= wait < 1
    assert [s["revision"] for s in json.loads(steps)["steps"]] == pending


def test_the_report_measures_the_longest_wait_behind_a_migrations_locks(app, pg_url):
    recorder = Recorder(lock_timeout=0.3)
    fleet = fleet_session(pg_url)
    with app.app_context(), db.engine.connect() as migration:
        recorder.attach(migration)
        migration.exec_driver_sql("LOCK TABLE posts IN ACCESS EXCLUSIVE MODE")
        reading = threading.Thread(target=timed, args=(fleet, "SELECT count(*) FROM posts"))
        reading.start()
        wait_for(lambda: app_waits(pg_url) > 0.3, 10, "a reader of posts to wait 0.3 s")
        migration.commit()
        reading.join(10)
    fleet.close()
    assert recorder.step.behind > 0.3
    assert [(lock.table, lock.mode) for lock in recorder.step.locks] == [
        ("posts", "ACCESS EXCLUSIVE")]


def app_waits(url: str) -> float:
    """Return how long the longest statement waiting for a lock has waited so far."""
    with fleet_session(url) as conn:
        return conn.execute(
            "SELECT coalesce(max(extract(epoch FROM clock_timestamp() - query_start)), 0) "
            "FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()[0]


def test_behind_a_pooler_the_migrations_run_on_the_direct_url(behind):
    # the web pool's URL leads nowhere: a release through it would fail, and a transaction
    # pooler would hand its lock_timeout to the fleet's transactions
    direct = make_app(behind).config["SQLALCHEMY_DATABASE_URI"]
    release = Release(behind, SQLALCHEMY_DATABASE_URI="postgresql+psycopg://root@127.0.0.1:9/x",
                      LOCK_DATABASE_URL=direct, DB_WEB_VIA_POOLER=True)
    release.run()
    assert release.error is None, release.error
    assert revision(behind) == revision_order()[-1]


def test_on_sqlite_the_release_plans_runs_and_reports_every_migration_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'soloist.db'}"
    dry = released(url, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.startswith(f"The database is at no migration (empty): "
                                 f"{len(revision_order())} migration(s) to run.")
    assert "\nSQLite: each migration runs once, in one transaction" in dry.stdout
    done = released(url, "--version", "local")
    assert done.exit_code == 0, done.output
    assert "0 gave way to the fleet" in done.stdout
    assert "Migrated and recorded deploy local (from given)." in done.stdout
