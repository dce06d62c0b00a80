"""Next runs, visibly: the timer form's preview across clock changes, and the post panel's warning.

The dates are real ones: Europe/Paris skips 02:00-03:00 on 2026-03-29 and repeats it on
2026-10-25; America/New_York skips 02:00-03:00 on 2026-03-08 and repeats 01:00-02:00 on
2026-11-01.
"""

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from tests.harness.support import TIMER, post_form, sign_in_page, text
from webapp.clockchanges import changes_between
from webapp.extensions import db
from webapp.models import Timer, TimerRun
from webapp.plugins import Plugin, registry
from webapp.plugins.base import ValidationError
from webapp.plugins.schedules import Schedule
from webapp.scheduling import plugin_tick, workers
from webapp.timers import create_timer
from webapp.timers.preview import next_runs

PARIS, NEW_YORK = "Europe/Paris", "America/New_York"
# (zone, the night the clocks go forward, the night they go back, the repeated hour)
NIGHTS = {PARIS: (datetime(2026, 3, 28, 20, tzinfo=UTC), datetime(2026, 10, 24, 20, tzinfo=UTC),
                  2),
          NEW_YORK: (datetime(2026, 3, 7, 23, tzinfo=UTC), datetime(2026, 10, 31, 23, tzinfo=UTC),
                     1)}


def walls(preview) -> list[str]:
    zone = preview.schedule.zone
    return [run.at.astimezone(zone).strftime("%m-%d %H:%M %Z") for run in preview.runs]


@pytest.mark.parametrize("zone", [PARIS, NEW_YORK])
def test_a_cron_at_a_skipped_time_runs_at_three_and_the_preview_says_so(zone):
    spring, _fall, _hour = NIGHTS[zone]
    preview = next_runs({"kind": "cron", "cron": "30 2 * * *", "timezone": zone}, spring)
    first = preview.runs[0]
    assert first.at.astimezone(ZoneInfo(zone)).strftime("%H:%M") == "03:00"
    assert "Clocks go forward 1 h at 02:00" in first.notes[0]
    assert "02:30 does not exist, so it runs at 03:00 instead." in first.notes[0]
    assert [run.notes for run in preview.runs[1:]] == [()] * 4
    # exactly the slots the plugin leader claims, one after the other
    schedule = Schedule("cron", zone, cron="30 2 * * *")
    assert [run.at for run in preview.runs] == schedule.upcoming(spring, 5)


@pytest.mark.parametrize("zone", [PARIS, NEW_YORK])
def test_a_cron_at_a_repeated_time_runs_once_the_first_time(zone):
    _spring, fall, hour = NIGHTS[zone]
    preview = next_runs({"kind": "cron", "cron": f"30 {hour} * * *", "timezone": zone}, fall)
    first = preview.runs[0]
    assert first.at.astimezone(ZoneInfo(zone)).dst() == timedelta(hours=1)  # summer time
    assert f"0{hour}:30 happens twice; it runs at the first" in first.notes[0]
    assert "only." in first.notes[0]
    assert len({run.at.date() for run in preview.runs}) == 5  # one run a day, no second 02:30


def test_a_cron_with_a_star_in_its_minute_runs_both_repeated_times_and_none_skipped():
    spring, fall, _hour = NIGHTS[PARIS]
    back = next_runs({"kind": "cron", "cron": "*/30 2 * * *", "timezone": PARIS}, fall)
    assert walls(back)[:4] == ["10-25 02:00 CEST", "10-25 02:30 CEST",
                               "10-25 02:00 CET", "10-25 02:30 CET"]
    assert "this is the first (CEST), and it runs again at the second." in back.runs[0].notes[0]
    assert "this is the second (CET), after a run at the first." in back.runs[2].notes[0]
    forward = next_runs({"kind": "cron", "cron": "*/30 2 * * *", "timezone": PARIS}, spring)
    assert walls(forward)[0] == "03-30 02:00 CEST"  # nothing on the 29th
    assert "02:00 and 02:30 do not exist and are not run" in forward.runs[0].notes[0]


@pytest.mark.parametrize("zone", [PARIS, NEW_YORK])
def test_every_day_keeps_its_wall_time_and_moves_out_of_the_gap(zone):
    spring, _fall, _hour = NIGHTS[zone]
    data = {"kind": "every", "every": "1", "unit": "days", "start_at": "2026-03-01T02:30",
            "timezone": zone}
    preview = next_runs(data, spring)
    shown = [w.split()[1] for w in walls(preview)]
    assert shown == ["03:00", "02:30", "02:30", "02:30", "02:30"]
    assert "02:30 does not exist, so it runs at 03:00 instead." in preview.runs[0].notes[0]


