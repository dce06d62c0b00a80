"""The editorial calendar: days in the viewer's zone, new posts on a day, moves and refusals.

Dates are next year's, so a move is always to the future; the clock-change week is the
last week of March, when Europe/Paris goes from CET to CEST.
"""

import re
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from tests.support import TIMER, add_user, new_post, post_form, serve, sign_in_page, text
from webapp.extensions import db
from webapp.models import AuditEvent, Post

YEAR = datetime.now(UTC).year + 1
PARIS = "Europe/Paris"
CELL = re.compile(r'<td class="(?:day|slot)[^"]*" data-date="([\d-]+)"[^>]*>(.*?)</td>', re.S)


def spring_forward(year: int) -> date:
    """Return the last Sunday of March: Europe's clocks go forward that night."""
    last = date(year, 3, 31)
    return last - timedelta(days=(last.weekday() + 1) % 7)


def cells(page: str) -> dict[str, str]:
    """Return each day's cells of a calendar page, by date (a week's hours joined in order)."""
    found: dict[str, str] = {}
    for day, cell in CELL.findall(page):
        found[day] = found.get(day, "") + cell
    return found


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def scheduled(app, title: str, at: datetime, **fields) -> int:
    return new_post(app, title, "scheduled", publish_at=at, **fields)


def state(app, post_id: int) -> tuple[str, datetime, int]:
    with app.app_context():
        post = db.session.get(Post, post_id)
        return post.status, post.publish_at, post.version


def audit_actions(app) -> list[str]:
    with app.app_context():
        return list(db.session.scalars(sa.select(AuditEvent.action).where(
            AuditEvent.action.like("post.%")).order_by(AuditEvent.id)))


@pytest.fixture
def paris(auth):
    """An editor whose zone is Europe/Paris, signed in."""
    return auth.client("editor", email="paris@example.com", timezone=PARIS)


def test_a_month_puts_each_post_on_its_day_in_the_viewers_zone(app, auth, paris):
    late = scheduled(app, "Late evening in UTC", utc(YEAR, 1, 14, 23, 30))
    new_post(app, "Went out", "published", published_at=utc(YEAR, 1, 3, 8, 0))
    new_post(app, "A draft", "draft")

    days = cells(text(paris.get(f"/admin/calendar/?view=month&date={YEAR}-01-20")))
    assert date.fromisoformat(min(days)).weekday() == 0 and len(days) % 7 == 0
    assert min(days) <= f"{YEAR}-01-01" and max(days) >= f"{YEAR}-01-31"
    assert "Late evening in UTC" in days[f"{YEAR}-01-15"]  # 00:30 in Paris
    assert "00:30" in days[f"{YEAR}-01-15"]
    assert "Late evening in UTC" not in days[f"{YEAR}-01-14"]
    assert "Went out" in days[f"{YEAR}-01-03"] and "09:00" in days[f"{YEAR}-01-03"]
    assert not any("A draft" in cell for cell in days.values())
    assert f'href="/admin/posts/{late}"' in days[f"{YEAR}-01-15"]

    in_utc = cells(text(auth.client("editor").get(f"/admin/calendar/?date={YEAR}-01-20")))
    assert "Late evening in UTC" in in_utc[f"{YEAR}-01-14"]
    assert "23:30" in in_utc[f"{YEAR}-01-14"]


def test_the_week_the_clocks_go_forward_has_a_23_hour_sunday(app, paris):
    sunday = spring_forward(YEAR)
    monday = sunday - timedelta(days=6)
    before = datetime.combine(monday, datetime.min.time(), UTC) - timedelta(hours=1)
    scheduled(app, "First minute of the week", before)  # 00:00 CET on Monday
    scheduled(app, "Sunday just after midnight", datetime.combine(
        sunday, datetime.min.time(), UTC) - timedelta(minutes=30))  # 00:30 CET
    scheduled(app, "Last minute of Sunday", datetime.combine(
        sunday, datetime.min.time(), UTC) + timedelta(hours=21, minutes=59))  # 23:59 CEST
    scheduled(app, "Monday after", datetime.combine(
        sunday, datetime.min.time(), UTC) + timedelta(hours=22))  # 00:00 CEST, next week
    scheduled(app, "Sunday before", before - timedelta(minutes=1))  # 23:59 CET, last week

    page = text(paris.get(f"/admin/calendar/?view=week&date={sunday.isoformat()}"))
    days = cells(page)
    assert list(days) == [(monday + timedelta(days=i)).isoformat() for i in range(7)]
    assert "First minute of the week" in days[monday.isoformat()]
    assert "00:00" in days[monday.isoformat()]
    sunday_cell = days[sunday.isoformat()]
    assert "Sunday just after midnight" in sunday_cell and "00:30" in sunday_cell
    assert "Last minute of Sunday" in sunday_cell and "23:59" in sunday_cell
    assert "Monday after" not in page and "Sunday before" not in page


