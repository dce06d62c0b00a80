"""The timer pages: roles, form validation next to the field, run now / pause / resume."""

import re
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.support import TIMER, count, field_error, post_form, text
from webapp.extensions import db
from webapp.models import Timer, TimerRun
from webapp.plugins.schedules import Schedule
from webapp.scheduling import plugin_tick, workers
from webapp.timefmt import human
from webapp.timers import ensure_default_timers

FORM = {"name": "Nightly sitemap", "action": "sitemap.rebuild", "params": "{}", "kind": "cron",
        "every": "", "unit": "minutes", "cron": "0 9 * * *", "run_at": "", "start_at": "",
        "timezone": "America/New_York", "misfire": "run_once", "grace_seconds": "60",
        "max_runtime_seconds": "300", "max_failures": "5"}


def timer_count(app) -> int:
    with app.app_context():
        return db.session.scalar(sa.select(sa.func.count(Timer.id)))


def test_a_viewer_can_neither_see_nor_create_timers(app, auth):
    client = auth.client("viewer")
    assert client.get("/admin/timers/").status_code == 403
    assert post_form(client, "/admin/timers/new", FORM).status_code == 403
    assert timer_count(app) == 0
    assert "/admin/timers/" not in client.get("/admin/").get_data(as_text=True)


def test_an_editor_creates_a_timer_and_sees_its_next_run_in_their_own_zone(app, auth):
    client = auth.client("editor", timezone="Europe/Paris")
    response = post_form(client, "/admin/timers/new", FORM)
    assert response.status_code == 303
    with app.app_context():
        timer = db.session.scalar(sa.select(Timer))
        expected = human(Schedule.of(timer).next_after(datetime.now(UTC)), "Europe/Paris")
    page = client.get("/admin/timers/").get_data(as_text=True)
    assert "Nightly sitemap" in page
    assert "At 09:00 every day, New York time" in page
    assert expected in page and "Europe/Paris" in page
    detail = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "No runs yet." in detail


@pytest.mark.parametrize(("field", "value", "message"), [
    ("cron", "61 * * * *", "Invalid cron expression"),
    ("cron", "0 9 * *", "Give 5 fields"),
    ("every", "0", "The interval must be at least 1."),
    ("every", "-5", "The interval must be at least 1."),
    ("timezone", "Mars/Olympus_Mons", "Unknown time zone"),
    ("action", "nope.nothing", "Unknown action"),
    ("params", '{"limit": "lots"}', "Limit must be a whole number."),
    ("run_at", "tomorrow-ish", "Give a date and time"),
])
def test_the_timer_form_refuses_bad_input_next_to_the_field_and_keeps_it(
        app, auth, field: str, value: str, message: str):
    client = auth.client("editor")
    kind = {"every": "every", "run_at": "once"}.get(field, "cron")
    response = post_form(client, "/admin/timers/new", {**FORM, "kind": kind, field: value})
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    error = re.search(rf'<small class="error" id="e-{field}">([^<]*)</small>', page)
    assert error and message in error.group(1)
    assert 'value="Nightly sitemap"' in page  # what was typed is kept
    assert timer_count(app) == 0


def test_run_now_pause_and_resume_need_csrf_and_redirect_after_the_post(app, auth):
    client = auth.client("editor")
    post_form(client, "/admin/timers/new", {**FORM, "name": "Mine"})
    with app.app_context():
        timer_id = db.session.scalar(sa.select(Timer.id))
    assert client.post(f"/admin/timers/{timer_id}/run").status_code == 400  # no CSRF token
    response = post_form(client, f"/admin/timers/{timer_id}/run")
    assert response.status_code == 303
    assert response.headers["Location"].endswith(f"/admin/timers/{timer_id}")
    with app.app_context():
        assert db.session.scalars(sa.select(TimerRun.status)).all() == ["queued"]
    assert post_form(client, f"/admin/timers/{timer_id}/pause").status_code == 303
    page = client.get(f"/admin/timers/{timer_id}").get_data(as_text=True)
    assert "Paused by editor@example.com." in page and ">Resume<" in page
    assert post_form(client, f"/admin/timers/{timer_id}/resume").status_code == 303
    with app.app_context():
        assert not db.session.get(Timer, timer_id).paused