def test_every_24_hours_counts_real_time_and_the_preview_says_the_wall_time_moves():
    spring, _fall, _hour = NIGHTS[PARIS]
    data = {"kind": "every", "every": "24", "unit": "hours", "start_at": "2026-03-01T09:00",
            "timezone": PARIS}
    preview = next_runs(data, spring)
    assert walls(preview)[0] == "03-29 10:00 CEST"
    assert ("counting real time, this runs at 10:00, not 09:00 (every N days keeps the wall "
            "time).") in preview.runs[0].notes[0]
    assert [run.notes for run in preview.runs[1:]] == [()] * 4


@pytest.mark.parametrize(("zone", "wall", "first"), [(PARIS, "2026-10-25T02:30", "CEST"),
                                                     (NEW_YORK, "2026-11-01T01:30", "EDT")])
def test_once_at_a_repeated_time_means_the_first(zone, wall, first):
    preview = next_runs({"kind": "once", "run_at": wall, "timezone": zone},
                        datetime(2026, 10, 1, tzinfo=UTC))
    assert len(preview.runs) == 1
    assert f"it runs at the first ({first}) only." in preview.runs[0].notes[0]


def test_runs_far_from_a_clock_change_carry_no_note():
    preview = next_runs({"kind": "cron", "cron": "0 9 * * 1-5", "timezone": PARIS},
                        datetime(2026, 6, 1, tzinfo=UTC))
    assert len(preview.runs) == 5 and all(run.notes == () for run in preview.runs)


def test_an_invalid_or_past_schedule_is_refused_by_field():
    with pytest.raises(ValidationError) as bad:
        next_runs({"kind": "cron", "cron": "61 * * * *", "timezone": PARIS},
                  datetime(2026, 6, 1, tzinfo=UTC))
    assert "Invalid cron expression" in bad.value.errors["cron"]
    with pytest.raises(ValidationError) as past:
        next_runs({"kind": "once", "run_at": "2026-01-01T09:00", "timezone": PARIS},
                  datetime(2026, 6, 1, tzinfo=UTC))
    assert past.value.errors == {"run_at": "That time has passed; pick a time in the future."}


quiet = Plugin("quiet", "Quiet", "Does nothing, on time.")


@quiet.action("nothing")
def nothing(ctx) -> str:
    return "done"


@pytest.fixture
def leader(app):
    """An app whose plugin leader runs only the quiet plugin's timers (ticked by the test)."""
    registry.register(quiet)
    with app.app_context():
        for name in registry.BUILTIN:
            registry.set_enabled(name, False)
        yield app
        assert workers.drain(10)
    registry.unregister("quiet")


@pytest.mark.parametrize(("zone", "cron", "night"), [
    (PARIS, "30 2 * * *", 0), (PARIS, "*/30 2 * * *", 1), (PARIS, "*/30 2 * * *", 0),
    (NEW_YORK, "30 1 * * *", 1), (NEW_YORK, "0 * * * *", 0)])
def test_the_plugin_leader_runs_exactly_the_slots_the_preview_showed(leader, zone, cron, night):
    now = NIGHTS[zone][night]
    data = {"kind": "cron", "cron": cron, "timezone": zone}
    shown = [run.at for run in next_runs(data, now).runs]
    timer = create_timer({**data, "name": "dst", "action": "quiet.nothing"}, now=now)
    for slot in shown:  # the leader's next slot is always the next one shown, nothing between
        assert db.session.get(Timer, timer.id).next_run_at == slot
        plugin_tick.tick(slot - timedelta(seconds=1))
        plugin_tick.tick(slot)
    assert workers.drain(10)
    claimed = db.session.scalars(sa.select(TimerRun.scheduled_for)
                                 .where(TimerRun.timer_id == timer.id)
                                 .order_by(TimerRun.scheduled_for)).all()
    assert claimed == shown


def next_spring(zone: str) -> datetime:
    """Return the next night the clocks go forward in zone, as a wall date."""
    now = datetime.now(UTC)
    change = next(c for c in changes_between(ZoneInfo(zone), now, now + timedelta(days=400))
                  if c.forward)
    return change.wall_before


def test_the_fragment_lists_five_runs_in_both_zones_with_the_note(app, auth):
    editor = auth.client("editor", timezone="Asia/Tokyo")
    day = next_spring(PARIS)
    cron = f"30 2 {day.day} {day.month} *"
    response = editor.get("/admin/timers/next-runs", query_string={
        "kind": "cron", "cron": cron, "timezone": PARIS})
    assert response.status_code == 200
    page = text(response)
    assert len(re.findall(r"<li", page)) == 5
    assert f"{day:%Y-%m-%d} 03:00 CEST" in page and "your time" in page and "JST" in page
    assert "02:30 does not exist, so it runs at 03:00 instead." in page
    # the timer saved from the same fields waits for the first run the preview showed
    form = {**TIMER, "kind": "cron", "cron": cron, "timezone": PARIS}
    created = post_form(editor, "/admin/timers/new", form)
    assert created.status_code == 303
    with app.app_context():
        saved = db.session.scalar(sa.select(Timer.next_run_at))
    assert f'datetime="{saved.astimezone(UTC):%Y-%m-%dT%H:%M:%S}Z"' in page
    # and its page shows the same note beside that run, as does the timers list
    detail = text(editor.get(created.headers["Location"]))
    assert "02:30 does not exist, so it runs at 03:00 instead." in detail
    listed = text(editor.get("/admin/timers/"))
    timer_id = created.headers["Location"].rstrip("/").rsplit("/", 1)[1]
    row = listed[listed.index(f'id="timer-{timer_id}"'):]
    assert '02:30 does not exist, so it runs at 03:00 instead.</small>' in row[:row.index("</tr>")]


