"""Local times typed in a zone become the right UTC moment, DST gaps and folds included."""

from datetime import UTC, datetime, timedelta

import pytest

from webapp.timezones import (
    TimeInputError,
    format_local,
    input_value,
    parse_local,
    relative,
)


def test_a_tokyo_time_is_nine_hours_ahead_of_utc():
    assert parse_local("2026-03-29T09:30", "Asia/Tokyo") == datetime(2026, 3, 29, 0, 30,
                                                                     tzinfo=UTC)


def test_seconds_from_the_picker_are_kept():
    moment = parse_local("2026-07-01T10:00:05", "America/Los_Angeles")
    assert moment == datetime(2026, 7, 1, 17, 0, 5, tzinfo=UTC)


def test_a_time_skipped_by_daylight_saving_is_refused_with_a_suggestion():
    with pytest.raises(TimeInputError) as refused:
        parse_local("2026-03-29T02:30", "Europe/Paris")
    message = str(refused.value)
    assert "does not exist in Europe/Paris" in message and "03:30" in message


def test_a_time_that_happens_twice_means_the_first_and_shows_which():
    moment = parse_local("2026-10-25 02:30", "Europe/Paris")
    assert moment == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # still CEST (+2)
    assert format_local(moment, "Europe/Paris") == "2026-10-25 02:30 CEST"
    assert format_local(moment + timedelta(hours=1), "Europe/Paris") == "2026-10-25 02:30 CET"


@pytest.mark.parametrize("typed", ["", "tomorrow", "2026-13-01T10:00", "2026-02-30T10:00",
                                   "2026-03-29", "2026-03-29T25:00", "29/03/2026 10:00",
                                   "2026-03-29T10:00+02:00", "0001-01-01T00:00"])
def test_malformed_dates_are_refused_with_a_message(typed):
    with pytest.raises(TimeInputError) as refused:
        parse_local(typed, "UTC")
    assert str(refused.value)


@pytest.mark.parametrize("zone", ["", "Mars/Olympus_Mons", "utc+2", "../../etc/passwd",
                                  "Europe/"])
def test_unknown_zones_are_refused_by_name(zone):
    with pytest.raises(TimeInputError) as refused:
        parse_local("2026-03-29T10:00", zone)
    assert "time zone" in str(refused.value)


def test_a_moment_is_shown_back_in_the_editors_zone():
    moment = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)
    assert format_local(moment, "Asia/Tokyo") == "2026-03-29 09:30 JST"
    assert input_value(moment, "Asia/Tokyo") == "2026-03-29T09:30"
    assert input_value(moment + timedelta(seconds=5), "Asia/Tokyo") == "2026-03-29T09:30:05"
    assert format_local(moment, "") == "2026-03-29 00:30 UTC"  # not chosen yet: UTC


@pytest.mark.parametrize(("delta", "hint"), [
    (timedelta(seconds=8), "in 8 s"),
    (timedelta(minutes=12, seconds=40), "in 12 min"),
    (timedelta(hours=1, minutes=30), "in 1 h 30 min"),
    (-timedelta(hours=3), "3 h ago"),
    (timedelta(days=3, hours=2), "in 3 days"),
    (timedelta(0), "now"),
])
def test_relative_hints_read_naturally(delta, hint):
    now = datetime(2026, 3, 29, 9, 0, tzinfo=UTC)
    assert relative(now + delta, now) == hint


def test_times_read_as_people_write_them_in_the_one_time_helper():
    from datetime import UTC, datetime

    from webapp.timefmt import human, zone_label

    now = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    at = datetime(2026, 12, 1, 9, 13, tzinfo=UTC)
    assert human(at, "Europe/Paris", now) == "Tue 1 Dec, 10:13 Paris time"
    assert human(at.replace(second=30), "UTC", now) == "Tue 1 Dec, 09:13:30 UTC"
    assert human(at.replace(year=2027), "America/Los_Angeles", now) == \
        "Wed 1 Dec 2027, 01:13 Los Angeles time"
    assert zone_label("Etc/UTC") == "UTC" and human(None, "UTC") == ""
    # the night the clocks go back, 02:30 happens twice: each says which it is
    first, second = datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 25, 1, 30,
                                                                       tzinfo=UTC)
    assert human(first, "Europe/Paris", now) == "Sun 25 Oct, 02:30 Paris time (CEST)"
    assert human(second, "Europe/Paris", now) == "Sun 25 Oct, 02:30 Paris time (CET)"
    assert human(second.replace(hour=2), "Europe/Paris", now) == "Sun 25 Oct, 03:30 Paris time"


def test_every_time_tag_says_the_moment_as_people_write_it(app, auth):
    from datetime import UTC, datetime, timedelta

    from tests.harness.support import new_post, text

    at = datetime.now(UTC).replace(microsecond=0, second=0) + timedelta(days=3)
    post_id = new_post(app, "Soon", "scheduled", publish_at=at)
    page = text(auth.client("editor", timezone="Asia/Tokyo").get(f"/admin/posts/{post_id}"))
    from webapp.timefmt import format_local, human, iso

    tokyo = human(at, "Asia/Tokyo")
    shown = f'<time datetime="{iso(at)}" title="{format_local(at, "UTC")}">{tokyo}'
    assert f"Publishes {shown}</time>" in page and "Tokyo time" in page


def test_readers_get_dates_in_the_sites_zone(app):
    from datetime import UTC, datetime

    from webapp.timefmt import reader_date

    with app.app_context():
        assert reader_date(datetime(2026, 12, 1, 23, 30, tzinfo=UTC)) == "1 December 2026"
        app.config["SITE_TIMEZONE"] = "Asia/Tokyo"
        assert reader_date(datetime(2026, 12, 1, 23, 30, tzinfo=UTC)) == "2 December 2026"
