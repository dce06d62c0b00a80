"""Plugins from entry points, broken ones kept aside, hooks fed from the outbox, built-ins."""

import sys
import textwrap
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from webapp.extensions import db
from webapp.models import (
    HookDelivery,
    OutboxEvent,
    Post,
    Timer,
    TimerRun,
)
from webapp.plugins import registry, sitemap
from webapp.scheduling import plugin_tick, publish, workers
from webapp.timers import create_timer

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)

GOOD = '''
    from webapp.plugins import Param, Plugin

    plugin = Plugin("good", "Good", "A plugin that works.")
    SEEN = []
    FAILURES = []

    @plugin.action("ping", params=[Param("word", "str", "pong")])
    def ping(ctx, word):
        return word

    @plugin.hook("on_publish")
    def published(event):
        SEEN.append(("published", event.id, event.payload["slug"]))
        if FAILURES:
            raise RuntimeError(FAILURES.pop())

    @plugin.hook("on_unpublish")
    def unpublished(event):
        SEEN.append(("unpublished", event.id, event.payload["slug"]))

    NOT_A_PLUGIN = object()
'''

ENTRY_POINTS = '''
    [soloist.plugins]
    good = soloist_good_plugin:plugin
    broken = soloist_broken_plugin:plugin
    odd = soloist_good_plugin:NOT_A_PLUGIN
'''


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a distribution with three soloist.plugins entry points: good, broken, odd."""
    info = tmp_path / "soloist_test_plugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: soloist-test-plugins\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS))
    (tmp_path / "soloist_good_plugin.py").write_text(textwrap.dedent(GOOD))
    (tmp_path / "soloist_broken_plugin.py").write_text("import soloist_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reload()
    registry.plugins()  # load them now
    yield
    for name in ("soloist_good_plugin", "soloist_broken_plugin"):
        sys.modules.pop(name, None)
    monkeypatch.undo()
    registry.reload()


def good_module():
    return sys.modules["soloist_good_plugin"]


def test_a_broken_plugin_is_shown_with_its_error_and_the_others_load(app, auth, installed):
    assert set(registry.plugins()) == {"webhooks", "sitemap", "housekeeping", "good"}
    broken = registry.broken()
    assert set(broken) == {"broken", "odd"}
    assert broken["broken"].error == (
        "ModuleNotFoundError: No module named 'soloist_missing_dependency'")
    assert "not a soloist Plugin" in broken["odd"].error
    page = auth.client("admin").get("/admin/plugins/").get_data(as_text=True)
    assert "No module named &#39;soloist_missing_dependency&#39;" in page
    assert 'id="plugin-good"' in page and "good.ping" in page


def test_a_broken_plugin_does_not_stop_the_others_timers(app, installed):
    with app.app_context():
        timer = create_timer({"name": "Ping", "action": "good.ping", "params": '{"word": "hi"}',
                              "kind": "every", "every": "1", "unit": "minutes",
                              "start_at": T0.isoformat()}, now=T0 - timedelta(seconds=1))
        plugin_tick.tick(T0)
        assert workers.drain(10)
        run = db.session.scalar(sa.select(TimerRun).where(TimerRun.timer_id == timer.id))
        assert (run.status, run.result) == ("succeeded", "hi")
        defaults = db.session.scalars(sa.select(Timer.plugin).where(
            Timer.default_key.is_not(None))).all()
        assert sorted(defaults) == ["housekeeping", "housekeeping", "sitemap", "webhooks"]


def publish_and_unpublish(now: datetime) -> None:
    db.session.add(Post(title="Hi", slug="hi", body="", status="scheduled", publish_at=now,
                        unpublish_at=now + timedelta(minutes=1), created_at=now,
                        updated_at=now))
    db.session.commit()
    publish.tick(now)


def test_hooks_get_each_outbox_event_at_least_once_with_its_id(app, installed):
    good_module().FAILURES.append("receiver down")
    with app.app_context():
        publish_and_unpublish(T0)
        event_id = db.session.scalar(sa.select(OutboxEvent.id))
        plugin_tick.tick(T0)
        assert workers.drain(10)
        assert [("published", event_id, "hi")] == good_module().SEEN  # raised: retried later
        failed = db.session.scalar(sa.select(HookDelivery).where(HookDelivery.plugin == "good"))
        assert (failed.status, failed.attempts, failed.last_error) == (
            "pending", 1, "RuntimeError: receiver down")
        publish.tick(T0 + timedelta(minutes=1))
        plugin_tick.tick(T0 + timedelta(minutes=1))
        assert workers.drain(10)
        seen = good_module().SEEN
        assert seen[:2] == [("published", event_id, "hi"), ("published", event_id, "hi")]
        assert seen[2][0] == "unpublished" and len(seen) == 3
        statuses = db.session.scalars(sa.select(HookDelivery.status).where(
            HookDelivery.plugin == "good")).all()
        assert statuses == ["done", "done"]
        assert db.session.scalar(sa.select(sa.func.count()).where(
            OutboxEvent.processed_at.is_(None))) == 0


def test_a_switched_off_plugin_gets_no_events(app, installed):
    with app.app_context():
        registry.set_enabled("good", False)
        publish_and_unpublish(T0)
        plugin_tick.tick(T0)
        assert workers.drain(10)
        assert good_module().SEEN == []
        hooked = set(db.session.scalars(sa.select(HookDelivery.plugin)))
        assert hooked == {"sitemap"}  # webhook deliveries come straight from the outbox


def test_the_sitemap_lists_published_posts_and_every_instance_serves_it(app):
    client = app.test_client()
    assert client.get("/sitemap.xml").status_code == 404  # not built yet
    with app.app_context():
        publish_and_unpublish(T0)
        db.session.add(Post(title="Draft", slug="draft", body="", status="draft",
                            created_at=T0, updated_at=T0))
        db.session.commit()
        plugin_tick.tick(T0)  # the publish hook rebuilds it at once
        assert workers.drain(10)
    response = client.get("/sitemap.xml", base_url="https://example.org")
    assert response.status_code == 200 and response.mimetype == "application/xml"
    xml = response.get_data(as_text=True)
    assert "<loc>https://example.org/posts/hi</loc>" in xml and "draft" not in xml
    with app.app_context():
        publish.tick(T0 + timedelta(minutes=1))  # unpublished
        assert sitemap.rebuild(T0 + timedelta(minutes=1)) == 0
    assert "/posts/hi" not in client.get("/sitemap.xml").get_data(as_text=True)