def test_moving_a_post_reschedules_it_in_the_viewers_zone(app, paris):
    post_id = scheduled(app, "Mover", utc(YEAR, 1, 14, 8, 0),
                        unpublish_at=utc(YEAR, 2, 1, 0, 0))
    response = post_form(paris, f"/admin/calendar/posts/{post_id}/move", {
        "date": f"{YEAR}-01-20", "time": "10:15", "zone": PARIS, "version": 1,
        "view": "month", "page": f"{YEAR}-01-01"})
    assert response.status_code == 303
    assert response.location == f"/admin/calendar/?view=month&date={YEAR}-01-01"
    assert state(app, post_id) == ("scheduled", utc(YEAR, 1, 20, 9, 15), 2)
    assert audit_actions(app) == ["post.schedule"]
    days = cells(text(paris.get(response.location)))
    assert "Mover" in days[f"{YEAR}-01-20"] and "Mover" not in days[f"{YEAR}-01-14"]

    swapped = post_form(paris, f"/admin/calendar/posts/{post_id}/move", {
        "date": f"{YEAR}-01-21", "time": "07:00", "zone": PARIS, "version": 2,
        "view": "week", "page": f"{YEAR}-01-21"}, headers={"HX-Request": "true"})
    assert swapped.status_code == 200
    fragment = text(swapped)
    assert fragment.startswith('<section id="calendar"') or '<section id="calendar"' in fragment
    assert "<html" not in fragment
    assert f"Moved “Mover” to {YEAR}-01-21 07:00 CET." in fragment
    assert "Mover" in cells(fragment)[f"{YEAR}-01-21"]
    assert state(app, post_id)[1] == utc(YEAR, 1, 21, 6, 0)


@pytest.mark.parametrize(("typed", "version", "reason"), [
    ({"date": f"{YEAR - 2}-06-01", "time": "09:00"}, 1, "That time has already passed"),
    ({"date": spring_forward(YEAR).isoformat(), "time": "02:30"}, 1,
     "does not exist in Europe/Paris: the clocks skip it"),
    ({"date": f"{YEAR}-01-20", "time": "09:00"}, 0, "Someone else changed this post"),
    ({"date": f"{YEAR}-03-01", "time": "09:00"}, 1, "must come after the publish time"),
    ({"date": "", "time": "09:00"}, 1, "Enter a date and a time."),
], ids=["past", "skipped-by-the-clocks", "stale-version", "after-its-unpublish-time", "empty"])
def test_a_refused_move_says_why_next_to_the_post_and_changes_nothing(app, paris, typed,
                                                                      version, reason):
    post_id = scheduled(app, "Stays put", utc(YEAR, 1, 14, 8, 0),
                        unpublish_at=utc(YEAR, 2, 1, 0, 0))
    before = state(app, post_id)
    for headers in ({}, {"HX-Request": "true"}):
        response = post_form(paris, f"/admin/calendar/posts/{post_id}/move", {
            **typed, "zone": PARIS, "version": version, "view": "month",
            "page": f"{YEAR}-01-01"}, headers=headers)
        assert response.status_code == 422
        chip = re.search(rf'<li class="chip scheduled refused" id="post-{post_id}".*?</li>',
                         text(response), re.S)
        assert chip and reason in chip.group(0), text(response)[:3000]
    assert state(app, post_id) == before
    assert audit_actions(app) == []


def _crowd(app, day: int, count: int, hour: int = 8) -> None:
    """Schedule count posts on day (of next January) from hour, a second apart, in one go."""
    with app.app_context():
        db.session.execute(sa.insert(Post), [
            {"title": f"Crowd {day}-{n}", "slug": f"crowd-{day}-{n}", "body": "",
             "status": "scheduled", "version": 1,
             "publish_at": utc(YEAR, 1, day, hour) + timedelta(seconds=n)}
            for n in range(count)])
        db.session.commit()


