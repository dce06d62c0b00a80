"""Configuration comes from the environment and bad values stop start-up by name."""

import subprocess
import threading

import pytest

from tests.harness.cluster import BIN, ROOT, base_env
from webapp import create_app
from webapp.config import ConfigError, load_config, server_settings


def test_heroku_postgres_urls_are_normalised_to_psycopg3():
    config = load_config({"DATABASE_URL": "postgres://u:p@db.example:5432/app"})
    assert config["SQLALCHEMY_DATABASE_URI"] == "postgresql+psycopg://u:p@db.example:5432/app"
    assert config["LOCK_DATABASE_URL"] == config["SQLALCHEMY_DATABASE_URI"]


def test_lock_url_and_pool_url_can_point_elsewhere():
    config = load_config({
        "DATABASE_URL": "postgres://direct/app",
        "DATABASE_CONNECTION_POOL_URL": "postgresql://bouncer/app",
    })
    assert config["SQLALCHEMY_DATABASE_URI"] == "postgresql+psycopg://bouncer/app"
    assert config["LOCK_DATABASE_URL"] == "postgresql+psycopg://direct/app"
    config = load_config({"DATABASE_URL": "postgres://a/app", "LOCK_DATABASE_URL": "postgres://b/app"})
    assert config["LOCK_DATABASE_URL"] == "postgresql+psycopg://b/app"


def test_defaults():
    config = load_config({"INSTANCE_NAME": "web.1"})
    assert config["FOLLOWER_POLL_SECONDS"] == 1.0
    assert config["LEADER_STALE_SECONDS"] == 10.0
    assert config["SQLALCHEMY_DATABASE_URI"] is None  # the instance folder's SQLite file
    assert config["INSTANCE_NAME"] == "web.1"


def test_instance_name_falls_back_through_the_platforms():
    assert load_config({"DYNO": "web.2"})["INSTANCE_NAME"] == "web.2"
    assert load_config({"FLY_MACHINE_ID": "e82"})["INSTANCE_NAME"] == "e82"
    assert load_config({"RENDER_INSTANCE_ID": "srv-1", "DYNO": ""})["INSTANCE_NAME"] == "srv-1"


@pytest.mark.parametrize("name,value", [
    ("FOLLOWER_POLL_SECONDS", "soon"),
    ("LEADER_STALE_SECONDS", "0"),
    ("DB_POOL_SIZE", "-1"),
    ("SCHEDULER_ENABLED", "maybe"),
    ("RETRY_SECONDS", "soon"),
    ("DATABASE_URL", "mysql://x/y"),
    ("SITE_LANGUAGE", 'en"><script>'),  # what <html lang> and the feed's xml:lang declare
])
def test_a_bad_value_is_refused_naming_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        load_config({name: value})


def test_gunicorn_and_the_connection_budget_read_the_workers_by_one_rule():
    assert server_settings({"WEB_CONCURRENCY": "3"})["WEB_CONCURRENCY"] == 3
    assert load_config({"WEB_CONCURRENCY": "3"})["WEB_CONCURRENCY"] == 3
    for read in (server_settings, load_config):
        with pytest.raises(ConfigError, match="WEB_CONCURRENCY"):
            read({"WEB_CONCURRENCY": "two"})


def test_production_start_without_secret_key_is_refused(monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.delenv("FLASK_DEBUG", raising=False)
    monkeypatch.delenv("TESTING", raising=False)
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        create_app()


def test_bad_setting_stops_gunicorn_with_a_message_naming_it(tmp_path):
    env = base_env(None, LEADER_STALE_SECONDS="ten", SOLOIST_INSTANCE_PATH=str(tmp_path))
    result = subprocess.run(
        [str(BIN / "flask"), "--app", "webapp", "db", "current"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0
    assert "LEADER_STALE_SECONDS must be a number of seconds" in result.stderr


def test_create_app_starts_no_threads_and_touches_no_database():
    before = threading.active_count()
    app = create_app({"TESTING": True,
                      "SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://root@127.0.0.1:1/none",
                      "LOCK_DATABASE_URL": "postgresql+psycopg://root@127.0.0.1:1/none"})
    assert threading.active_count() == before
    assert app.url_map is not None  # built without connecting to the unreachable database