def test_the_detail_page_shows_the_run_history_with_its_instance(app, auth):
    client = auth.client("editor")
    post_form(client, "/admin/timers/new", {**FORM, "name": "Mine"})
    with app.app_context():
        timer_id = db.session.scalar(sa.select(Timer.id).where(Timer.name == "Mine"))
    post_form(client, f"/admin/timers/{timer_id}/run")
    with app.app_context():
        plugin_tick.tick(datetime.now(UTC) + timedelta(seconds=1), "web.7")
        assert workers.drain(10)
    fragment = client.get(f"/admin/timers/{timer_id}/runs").get_data(as_text=True)
    assert "succeeded" in fragment and "web.7" in fragment and "0 posts listed" in fragment


def test_editing_a_timer_keeps_what_was_typed_and_moves_its_next_run(app, auth):
    client = auth.client("editor")
    post_form(client, "/admin/timers/new", {**FORM, "name": "Mine"})
    with app.app_context():
        timer_id = db.session.scalar(sa.select(Timer.id))
    form = client.get(f"/admin/timers/{timer_id}/edit").get_data(as_text=True)
    assert 'value="0 9 * * *"' in form and 'value="America/New_York"' in form
    bad = post_form(client, f"/admin/timers/{timer_id}/edit", {**FORM, "cron": "0 25 * * *"})
    assert bad.status_code == 422 and 'value="0 25 * * *"' in bad.get_data(as_text=True)
    good = post_form(client, f"/admin/timers/{timer_id}/edit", {
        **FORM, "kind": "every", "every": "2", "unit": "hours"})
    assert good.status_code == 303
    with app.app_context():
        timer = db.session.get(Timer, timer_id)
        assert (timer.kind, timer.every, timer.unit) == ("every", 2, "hours")
        assert timer.next_run_at - datetime.now(UTC) <= timedelta(hours=2)


def test_only_admins_see_the_webhooks_page(app, auth):
    for role in ("viewer", "editor"):
        client = auth.client(role)
        assert client.get("/admin/webhooks/").status_code == 403
        assert "/admin/webhooks/" not in client.get("/admin/").get_data(as_text=True)
    admin = auth.client("admin")
    assert admin.get("/admin/webhooks/").status_code == 200
    assert "/admin/webhooks/" in admin.get("/admin/").get_data(as_text=True)


def test_only_admins_see_and_switch_plugins(app, auth):
    editor = auth.client("editor")
    assert editor.get("/admin/plugins/").status_code == 403  # the engine room
    assert "/admin/plugins/" not in editor.get("/admin/").get_data(as_text=True)
    assert post_form(editor, "/admin/plugins/sitemap/disable").status_code == 403
    admin = auth.client("admin")
    assert post_form(admin, "/admin/plugins/sitemap/disable").status_code == 303
    page = admin.get("/admin/plugins/").get_data(as_text=True)
    assert re.search(r'id="plugin-sitemap".*?badge paused">off', page, re.S)


def test_a_once_at_time_the_clocks_skip_is_refused_like_a_posts(app):
    from webapp.timers import parse_moment
    from webapp.timezones import TimeInputError

    with pytest.raises(TimeInputError, match="does not exist in Europe/Paris"):
        parse_moment("2027-03-28T02:30", "Europe/Paris")
    assert parse_moment("2027-03-28T03:30", "Europe/Paris").hour == 1  # 03:30 CEST is 01:30 UTC


# Huge numbers, far-off dates, a plugin's own timer ----------------------------------------


