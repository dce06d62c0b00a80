"""Every connection is bounded on both sides, reaches the servers its URL names, and none
stays on a read-only server; an eviction ends exactly the stale session's connections."""

import subprocess
import time

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import BIN, ROOT, base_env, create_database, drop_database, free_port
from tests.harness.support import make_app
from webapp.config import ConfigError, load_config, normalise_database_url
from webapp.db import conninfo, identity, pg_connect_args
from webapp.extensions import db
from webapp.leadership.base import LockUnavailable
from webapp.leadership.keys import PUBLISH
from webapp.leadership.pg import PgLockSession
from webapp.scheduling import engines
from webapp.site.revalidation import Reader

SERVER_SIDE = ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count",
               "tcp_user_timeout", "client_connection_check_interval", "statement_timeout")


def _server_settings(cursor) -> dict[str, str]:
    return {name: cursor.execute(f"SHOW {name}").fetchone()[0] for name in SERVER_SIDE}


def _client(conn: psycopg.Connection) -> dict[str, str]:
    return conn.info.get_parameters()


def _engine_connection(engine: sa.Engine) -> psycopg.Connection:
    raw = engine.raw_connection()
    return raw, raw.driver_connection


def test_every_connection_of_the_app_bounds_its_socket_waits_on_both_sides(pg_url):
    settings = {"LEADER_STALE_SECONDS": 20.0}
    app = make_app(pg_url, **settings)
    own = engines.build(app.config)  # the scheduler's
    reader = Reader(app.config)
    locks = PgLockSession(app.config["LOCK_DATABASE_URL"], "bounds",
                          pg_connect_args(app.config, "web")["options"],
                          {k: v for k, v in pg_connect_args(app.config, "web").items()
                           if k not in ("options", "application_name")})
    with app.app_context():
        web_raw, web = _engine_connection(db.engine)
    sched_raw, tick = _engine_connection(own.ticks)
    plugin_raw, plugin = _engine_connection(own.plugins)
    site = reader._connected(None)
    locks.connect()
    try:
        for conn in (web, tick, plugin, site, locks.conn):
            # a vanished server is noticed by the client in half of LEADER_STALE_SECONDS...
            assert _client(conn)["tcp_user_timeout"] == "10000"
            assert _client(conn)["keepalives_idle"] == "4"
            # ...and a vanished client by the server
            assert _server_settings(conn.cursor()) == {
                "tcp_keepalives_idle": "4", "tcp_keepalives_interval": "2",
                "tcp_keepalives_count": "3", "tcp_user_timeout": "10000",
                "client_connection_check_interval": "2s", "statement_timeout": "10s"}
    finally:
        for raw in (web_raw, sched_raw, plugin_raw):
            raw.close()
        site.close()
        locks.close()
        own.close()
        with app.app_context():
            db.engine.dispose()


def test_behind_a_pooler_web_connections_keep_client_keepalives_and_send_no_options():
    config = load_config({"DATABASE_URL": "postgres://direct/app", "INSTANCE_NAME": "web.1",
                          "DATABASE_CONNECTION_POOL_URL": "postgres://bouncer/app"})
    for role in ("web", "site"):
        args = pg_connect_args(config, role)
        assert "options" not in args and args["prepare_threshold"] is None
        assert args["keepalives"] == 1 and args["tcp_user_timeout"] == 5000
    assert "tcp_keepalives_idle=2" in pg_connect_args(config, "sched")["options"]


def test_the_scheduler_ticks_connect_directly_when_a_pool_url_is_set(pg_url):
    dead = f"postgres://root@127.0.0.1:{free_port()}/nowhere"  # stands in for the pooler
    app = make_app(dead, LOCK_DATABASE_URL=normalise_database_url(pg_url),
                   DB_WEB_VIA_POOLER=True)
    own = engines.build(app.config)
    with engines.working_on(app, own.ticks):  # as a tick runs
        assert db.session.scalar(sa.text("SELECT current_setting('tcp_keepalives_idle')")) == "2"
        name = db.session.scalar(sa.text("SELECT current_setting('application_name')"))
    own.close()
    assert name.startswith("soloist-sched:pytest:")


@pytest.mark.parametrize("form", ["libpq", "sqlalchemy"])
def test_a_multi_host_url_reaches_the_server_that_answers_for_every_connection(pg_url, form):
    dead, rest = free_port(), pg_url.split("@", 1)[1]
    name = rest.rsplit("/", 1)[1]
    url = (f"postgres://root@127.0.0.1:{dead},127.0.0.1:5432/{name}" if form == "libpq" else
           f"postgres://root@/{name}?host=127.0.0.1:{dead}&host=127.0.0.1:5432")
    config = load_config({"DATABASE_URL": url})
    assert "target_session_attrs=read-write" in config["SQLALCHEMY_DATABASE_URI"]
    app = make_app(url)
    with app.app_context():
        assert db.session.scalar(sa.text("SELECT current_database()")) == name
        db.session.remove()
        db.engine.dispose()
    assert conninfo(app.config["LOCK_DATABASE_URL"]).count("127.0.0.1") == 2
    locks = PgLockSession(app.config["LOCK_DATABASE_URL"], "multi")
    locks.connect()
    try:
        assert locks.try_lock(PUBLISH.value)
    finally:
        locks.close()
    site = Reader(app.config)._connected(None)
    site.close()