def test_a_crowded_day_shows_its_first_posts_and_counts_the_rest(app, paris):
    """A month past 1,000 posts shows each day's first ones, so its last days never look
    empty."""
    _crowd(app, 5, 1_050)
    _crowd(app, 25, 50)
    new_post(app, "Out on the 25th", "published", published_at=utc(YEAR, 1, 25, 7))
    month = cells(text(paris.get(f"/admin/calendar/?date={YEAR}-01-01")))
    fifth, twenty_fifth = month[f"{YEAR}-01-05"], month[f"{YEAR}-01-25"]
    assert fifth.count('class="chip scheduled"') == 8 and "Crowd 5-7" in fifth
    assert f'href="/admin/calendar/?view=week&amp;date={YEAR}-01-05">+1,042 more' in fifth
    assert "Out on the 25th" in twenty_fifth  # the earliest first, whatever its status
    assert twenty_fifth.count('class="chip scheduled"') == 7 and "+43 more" in twenty_fifth
    assert "more" not in month[f"{YEAR}-01-06"]
    week = hours(text(paris.get(f"/admin/calendar/?view=week&date={YEAR}-01-05")))
    nine = week[(f"{YEAR}-01-05", 9)]  # 08:00 UTC on: 09:00 to 09:17 in Paris
    assert nine.count('class="chip scheduled"') == 4 and "+1,046 more" in nine
    assert "Crowd 5-0" in nine and "Crowd 5-4" not in nine
    week = hours(text(paris.get(f"/admin/calendar/?view=week&date={YEAR}-01-25")))
    assert week[(f"{YEAR}-01-25", 9)].count('class="chip scheduled"') == 4
    assert "+46 more" in week[(f"{YEAR}-01-25", 9)]
    assert "Out on the 25th" in week[(f"{YEAR}-01-25", 8)]


def test_a_published_post_is_shown_but_cannot_be_moved(app, paris):
    post_id = new_post(app, "Out already", "published", published_at=utc(YEAR, 1, 3, 8))
    assert "move-" not in cells(text(paris.get(f"/admin/calendar/?date={YEAR}-01-01")))[
        f"{YEAR}-01-03"]
    response = post_form(paris, f"/admin/calendar/posts/{post_id}/move", {
        "date": f"{YEAR}-01-20", "time": "09:00", "zone": PARIS, "version": 1})
    assert response.status_code == 422 and "published now, not scheduled" in text(response)
    assert state(app, post_id)[0] == "published" and audit_actions(app) == []


def test_viewers_may_not_see_the_calendar_or_move_posts(app, auth):
    post_id = scheduled(app, "Hidden", utc(YEAR, 1, 14, 8))
    viewer = auth.client("viewer")
    assert viewer.get("/admin/calendar/").status_code == 403
    response = post_form(viewer, f"/admin/calendar/posts/{post_id}/move", {
        "date": f"{YEAR}-01-20", "time": "09:00", "zone": "UTC", "version": 1})
    assert response.status_code == 403
    assert state(app, post_id)[2] == 1


def test_a_new_post_on_a_day_is_scheduled_at_the_time_offered(app, paris):
    days = cells(text(paris.get(f"/admin/calendar/?date={YEAR}-01-01")))
    link = f'href="/admin/posts/new?publish_at={YEAR}-01-20T09:00"'
    assert link in days[f"{YEAR}-01-20"]
    form = text(paris.get(f"/admin/posts/new?publish_at={YEAR}-01-20T09:00"))
    assert f'value="{YEAR}-01-20T09:00"' in form and 'value="Europe/Paris"' in form
    refused = post_form(paris, "/admin/posts/new", {
        "title": "", "slug": "", "body": "", "publish_at": f"{YEAR - 2}-01-20T09:00",
        "zone": PARIS})
    assert refused.status_code == 422
    assert "already passed" in text(refused) and "Give the post a title" in text(refused)
    created = post_form(paris, "/admin/posts/new", {
        "title": "On the day", "slug": "", "body": "Hi", "publish_at": f"{YEAR}-01-20T09:00",
        "zone": PARIS})
    assert created.status_code == 303
    with app.app_context():
        post = db.session.scalar(sa.select(Post).where(Post.title == "On the day"))
        assert (post.status, post.publish_at) == ("scheduled", utc(YEAR, 1, 20, 8, 0))
    assert audit_actions(app) == ["post.create"]  # created scheduled, in one transaction