@pytest.mark.parametrize(("changes", "field", "message"), [
    ({"every": "99999999999999999999"}, "every", "at most 3660 days"),
    ({"every": "2147483647", "unit": "days"}, "every", "at most 3660 days"),
    ({"every": "2147483648", "unit": "seconds"}, "every", "at most 3660 days"),
    ({"grace_seconds": "2147483648"}, "grace_seconds", "must be at most"),
    ({"max_failures": "99999999999"}, "max_failures", "must be at most"),
    ({"kind": "once", "run_at": "9999-12-31T23:59", "timezone": "America/Los_Angeles"},
     "run_at", "out of range"),
    ({"kind": "once", "run_at": "0001-01-01T00:00", "timezone": "Asia/Tokyo"},
     "run_at", "out of range"),
    ({"start_at": "0001-01-01T00:00", "timezone": "America/New_York"}, "start_at",
     "out of range"),
    ({"name": ""}, "name", "Give the timer a name."),
])
def test_a_timer_with_huge_numbers_or_far_off_dates_is_refused_next_to_the_field(
        app, client, auth, changes: dict, field: str, message: str):
    auth.login("editor")
    response = post_form(client, "/admin/timers/new", {**TIMER, **changes})
    assert response.status_code == 422
    assert message in field_error(text(response), field)
    assert count(app, Timer) == 0


@pytest.mark.parametrize(("every", "unit", "zone", "start"), [
    (1, "days", "UTC", datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
    (5, "minutes", "Pacific/Kiritimati", datetime(9999, 12, 31, 9, 59, tzinfo=UTC)),
])
def test_a_timer_whose_slots_run_past_year_9999_still_shows_its_pages(
        app, client, auth, every: int, unit: str, zone: str, start: datetime):
    auth.login("editor")
    with app.app_context():  # stored before the form refused such times
        timer = Timer(name="Edge", plugin="housekeeping", action="trim", params={},
                      kind="every", every=every, unit=unit, timezone=zone, start_at=start,
                      next_run_at=start)
        db.session.add(timer)
        db.session.commit()
        timer_id = timer.id
    response = client.get(f"/admin/timers/{timer_id}")
    assert response.status_code == 200
    assert human(start, "UTC") in text(response)  # "Fri 31 Dec 9999, 23:59 UTC"
    assert client.get("/admin/timers/").status_code == 200


def test_a_plugins_own_timer_keeps_its_action(app, client, auth):
    auth.login("admin")  # the webhooks plugin's timers are admins' (test_system_timers_admin_only)
    with app.app_context():
        ensure_default_timers(datetime.now(UTC))
        timer_id = db.session.scalar(sa.select(Timer.id).where(
            Timer.plugin == "webhooks", Timer.default_key == "deliver"))
    response = post_form(client, f"/admin/timers/{timer_id}/edit",
                         {**TIMER, "name": "Webhooks: deliver", "action": "sitemap.rebuild"})
    assert response.status_code == 422
    assert "action stays webhooks.deliver" in field_error(text(response), "action")
    with app.app_context():
        timer = db.session.get(Timer, timer_id)
        assert (timer.plugin, timer.action) == ("webhooks", "deliver")


def test_an_actions_parameters_are_fields_and_a_bad_one_is_named_and_kept(app, auth):
    client = auth.client("editor")
    page = text(client.get("/admin/timers/new"))
    assert 'name="param:sitemap.rebuild:limit"' in page and "Advanced: parameters as JSON" in page
    bad = post_form(client, "/admin/timers/new", {**FORM, "action": "sitemap.rebuild",
                                                  "param:sitemap.rebuild:limit": "lots"})
    assert bad.status_code == 422 and "Limit must be a whole number" in text(bad)
    assert 'name="param:sitemap.rebuild:limit" value="lots"' in text(bad)  # kept
    assert timer_count(app) == 0
    made = post_form(client, "/admin/timers/new", {**FORM, "action": "sitemap.rebuild",
                                                   "param:sitemap.rebuild:limit": "250"})
    assert made.status_code == 303
    with app.app_context():
        assert db.session.scalar(sa.select(Timer)).params == {"limit": 250}
    edit = text(client.get(made.headers["Location"] + "/edit"))
    assert 'name="param:sitemap.rebuild:limit" value="250"' in edit
