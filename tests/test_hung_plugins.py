"""Plugin code that never returns is timed out, retried, counted, and finally paused."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.support import AuthActions, make_app
from webapp.extensions import db
from webapp.models import HookDelivery, OutboxEvent, Post
from webapp.plugins import Plugin, registry
from webapp.scheduling import plugin_tick, workers

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)
RELEASE = threading.Event()
CALLS: list[int] = []

hanging = Plugin("hanging", "Hanging", "Its publish hook never returns.")


@hanging.hook("on_publish")
def never_returns(event) -> None:
    CALLS.append(event.id)
    RELEASE.wait(60)  # as a hook stuck on a dead socket would


@pytest.fixture
def hung_app(app, pg_url):
    RELEASE.clear()
    CALLS.clear()
    registry.register(hanging)
    made = make_app(pg_url, HOOK_TIMEOUT_SECONDS=5, RETRY_SECONDS=1, HOOK_MAX_ATTEMPTS=3,
                    PLUGIN_MAX_ABANDONED=2)
    yield made
    RELEASE.set()
    assert workers.drain(10)
    registry.unregister("hanging")
    with made.app_context():
        db.engine.dispose()


def _publish_one() -> None:
    db.session.add(Post(title="Hi", slug="hi", body="", status="published", version=1,
                        published_at=T0, created_at=T0, updated_at=T0))
    db.session.add(OutboxEvent(topic="post.published", payload={"slug": "hi"}, created_at=T0))
    db.session.commit()


def _delivery(plugin: str) -> HookDelivery:
    db.session.rollback()
    return db.session.scalar(sa.select(HookDelivery).where(HookDelivery.plugin == plugin))


def _tick_at(seconds: float) -> None:
    plugin_tick.tick(T0 + timedelta(seconds=seconds), "pytest")


def test_a_hook_that_never_returns_is_timed_out_retried_and_its_plugin_paused(hung_app):
    with hung_app.app_context():
        _publish_one()
        _tick_at(0)  # fans out, starts the hanging hook and the sitemap's
        workers.drain(2)  # the sitemap's hook finishes; the hanging one cannot
        assert _delivery("sitemap").status == "done"  # the built-in hook is not held up
        assert CALLS and _delivery("hanging").status == "running"
        _tick_at(6)  # past its 5 s: timed out, retried later, its thread abandoned
        late = _delivery("hanging")
        assert (late.status, late.attempts) == ("pending", 1)
        assert late.last_error == "Timed out: the hook ran past 5 s."
        _tick_at(8)  # the retry is due: it hangs again
        assert _delivery("hanging").status == "running"
        # its worker thread counts the attempt when it starts the call: on a busy machine
        # that can come after the next tick, which would then time out an attempt not begun
        wait_for(lambda: len(CALLS) >= 2, 10, "the retry to be called")
        _tick_at(14)  # the second abandoned thread reaches the bound: the plugin is paused
        assert _delivery("hanging").attempts == 2
        assert "hanging" not in registry.enabled_plugins()
        reason = registry.paused_reasons()["hanging"]
        assert "2 of its calls ran past their maximum runtime" in reason
    admin = hung_app.test_client()
    AuthActions(admin).login("admin")
    assert reason in admin.get("/admin/plugins/").get_data(as_text=True)


def test_timer_runs_keep_their_slots_while_hooks_hang(hung_app):
    with hung_app.app_context():
        _publish_one()
        _tick_at(0)
        assert workers.free_slots("hooks") < workers.SLOTS["hooks"]
        assert workers.free_slots("run") == workers.SLOTS["run"]  # hung hooks take none


def test_the_built_in_hooks_run_while_installed_plugins_hang_in_every_hook_slot(hung_app):
    crowd = [Plugin(f"hang{i}", f"Hang {i}") for i in range(workers.SLOTS["hooks"])]
    for each in crowd:
        each.hook("on_publish")(never_returns)
        registry.register(each)
    try:
        with hung_app.app_context():
            _publish_one()
            _tick_at(0)
            assert workers.free_slots("hooks") == 0  # every installed plugin's slot hangs
            workers.drain(2)
            assert _delivery("sitemap").status == "done"  # the sitemap still rebuilds at once
    finally:
        for each in crowd:
            registry.unregister(each.name)


failing = Plugin("failing", "Failing", "Its publish hook always raises.")


@failing.hook("on_publish")
def always_raises(event) -> None:
    raise RuntimeError(f"cannot handle event {event.id}")


def test_a_hook_that_keeps_failing_is_failed_and_shown_on_the_plugins_page(app, pg_url):
    registry.register(failing)
    made = make_app(pg_url, HOOK_MAX_ATTEMPTS=2, RETRY_SECONDS=1)
    try:
        with made.app_context():
            _publish_one()
            for second in (0, 2, 4):  # the first call, its retry, and nothing more
                _tick_at(second)
                assert workers.drain(10)
            failed = _delivery("failing")
            assert (failed.status, failed.attempts) == ("failed", 2)
        admin = made.test_client()
        AuthActions(admin).login("admin")
        page = admin.get("/admin/plugins/").get_data(as_text=True)
        assert "1 failed" in page and "RuntimeError: cannot handle event" in page
    finally:
        registry.unregister("failing")
        with made.app_context():
            db.engine.dispose()
