"""Only admins change, run, pause or delete the timers that trim and deliver the audit trail.

The housekeeping plugin deletes leadership events and webhook delivery logs that only
admins may read; the webhooks plugin delivers them. Editors keep their own timers.
"""

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tests.harness.support import TIMER, count, post_form, text
from webapp.extensions import db
from webapp.models import Timer, TimerRun
from webapp.timers import ensure_default_timers


def system_timer(app, plugin: str) -> int:
    """Create the built-in plugins' timers; return the id of plugin's first."""
    with app.app_context():
        ensure_default_timers(datetime.now(UTC))
        return db.session.scalar(sa.select(Timer.id).where(Timer.plugin == plugin)
                                 .order_by(Timer.id).limit(1))


def snapshot(app, timer_id: int) -> tuple:
    """Return what an editor's refused request must leave as it was."""
    with app.app_context():
        timer = db.session.get(Timer, timer_id)
        return (timer.name, timer.params, timer.paused, timer.cron, timer.every,
                count(app, TimerRun))


@pytest.mark.parametrize("plugin", ["housekeeping", "webhooks"])
@pytest.mark.parametrize("change", [
    ("edit", {**TIMER, "action": "housekeeping.trim",
              "params": '{"leader_events_days": 1, "deliveries_days": 1}'}),
    ("run", {}), ("pause", {}), ("resume", {}), ("delete", {}),
])
def test_an_editor_cannot_change_run_or_pause_a_system_timer(app, client, auth, plugin, change):
    timer_id = system_timer(app, plugin)
    auth.login("editor")
    before = snapshot(app, timer_id)
    path, form = change
    response = post_form(client, f"/admin/timers/{timer_id}/{path}", form)
    assert response.status_code == 403
    assert "Only admins" in text(response) and plugin in text(response)
    assert snapshot(app, timer_id) == before


def test_an_editor_cannot_open_a_system_timers_form_or_schedule_a_housekeeping_run(
        app, client, auth):
    timer_id = system_timer(app, "housekeeping")
    auth.login("editor")
    assert client.get(f"/admin/timers/{timer_id}/edit").status_code == 403
    timers = count(app, Timer)
    response = post_form(client, "/admin/timers/new",
                         {**TIMER, "action": "housekeeping.trim",
                          "params": '{"leader_events_days": 1}'})
    assert response.status_code == 403 and "Only admins" in text(response)
    assert count(app, Timer) == timers
    assert "housekeeping.trim" not in text(client.get("/admin/timers/new"))


def test_an_editor_sees_the_system_timers_controls_disabled(app, client, auth):
    timer_id = system_timer(app, "housekeeping")
    auth.login("editor")
    page = text(client.get(f"/admin/timers/{timer_id}"))
    assert f'action="/admin/timers/{timer_id}/run"' not in page
    assert f'href="/admin/timers/{timer_id}/edit"' not in page
    assert "Only admins" in page
    listing = text(client.get("/admin/timers/"))
    assert f'action="/admin/timers/{timer_id}/pause"' not in listing


def test_an_editor_keeps_their_own_timers(app, client, auth):
    system_timer(app, "housekeeping")
    auth.login("editor")
    assert post_form(client, "/admin/timers/new", TIMER).status_code == 303
    with app.app_context():
        own = db.session.scalar(sa.select(Timer.id).where(Timer.name == TIMER["name"]))
    assert f'action="/admin/timers/{own}/run"' in text(client.get(f"/admin/timers/{own}"))
    for path in ("run", "pause", "resume"):
        assert post_form(client, f"/admin/timers/{own}/{path}").status_code == 303
    assert post_form(client, f"/admin/timers/{own}/edit",
                     {**TIMER, "every": "7"}).status_code == 303
    assert post_form(client, f"/admin/timers/{own}/delete").status_code == 303


def test_an_admin_changes_and_runs_the_housekeeping_timer(app, client, auth):
    timer_id = system_timer(app, "housekeeping")
    auth.login("admin")
    page = text(client.get(f"/admin/timers/{timer_id}"))
    assert f'action="/admin/timers/{timer_id}/run"' in page
    response = post_form(client, f"/admin/timers/{timer_id}/edit", {
        **TIMER, "name": "Housekeeping: trim history", "action": "housekeeping.trim",
        "params": '{"leader_events_days": 30}'})
    assert response.status_code == 303
    assert post_form(client, f"/admin/timers/{timer_id}/run").status_code == 303
    assert post_form(client, f"/admin/timers/{timer_id}/pause").status_code == 303


@pytest.mark.parametrize("plugin", ["housekeeping", "webhooks"])
def test_the_api_refuses_an_editor_running_a_system_timer(app, api, plugin):
    timer_id = system_timer(app, plugin)
    response = api("POST", f"/api/timers/{timer_id}/run")
    assert response.status_code == 403
    assert plugin in response.get_json()["detail"]
    assert count(app, TimerRun) == 0
    assert api("POST", f"/api/timers/{timer_id}/run", role="admin").status_code == 202