def test_the_timers_list_shows_no_note_for_a_run_far_from_a_clock_change(app, auth):
    editor = auth.client("editor")
    created = post_form(editor, "/admin/timers/new", {**TIMER, "kind": "every", "every": "5",
                                                     "unit": "minutes", "timezone": PARIS})
    assert created.status_code == 303
    assert "clock-note" not in text(editor.get("/admin/timers/"))


def test_the_fragment_names_the_bad_field_with_422_and_viewers_get_403(app, auth):
    editor = auth.client("editor")
    bad = editor.get("/admin/timers/next-runs", query_string={
        "kind": "cron", "cron": "0 25 * * *", "timezone": PARIS})
    assert bad.status_code == 422
    assert "Cron: Invalid cron expression" in text(bad)
    unknown = editor.get("/admin/timers/next-runs", query_string={
        "kind": "every", "every": "5", "unit": "minutes", "timezone": "Mars/Base"})
    assert unknown.status_code == 422 and "Time zone: Unknown time zone" in text(unknown)
    blank = editor.get("/admin/timers/next-runs", query_string={
        "kind": "cron", "cron": " ", "timezone": PARIS})
    assert blank.status_code == 200 and "Type a cron expression" in text(blank)
    assert "error" not in text(blank)
    form = text(editor.get("/admin/timers/new"))
    assert 'hx-get="/admin/timers/next-runs"' in form and 'id="next-runs"' in form
    viewer = auth.client("viewer")
    assert viewer.get("/admin/timers/next-runs", query_string={
        "kind": "cron", "cron": "* * * * *"}).status_code == 403


def when(client, at: str, zone: str) -> str:
    return text(client.get("/admin/posts/when", query_string={"publish_at": at, "zone": zone}))


def test_the_post_panel_warns_near_a_clock_change_and_not_far_from_one(app, auth):
    editor = auth.client("editor")
    repeated = when(editor, "2026-10-25T02:30", PARIS)
    assert "clock-warning" in repeated
    assert ("Clocks go back 1 h at 03:00 on Sun 25 Oct 2026 (CEST → CET): 02:30 happens twice;"
            " this post uses the first (CEST, 00:30 UTC). For the second, pick the zone UTC "
            "and type 2026-10-25 01:30.") in repeated
    before = when(editor, "2026-03-07T22:00", NEW_YORK)
    assert ("Clocks go forward 1 h at 02:00 on Sun 8 Mar 2026 (EST → EDT), within a day of "
            "this time, which is before the change (EST).") in before
    assert "clock-warning" not in when(editor, "2026-06-10T12:00", PARIS)
    assert "clock-warning" not in when(editor, "2026-03-29T02:30", PARIS)  # refused instead


def test_typing_a_cron_in_chromium_updates_the_preview_and_names_a_bad_field(browser, site):
    from playwright.sync_api import expect

    context = browser.new_context(base_url=site["url"], timezone_id="Asia/Tokyo")
    try:
        page = context.new_page()
        sign_in_page(page, "editor@example.com")
        page.goto("/admin/timers/new")
        page.check("input[name=kind][value=cron]")
        page.fill("#f-timezone", PARIS)
        day = next_spring(PARIS)
        page.fill("#f-cron", f"30 2 {day.day} {day.month} *")
        runs = page.locator("#next-runs .next-runs > li")
        expect(runs.first).to_contain_text(f"{day:%Y-%m-%d} 03:00 CEST", timeout=15_000)
        expect(runs).to_have_count(5)
        expect(runs.first.locator(".clock-note")).to_contain_text("runs at 03:00 instead")
        page.fill("#f-cron", "0 25 * * *")
        expect(page.locator("#next-runs .error")).to_contain_text("Cron: Invalid cron",
                                                                  timeout=15_000)
    finally:
        context.close()


def test_a_timer_whose_zone_this_host_cannot_load_still_lists_and_shows(app, auth):
    """A zone gone from the host's tzdata: the pages show the timer without its runs, no 500."""
    editor = auth.client("editor")
    created = post_form(editor, "/admin/timers/new", {**TIMER, "timezone": PARIS})
    assert created.status_code == 303
    with app.app_context():
        db.session.execute(sa.update(Timer).values(timezone="Nowhere/Atlantis"))
        db.session.commit()
    listed, shown = editor.get("/admin/timers/"), editor.get(created.headers["Location"])
    assert (listed.status_code, shown.status_code) == (200, 200)
    assert "Review timer" in text(listed) and "Nowhere/Atlantis" in text(shown)