@pytest.mark.parametrize("url", ["postgres://u@h1:5432,h2:x/db", "postgres://u@h1:5432:9/db",
                                 "postgres://u@h1,,h2/db"])
def test_a_malformed_database_url_is_refused_naming_the_variable(url):
    with pytest.raises(ConfigError, match="DATABASE_URL") as refused:
        load_config({"DATABASE_URL": url})
    assert "5432" not in str(refused.value)  # the URL itself (and a password) is not echoed


def test_the_release_command_names_a_malformed_url_instead_of_a_traceback():
    env = base_env("postgres://u:secret@h1:5432,h2:nope/db")
    done = subprocess.run([str(BIN / "flask"), "--app", "webapp", "db", "upgrade"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "DATABASE_URL is not a PostgreSQL URL" in done.stderr
    assert "invalid literal for int()" not in done.stderr and "secret" not in done.stderr


@pytest.fixture
def read_only_url():
    """A database whose sessions are read-only, as on a standby."""
    url = create_database("soloist_ro")
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    yield url
    drop_database(url)


def test_no_connection_stays_on_a_read_only_server(read_only_url):
    app = make_app(read_only_url)
    locks = PgLockSession(app.config["LOCK_DATABASE_URL"], "ro")
    with pytest.raises(LockUnavailable, match="read-only"):
        locks.connect()
    assert not locks.connected
    with pytest.raises(psycopg.OperationalError, match="standby"):
        Reader(app.config)._connected(None)
    client = app.test_client()
    started = time.monotonic()
    answer = client.get("/api/posts", headers={"Authorization": "Bearer sol_anything"})
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5"
    assert answer.get_json()["error"] == "The database cannot be reached right now."
    page = client.get("/")
    assert page.status_code == 503 and "cannot be reached" in page.get_data(as_text=True)
    assert time.monotonic() - started < 10
    with app.app_context():
        db.engine.dispose()


def test_an_unreachable_database_answers_503_within_the_stale_bound():
    app = make_app(f"postgres://root@127.0.0.1:{free_port()}/gone", LEADER_STALE_SECONDS=4.0)
    started = time.monotonic()
    answer = app.test_client().get("/")
    assert answer.status_code == 503 and answer.headers["Cache-Control"] == "no-store"
    assert time.monotonic() - started < 4
    with app.app_context():
        db.engine.dispose()


def _named(url: str, application_name: str, **extra) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True, application_name=application_name, **extra)


def test_eviction_ends_exactly_the_stale_sessions_connections_wherever_they_come_from(
        pg_url, pg_view):
    url = pg_url.replace("postgres://", "postgresql://")
    stale, fresh = "aaaaaaaa", "bbbbbbbb"
    holder = _named(url, identity("host", pid=77, nonce=stale))
    holder.execute("SELECT pg_advisory_lock(%s)", (PUBLISH.value,))
    by_socket = _named(url.replace("127.0.0.1", "%2Fvar%2Frun%2Fpostgresql"),
                       identity("host", pid=77, role="web", nonce=stale))
    healthy = _named(url, identity("host", pid=77, role="web", nonce=fresh))
    other = PgLockSession(pg_url.replace("postgres://", "postgresql+psycopg://"), "evictor")
    other.connect()
    try:
        evicted = other.evict_stale(PUBLISH.value, 0.0, [PUBLISH.value], "test")
        assert evicted is not None and evicted[0] == identity("host", pid=77, nonce=stale)
        names = {r[0] for r in pg_view.query(
            "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE %s "
            "AND datname = current_database()", ("%:host:77:%",))}
        assert names == {identity("host", pid=77, role="web", nonce=fresh)}
    finally:
        for conn in (holder, by_socket, healthy):
            conn.close()
        other.close()


def test_a_multi_host_url_without_a_database_keeps_its_query():
    config = load_config({"DATABASE_URL": "postgres://u@h1,h2?sslmode=require"})
    info = conninfo(config["SQLALCHEMY_DATABASE_URI"])
    assert "sslmode=require" in info and "host=h1,h2" in info


def test_a_bad_statement_or_a_timeout_is_a_500_not_a_503(pg_url, caplog):
    app = make_app(pg_url, LEADER_STALE_SECONDS=0.4)  # statements end after 0.2 s

    @app.get("/_probe/<what>")
    def probe(what):
        db.session.execute(sa.text("SELECT pg_sleep(2)" if what == "slow" else
                                   "SELECT no_such_column"))
        return "no"

    client = app.test_client()
    for what in ("slow", "bad"):
        answer = client.get(f"/_probe/{what}")
        assert answer.status_code == 500, what  # a programming or load error, logged whole
        assert f"unhandled error on GET /_probe/{what}" in caplog.text
    with app.app_context():
        db.engine.dispose()


def test_pool_connections_made_before_the_nonce_was_renewed_are_replaced(pg_url, pg_view):
    from webapp.db import current_nonce, renew_nonce

    app = make_app(pg_url)
    with app.app_context():
        db.session.execute(sa.text("SELECT 1"))
        db.session.remove()  # back in the pool, under the first nonce
        before = current_nonce()
        renew_nonce()  # the lock session came back after a loss
        name = db.session.scalar(sa.text("SELECT current_setting('application_name')"))
        db.session.remove()
        db.engine.dispose()
    assert name.endswith(":" + current_nonce()) and not name.endswith(before)
