"""Production-shaped: the Procfile's commands with Heroku's environment, then a SIGTERM."""

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.cluster import (
    BIN,
    PLUGINS_KEY,
    PUBLISH_KEY,
    ROOT,
    LockView,
    base_env,
    create_database,
    drop_database,
    free_port,
    wait_for,
)
from webapp.leadership.pg import PgLockSession
from webapp.ops.budget import check_connection_budget, per_process

pytestmark = pytest.mark.slow

GRACEFUL_TIMEOUT = 25


def procfile() -> dict[str, str]:
    """Return the Procfile's process types and commands."""
    lines = (ROOT / "Procfile").read_text().splitlines()
    return dict(line.split(":", 1) for line in lines if line.strip())


def heroku_env(url: str, dyno: str) -> dict:
    """Return the environment Heroku gives a dyno: PORT, DYNO, a postgres:// DATABASE_URL."""
    env = base_env(url, PORT=free_port(), DYNO=dyno)
    env.pop("INSTANCE_NAME", None)
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    assert env["DATABASE_URL"].startswith("postgres://")
    return env


def start_web(env: dict, log_path) -> subprocess.Popen:
    with open(log_path, "w") as log:
        return subprocess.Popen(["bash", "-c", "exec " + procfile()["web"].strip()], cwd=ROOT,
                                env=env, stdout=log, stderr=subprocess.STDOUT)


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture
def heroku_db():
    url = create_database("soloist_deploy")
    yield url
    drop_database(url)


def test_release_then_web_serve_and_hand_over_on_sigterm(heroku_db, tmp_path):
    release_env = {**heroku_env(heroku_db, "release.1"), "HEROKU_RELEASE_VERSION": "v12"}
    release_env.pop("SOURCE_VERSION", None)
    release = subprocess.run(["bash", "-c", procfile()["release"]], cwd=ROOT, env=release_env,
                             capture_output=True, text=True, timeout=120)
    assert release.returncode == 0, release.stderr
    view = LockView(heroku_db)
    # the deploy report's first record: the release phase names the version it released
    assert view.query("SELECT version, source FROM deploys") == [
        ("v12", "HEROKU_RELEASE_VERSION")]
    first_env, second_env = heroku_env(heroku_db, "web.1"), heroku_env(heroku_db, "web.2")
    first = start_web(first_env, tmp_path / "web1.log")
    second = None
    try:
        wait_for(lambda: answers(first_env["PORT"]), 30, "web.1 to serve")
        wait_for(lambda: set(view.holders()) == {PUBLISH_KEY, PLUGINS_KEY}, 30, "a leader")
        assert all(n.startswith("soloist:web.1:") for n in view.holders().values())
        second = start_web(second_env, tmp_path / "web2.log")
        wait_for(lambda: len(view.lock_sessions()) == 2, 30, "web.2's candidate to stand by")

        started = time.monotonic()
        first.send_signal(signal.SIGTERM)
        wait_for(lambda: all((view.holder(k) or "").startswith("soloist:web.2:")
                             for k in (PUBLISH_KEY, PLUGINS_KEY)), 10,
                 "web.2 to lead after web.1's SIGTERM")
        assert first.wait(GRACEFUL_TIMEOUT) == 0
        assert time.monotonic() - started < GRACEFUL_TIMEOUT
        released = view.query("SELECT holder FROM leader_events WHERE kind = 'released'")
        assert len(released) == 2 and all(h.startswith("soloist:web.1:") for h, in released)
        assert answers(second_env["PORT"])
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        view.close()
    lines = [ln for ln in (tmp_path / "web1.log").read_text().splitlines() if ln.strip()]
    assert lines and all("[web.1]" in line for line in lines)


def test_connection_budget_warns_when_the_pool_cannot_fit(app, caplog):
    locks = PgLockSession(app.config["LOCK_DATABASE_URL"], "budget")
    locks.connect()
    try:
        assert check_connection_budget(locks, pool_size=3, max_overflow=1) is None
        message = check_connection_budget(locks, pool_size=5000, max_overflow=0)
        assert message and "connections are free" in message
        assert "connection budget" in caplog.text
        # lock, scheduler, the 304s' own connection (webapp.revalidation), pool, overflow
        assert "one more worker needs up to 5003" in message
        assert "needs up to 5002" in check_connection_budget(locks, 5000, 0, revalidation=0)
    finally:
        locks.close()


# Heroku Postgres plans' max_connections (devcenter.heroku.com/articles/heroku-postgres-plans)
PLAN_CONNECTIONS = {"essential-0": 20, "essential-1": 20, "essential-2": 40}


def test_the_heroku_buttons_fleet_fits_its_database_plan():
    app_json = json.loads((Path(__file__).resolve().parents[1] / "app.json").read_text())
    env = {name: spec.get("value") for name, spec in app_json["env"].items()}
    plan = app_json["addons"][0]["plan"].split(":")[1]
    workers = app_json["formation"]["web"]["quantity"] * int(env["WEB_CONCURRENCY"])
    revalidation = int(env.get("DB_REVALIDATION_CONNECTION", "true") == "true")
    peak = workers * per_process(int(env["DB_POOL_SIZE"]), int(env["DB_MAX_OVERFLOW"]),
                                 revalidation)
    assert peak <= PLAN_CONNECTIONS[plan], f"{peak} connections at peak on {plan}"
