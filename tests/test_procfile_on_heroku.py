"""Production-shaped: the Procfile's commands with Heroku's environment, then a SIGTERM."""

import importlib
import json
import queue
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.harness.cluster import (
    BIN,
    PLUGINS_KEY,
    PUBLISH_KEY,
    ROOT,
    LockView,
    base_env,
    create_database,
    drop_database,
    free_port,
    procfile,
    wait_for,
)
from webapp.leadership.pg import PgLockSession
from webapp.ops.budget import Fleet, check_connection_budget

pytestmark = pytest.mark.slow

GRACEFUL_TIMEOUT = 25


def heroku_env(url: str, dyno: str) -> dict:
    """Return the environment Heroku gives a dyno: PORT, DYNO, a postgres:// DATABASE_URL."""
    env = base_env(url, PORT=free_port(), DYNO=dyno)
    env.pop("INSTANCE_NAME", None)
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    assert env["DATABASE_URL"].startswith("postgres://")
    return env


def start_web(env: dict, log_path) -> subprocess.Popen:
    with open(log_path, "w") as log:
        return subprocess.Popen(["bash", "-c", "exec " + procfile()["web"]], cwd=ROOT,
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


def test_connection_budget_warns_when_the_fleet_or_its_next_instance_cannot_fit(app, caplog):
    locks = PgLockSession(app.config["LOCK_DATABASE_URL"], "budget")
    locks.connect()
    try:
        assert check_connection_budget(locks, app.config) is None  # one instance of 2 x 5
        huge = {**app.config, "DB_POOL_SIZE": 5000}
        message = check_connection_budget(locks, huge)
        shape = re.search(r"(\d+) instances x 2 workers need up to (\d+) connections", message)
        assert shape and int(shape[2]) == Fleet(
            int(shape[1]), 2, 5000, app.config["DB_MAX_OVERFLOW"],
            int(app.config["DB_REVALIDATION_CONNECTION"])).peak
        assert "connection budget" in caplog.text and "PgBouncer" in caplog.text
        # behind a pooler the pools are the pooler's: one instance fits, whatever its pool
        assert check_connection_budget(locks, {**huge, "DB_WEB_VIA_POOLER": True}) is None
    finally:
        locks.close()


def test_the_fleet_formula_counts_candidates_and_leaders_not_workers():
    assert Fleet(25, 4, 3, 1, 1).peak == 25 * (1 + 4 * 5) + 2 + 2  # + the plugin pool
    assert Fleet(25, 4, 3, 1, 1, pooler_pool=20).peak == 25 + 2 + 20
    assert Fleet(25, 4, 3, 1, 1, pooler_pool=20).idle == 27
    assert Fleet(1, 4).scheduler == 1 and Fleet(10, 4).scheduler == 2
    assert Fleet(3, 2, 2, 0, 0).most_instances(20) == 3  # the Heroku button, essential-0


# Heroku Postgres plans' max_connections (devcenter.heroku.com/articles/heroku-postgres-plans)
PLAN_CONNECTIONS = {"essential-0": 20, "essential-1": 20, "essential-2": 40}


def test_the_heroku_buttons_fleet_fits_its_database_plan():
    app_json = json.loads((Path(__file__).resolve().parents[1] / "app.json").read_text())
    env = {name: spec.get("value") for name, spec in app_json["env"].items()}
    plan = app_json["addons"][0]["plan"].split(":")[1]
    dynos = app_json["formation"]["web"]["quantity"] + 1  # heroku ps:scale web=3 fits too
    revalidation = int(env.get("DB_REVALIDATION_CONNECTION", "true") == "true")
    fleet = Fleet(dynos, int(env["WEB_CONCURRENCY"]), int(env["DB_POOL_SIZE"]),
                  int(env["DB_MAX_OVERFLOW"]), revalidation,
                  plugin_pool=int(env["PLUGIN_DB_POOL_SIZE"]))
    assert fleet.peak <= PLAN_CONNECTIONS[plan], f"{fleet.peak} connections at peak on {plan}"


def test_the_budget_command_prints_a_fleets_needs_with_and_without_a_pooler(app):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["budget", "--instances", "25", "--workers", "4",
                                 "--pool-size", "3", "--max-overflow", "1", "--revalidation"])
    assert result.exit_code == 0, result.output
    peak = next(line for line in result.output.splitlines() if line.startswith("at peak"))
    assert peak.split()[-2:] == ["529", "47"]
    assert "no (+432)" in result.output and "most instances of this shape that fit" in result.output
    heroku = runner.invoke(args=["budget", "--instances", "3", "--workers", "2", "--pool-size",
                                 "2", "--max-overflow", "0", "--no-revalidation",
                                 "--max-connections", "20", "--reserved", "0"])
    assert "fits max_connections 20 - 0 reserved = 20?" in heroku.output
    assert next(line for line in heroku.output.splitlines()
                if line.startswith("at peak")).split()[-2:] == ["19", "25"]
    refused = runner.invoke(args=["budget", "--instances", "0"])
    assert refused.exit_code == 2 and "--instances" in refused.output


def test_the_status_page_warns_before_the_next_instance_would_not_fit():
    from webapp.db import parse_identity_role
    from webapp.ops.budget import Usage, scale_up_warning

    assert parse_identity_role("soloist:web.1:4101:abcdef") == ("lock", "web.1")
    assert parse_identity_role("soloist-sched:web.1:4101:abcdef") == ("sched", "web.1")
    assert parse_identity_role("psql") is None and parse_identity_role("soloist:x") is None
    shape = Fleet(2, 2, 2, 0, 0)  # the Heroku button's: 5 a dyno at peak, 2 + 2 leaders'
    two = Usage(20, 0, {"web.1": {"lock": 1, "sched": 1}, "web.2": {"lock": 1}}, 0)
    assert scale_up_warning(two, shape) is None  # a third dyno: 3 x 5 + 4 = 19 of 20
    three = Usage(20, 0, {f"web.{i}": {"lock": 1} for i in (1, 2, 3)}, 0)
    warning = scale_up_warning(three, shape)
    assert warning and "4 instances x 2 workers need up to 24 connections" in warning
    assert scale_up_warning(three, Fleet(3, 2, 2, 0, 0, pooler_pool=10)) is None


@pytest.fixture
def gunicorn_conf(monkeypatch):
    """Return webapp/gunicorn_conf.py as gunicorn reads it (no .env), restoring the stop
    signals' handlers its post_fork installs in this process."""
    monkeypatch.setenv("PYTHON_DOTENV_DISABLED", "1")
    conf = importlib.import_module("webapp.gunicorn_conf")
    saved = {signum: signal.getsignal(signum) for signum in conf.STOP_SIGNALS}
    yield conf
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize(("queued", "stops"), [
    ((signal.SIGCHLD, signal.SIGTERM), True), ((signal.SIGQUIT,), True),
    ((signal.SIGCHLD, signal.SIGHUP), False)])
def test_a_stop_signal_a_worker_got_before_its_own_handlers_still_stops_it(
        gunicorn_conf, queued, stops):
    """Between its fork and post_fork a worker runs the master's handlers, which put a signal
    on the worker's copy of the master's queue: a SIGTERM there means the instance is
    stopping, and the worker must not start a scheduler (it would run until the SIGKILL)."""
    server, worker = SimpleNamespace(SIG_QUEUE=queue.SimpleQueue()), SimpleNamespace(alive=True)
    for signum in queued:
        server.SIG_QUEUE.put_nowait(signum)
    gunicorn_conf.post_fork(server, worker)
    assert worker.alive is not stops