def test_past_days_offer_no_new_post_and_nonsense_arguments_show_this_month(app, paris):
    page = text(paris.get("/admin/calendar/?view=year&date=yesterday&timers=maybe"))
    assert datetime.now(ZoneInfo(PARIS)).strftime("%B %Y") in page and "Hide timers" not in page
    days = cells(text(paris.get(f"/admin/calendar/?date={YEAR - 2}-05-01")))
    assert days and not any("/admin/posts/new" in cell for cell in days.values())


def test_timers_next_runs_show_when_asked(app, paris):
    made = post_form(paris, "/admin/timers/new", {**TIMER, "name": "Every five"})
    assert made.status_code in (302, 303)
    today = datetime.now(UTC).date() + timedelta(days=2)
    plain = text(paris.get(f"/admin/calendar/?view=week&date={today}"))
    assert "Every five" not in "".join(cells(plain).values()) and "timers=1" in plain
    shown = cells(text(paris.get(f"/admin/calendar/?view=week&date={today}&timers=1")))
    cell = shown[today.isoformat()]
    assert "Every five" in cell and cell.count("<time") == 3 and "…" in cell
    assert "timers run</summary>" not in cell  # one timer: its chip
    with app.app_context():  # the built-in timers too: grouped under one chip a day
        from webapp.timers import ensure_default_timers

        ensure_default_timers(datetime.now(UTC))
    cell = cells(text(paris.get(f"/admin/calendar/?view=week&date={today}&timers=1")))[
        today.isoformat()]
    assert cell.count("timers run</summary>") == 1 and "Every five" in cell


# Chromium: the keyboard alone moves a post, and a refused move is told in place --------

def tab_to(page, selector: str, most: int) -> None:
    """Press Tab until selector has the focus, at most most times."""
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
    pytest.fail(f"Tab never reached {selector}")


@contextmanager
def january_in_chromium(app, browser, email: str, **options):
    """Sign an editor in Europe/Paris in at Chromium and open next January; yield the page."""
    add_user(app, email, "editor", timezone=PARIS)
    with serve(app) as url:
        context = browser.new_context(base_url=url, **options)
        try:
            page = context.new_page()
            sign_in_page(page, email)
            page.goto(f"/admin/calendar/?date={YEAR}-01-01")
            yield page
        finally:
            context.close()


def open_move(page, post_id: int) -> None:
    """Tab through the page to the post's "Move", open it and go on to the day's first part."""
    tab_to(page, f"#post-{post_id} summary", 120)
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")


def test_an_editor_moves_a_post_to_the_next_day_with_the_keyboard_only(app, browser):
    from playwright.sync_api import expect

    post_id = scheduled(app, "Keyboard", utc(YEAR, 1, 13, 8, 0))
    # days read mm/dd/yyyy
    with january_in_chromium(app, browser, "keys@example.com", locale="en-US") as page:
        open_move(page, post_id)  # the day's month, then its day
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowUp")  # one day later
        tab_to(page, f"#move-{post_id} button", 10)  # past the year and the time's parts
        page.keyboard.press("Enter")
        moved = page.locator(f'td[data-date="{YEAR}-01-14"] #post-{post_id}')
        expect(moved).to_contain_text("Keyboard", timeout=15_000)
        expect(page.locator(".calendar-status")).to_contain_text("Moved “Keyboard”")
        expect(moved.locator("a").first).to_be_focused()  # the keyboard carries on from there
    assert state(app, post_id)[1:] == (utc(YEAR, 1, 14, 8, 0), 2)


def test_a_move_typed_with_the_keyboard_to_a_past_day_is_refused_in_place(app, browser):
    from playwright.sync_api import expect

    post_id = scheduled(app, "Not back", utc(YEAR, 1, 13, 8, 0))
    # days read mm/dd/yyyy
    with january_in_chromium(app, browser, "past@example.com", locale="en-US") as page:
        open_move(page, post_id)  # the day's first segment, the month
        expect(page.locator(f"#move-{post_id}-date")).to_be_focused()
        page.keyboard.type(f"0113{YEAR - 2}")  # month, day, year: two years ago
        expect(page.locator(f"#move-{post_id}-date")).to_have_value(f"{YEAR - 2}-01-13")
        tab_to(page, f"#move-{post_id} button", 10)
        page.keyboard.press("Enter")
        chip = page.locator(f"#post-{post_id}")
        expect(chip.locator(".error")).to_contain_text("That time has already passed",
                                                       timeout=15_000)
        expect(page.locator(f"#move-{post_id}-date")).to_be_focused()  # to type it again
        expect(page.locator(f"#move-{post_id}-date")).to_have_value(f"{YEAR - 2}-01-13")
    assert state(app, post_id)[1:] == (utc(YEAR, 1, 13, 8, 0), 1)


