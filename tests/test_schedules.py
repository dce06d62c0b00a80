"""Next-run computation: every N, cron and once, across DST changes in two zones."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from webapp.plugins.schedules import Schedule, check_cron, real_local
from webapp.timefmt import human

PARIS = ZoneInfo("Europe/Paris")  # 2026: spring forward 29 March, fall back 25 October
NEW_YORK = ZoneInfo("America/New_York")  # 2026: spring forward 8 March, fall back 1 November


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def local(moments: list[datetime], zone: ZoneInfo) -> list[str]:
    return [m.astimezone(zone).strftime("%m-%d %H:%M %Z") for m in moments]


def cron(expr: str, zone: str) -> Schedule:
    return Schedule("cron", zone, cron=expr)


def days(n: int, start: datetime, zone: str) -> Schedule:
    return Schedule("every", zone, every=n, unit="days", start_at=start.astimezone(UTC))


def test_daily_cron_stays_at_nine_local_across_paris_spring_forward():
    slots = cron("0 9 * * *", "Europe/Paris").upcoming(utc(2026, 3, 27, 12), 3)
    assert local(slots, PARIS) == ["03-28 09:00 CET", "03-29 09:00 CEST", "03-30 09:00 CEST"]
    assert slots[1] - slots[0] == timedelta(hours=23)


def test_cron_in_the_paris_spring_forward_gap_runs_at_the_first_real_minute():
    slots = cron("30 2 * * *", "Europe/Paris").upcoming(utc(2026, 3, 27, 12), 3)
    assert local(slots, PARIS) == ["03-28 02:30 CET", "03-29 03:00 CEST", "03-30 02:30 CEST"]


def test_cron_in_the_paris_fall_back_hour_runs_once():
    slots = cron("30 2 * * *", "Europe/Paris").upcoming(utc(2026, 10, 24, 12), 2)
    assert slots == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]
    assert local(slots, PARIS) == ["10-25 02:30 CEST", "10-26 02:30 CET"]


def test_hourly_cron_through_the_new_york_fall_back_hour_runs_every_real_hour():
    slots = cron("0 * * * *", "America/New_York").upcoming(utc(2026, 11, 1, 4, 30), 4)
    assert local(slots, NEW_YORK) == ["11-01 01:00 EDT", "11-01 01:00 EST", "11-01 02:00 EST",
                                      "11-01 03:00 EST"]


def test_daily_cron_across_new_york_spring_forward_and_fall_back():
    spring = cron("30 2 * * *", "America/New_York").upcoming(utc(2026, 3, 7, 12), 3)
    assert local(spring, NEW_YORK) == ["03-08 03:00 EDT", "03-09 02:30 EDT", "03-10 02:30 EDT"]
    fall = cron("30 1 * * *", "America/New_York").upcoming(utc(2026, 10, 31, 12), 2)
    assert local(fall, NEW_YORK) == ["11-01 01:30 EDT", "11-02 01:30 EST"]
    assert fall[1] - fall[0] == timedelta(hours=25)


def test_every_day_keeps_the_wall_clock_time_across_paris_spring_forward_and_fall_back():
    schedule = days(1, datetime(2026, 3, 27, 9, 0, tzinfo=PARIS), "Europe/Paris")
    spring = schedule.upcoming(utc(2026, 3, 27, 12), 3)
    assert local(spring, PARIS) == ["03-28 09:00 CET", "03-29 09:00 CEST", "03-30 09:00 CEST"]
    fall = schedule.upcoming(utc(2026, 10, 24, 12), 2)
    assert local(fall, PARIS) == ["10-25 09:00 CET", "10-26 09:00 CET"]
    assert fall[0] - schedule.latest_at_or_before(fall[0] - timedelta(seconds=1)) == timedelta(
        hours=25)


def test_every_day_in_the_new_york_gap_and_overlap_behaves_like_cron():
    gap = days(1, datetime(2026, 3, 6, 2, 30, tzinfo=NEW_YORK), "America/New_York")
    assert local(gap.upcoming(utc(2026, 3, 7, 12), 2), NEW_YORK) == [
        "03-08 03:00 EDT", "03-09 02:30 EDT"]
    overlap = days(2, datetime(2026, 10, 30, 1, 30, tzinfo=NEW_YORK), "America/New_York")
    assert local(overlap.upcoming(utc(2026, 10, 30, 12), 2), NEW_YORK) == [
        "11-01 01:30 EDT", "11-03 01:30 EST"]


def test_every_n_hours_counts_real_time_across_dst():
    schedule = Schedule("every", "Europe/Paris", every=6, unit="hours",
                        start_at=utc(2026, 3, 28, 0))
    slots = schedule.upcoming(utc(2026, 3, 28, 23), 3)
    assert slots == [utc(2026, 3, 29, 0), utc(2026, 3, 29, 6), utc(2026, 3, 29, 12)]


@pytest.mark.parametrize("schedule", [
    cron("*/20 9-17 * * 1-5", "America/New_York"),
    days(3, datetime(2026, 3, 1, 8, 15, tzinfo=PARIS), "Europe/Paris"),
    Schedule("every", "UTC", every=90, unit="seconds", start_at=utc(2026, 3, 1)),
], ids=["cron", "days", "seconds"])
def test_latest_slot_at_or_before_agrees_with_the_next_slots(schedule):
    slots = schedule.upcoming(utc(2026, 3, 6), 40)
    for before, slot in zip(slots, slots[1:], strict=False):
        assert schedule.latest_at_or_before(slot) == slot
        assert schedule.latest_at_or_before(slot - timedelta(microseconds=1)) == before
        assert schedule.next_after(before) == slot


def test_a_once_timer_has_one_slot():
    once = Schedule("once", "Europe/Paris", run_at=utc(2026, 3, 29, 7))
    assert once.next_after(utc(2026, 3, 29, 6)) == utc(2026, 3, 29, 7)
    assert once.next_after(utc(2026, 3, 29, 7)) is None
    assert once.latest_at_or_before(utc(2026, 3, 29, 8)) == utc(2026, 3, 29, 7)
    assert once.describe() == "once, " + human(utc(2026, 3, 29, 7), "Europe/Paris")
    assert once.describe().startswith("once, Sun 29 Mar") and "09:00 Paris time" in once.describe()


def test_schedules_read_in_words():
    assert cron("0 9 * * 1-5", "Europe/Paris").describe() == (
        "At 09:00 on Monday through Friday, Paris time")
    start = datetime(2026, 3, 1, 7, 30, tzinfo=PARIS)
    assert days(2, start, "Europe/Paris").describe() == "every 2 days at 07:30 Paris time"
    every_minute = Schedule("every", "UTC", every=1, unit="minutes", start_at=utc(2026, 3, 1))
    assert every_minute.describe() == "every minute, from " + human(utc(2026, 3, 1), "UTC")
    assert "00:00 UTC" in every_minute.describe()


@pytest.mark.parametrize("expr", ["61 * * * *", "* * * *", "0 0 30 2 *", "*/0 * * * *",
                                  "0 0 * * * *", "hello"])
def test_invalid_cron_expressions_are_explained(expr: str):
    assert check_cron(expr)


def test_a_skipped_wall_time_moves_to_the_first_real_minute():
    assert real_local(datetime(2026, 3, 29, 2, 30), PARIS).strftime("%H:%M %Z") == "03:00 CEST"