def test_dragging_a_post_onto_another_day_submits_the_same_move(app, browser):
    from playwright.sync_api import expect

    post_id = scheduled(app, "Dragged", utc(YEAR, 1, 13, 8, 0))
    with january_in_chromium(app, browser, "mouse@example.com") as page:
        page.drag_and_drop(f"#post-{post_id} a", f'td[data-date="{YEAR}-01-20"]')
        moved = page.locator(f'td[data-date="{YEAR}-01-20"] #post-{post_id}')
        expect(moved).to_contain_text("Dragged", timeout=15_000)
    assert state(app, post_id)[1:] == (utc(YEAR, 1, 20, 8, 0), 2)


def test_a_day_that_has_passed_is_no_drop_target_and_the_day_under_a_drag_is_outlined(
        app, browser):
    from playwright.sync_api import expect

    post_id = scheduled(app, "Dragged", utc(YEAR, 1, 13, 8, 0))
    with january_in_chromium(app, browser, "mouse@example.com") as page:
        target = page.locator(f'td[data-date="{YEAR}-01-20"]')
        dragged = page.evaluate_handle("() => new DataTransfer()")
        target.dispatch_event("dragover", {"dataTransfer": dragged})
        expect(target).to_have_class(re.compile(r"\bdrop-target\b"))
        page.drag_and_drop(f"#post-{post_id} a", f'td[data-date="{YEAR}-01-20"]')
        expect(target.locator(f"#post-{post_id}")).to_contain_text("Dragged", timeout=15_000)
        expect(page.locator("#calendar td.drop-target")).to_have_count(0)
        # mark every day as past, as yesterday is: a drop there does nothing at all
        page.evaluate("document.querySelectorAll('#calendar td').forEach("
                      "(td) => td.classList.add('past'))")
        page.drag_and_drop(f"#post-{post_id} a", f'td[data-date="{YEAR}-01-27"]')
        expect(page.locator(f'td[data-date="{YEAR}-01-27"] #post-{post_id}')).to_have_count(0)
    assert state(app, post_id)[1] == utc(YEAR, 1, 20, 8, 0)


def test_the_calendar_refreshes_itself_but_not_under_a_move_being_typed(app, browser):
    from playwright.sync_api import expect

    first = scheduled(app, "Already there", utc(YEAR, 1, 13, 8, 0))
    add_user(app, "watcher@example.com", "editor", timezone=PARIS)
    with serve(app) as url:
        context = browser.new_context(base_url=url)
        try:
            page = context.new_page()
            page.clock.install()  # the page's timers run when the test says so
            sign_in_page(page, "watcher@example.com")
            page.goto(f"/admin/calendar/?date={YEAR}-01-01")
            expect(page.locator(f"#post-{first}")).to_be_visible()
            # a move is being typed: the calendar stays as it is under the editor
            page.locator(f"#post-{first} summary").click()
            later = scheduled(app, "Scheduled elsewhere", utc(YEAR, 1, 14, 8, 0))
            page.clock.run_for(25_000)
            page.wait_for_timeout(300)  # a refresh would have been asked for by now
            expect(page.locator(f"#post-{later}")).to_have_count(0)
            page.locator(f"#post-{first} summary").click()  # closed: refreshes again
            page.locator("h1").click()
            page.clock.run_for(25_000)
            expect(page.locator(f"#post-{later}")).to_be_visible(timeout=10_000)
        finally:
            context.close()


def test_the_night_the_clocks_go_back_both_0230s_are_on_sunday_and_told_apart(app, paris):
    last = date(YEAR, 10, 31)
    sunday = last - timedelta(days=(last.weekday() + 1) % 7)
    midnight = datetime.combine(sunday, datetime.min.time(), UTC)
    scheduled(app, "First half past two", midnight + timedelta(minutes=30))  # 02:30 CEST
    scheduled(app, "Second half past two", midnight + timedelta(minutes=90))  # 02:30 CET
    scheduled(app, "Last minute", midnight + timedelta(hours=22, minutes=59))  # 23:59 CET
    days = cells(text(paris.get(f"/admin/calendar/?view=week&date={sunday}")))
    cell = days[sunday.isoformat()]
    assert cell.count(">02:30</time>") == 2 and "23:59" in cell
    # the day is marked, and only that day
    assert "Clocks go back 1 h at 03:00" in cell
    assert not any("Clocks go" in other for day, other in days.items() if day != str(sunday))
    assert f'title="{sunday} 02:30 CEST">02:30' in cell
    assert f'title="{sunday} 02:30 CET">02:30' in cell
    assert cell.index("First half past two") < cell.index("Second half past two")


HOUR = re.compile(r'<td class="slot[^"]*" data-date="([\d-]+)" data-hour="(\d+)"[^>]*>(.*?)</td>',
                  re.S)


def hours(page: str) -> dict[tuple[str, int], str]:
    """Return each hour's cell of a week page, by (date, hour)."""
    return {(day, int(hour)): cell for day, hour, cell in HOUR.findall(page)}


def test_the_week_has_a_row_per_hour_and_marks_the_hours_the_clocks_skip(app, paris):
    sunday = spring_forward(YEAR)
    midnight = datetime.combine(sunday, datetime.min.time(), UTC)
    scheduled(app, "Coffee", midnight + timedelta(hours=7, minutes=45))  # 09:45 CEST
    scheduled(app, "Night owl", midnight + timedelta(minutes=30))  # 01:30 CET
    page = text(paris.get(f"/admin/calendar/?view=week&date={sunday}"))
    cell = hours(page)
    assert len(cell) == 7 * 24
    assert "Coffee" in cell[(str(sunday), 9)] and ">09:45</time>" in cell[(str(sunday), 9)]
    assert "Night owl" in cell[(str(sunday), 1)]
    assert not any("Coffee" in c for key, c in cell.items() if key != (str(sunday), 9))
    skipped = re.search(rf'<td class="slot[^"]*" data-date="{sunday}" data-hour="2"', page)
    assert "skipped" in skipped.group(0) and "the clocks skip this hour" in cell[(str(sunday), 2)]
    assert sum("the clocks skip" in c for c in cell.values()) == 1  # that hour only

    autumn = date(YEAR, 10, 31) - timedelta(days=(date(YEAR, 10, 31).weekday() + 1) % 7)
    cell = hours(text(paris.get(f"/admin/calendar/?view=week&date={autumn}")))
    assert "this hour happens twice" in cell[(str(autumn), 2)]
    assert sum("happens twice" in c for c in cell.values()) == 1


def test_on_the_week_page_a_post_dragged_to_an_hour_moves_there_keeping_its_minutes(
        app, browser):
    from playwright.sync_api import expect

    sunday = spring_forward(YEAR)
    monday = sunday - timedelta(days=6)
    # 09:45 Paris time on Monday
    post_id = scheduled(app, "Dragged", datetime.combine(monday, datetime.min.time(), UTC)
                        + timedelta(hours=8, minutes=45))
    # tall enough for the whole week: a drag does not scroll the page under the mouse
    with january_in_chromium(app, browser, "hours@example.com",
                             viewport={"width": 1280, "height": 1600}) as page:
        page.goto(f"/admin/calendar/?view=week&date={monday}")
        target = f'td[data-date="{sunday}"][data-hour="14"]'
        page.drag_and_drop(f"#post-{post_id} a", target)
        expect(page.locator(f"{target} #post-{post_id}")).to_contain_text("14:45",
                                                                         timeout=15_000)
        assert state(app, post_id)[1] == datetime.combine(
            sunday, datetime.min.time(), UTC) + timedelta(hours=12, minutes=45)  # CEST
        # the hour the clocks skip takes no drop: nothing is asked of the server
        skipped = page.locator(f'td[data-date="{sunday}"][data-hour="2"]')
        expect(skipped).to_have_class(re.compile(r"\bskipped\b"))
        page.drag_and_drop(f"#post-{post_id} a", f'td[data-date="{sunday}"][data-hour="2"]')
        page.drag_and_drop(f"#post-{post_id} a", f'td[data-date="{monday}"][data-hour="20"]')
        expect(page.locator(f'td[data-date="{monday}"][data-hour="20"] #post-{post_id}')
               ).to_contain_text("20:45", timeout=15_000)
    assert state(app, post_id)[2] == 3  # two moves, not three
