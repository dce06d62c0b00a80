"""Timers' coming runs, day by day, for the editorial calendar.

Each running timer's slots from its stored next run on, computed with its schedule (in
the timer's zone); a day shows the first few of a timer's runs and says when there are
more, so a timer every 5 seconds costs a few steps a day, not 17,280.
"""

from dataclasses import dataclass
from datetime import date, datetime, timedelta

import sqlalchemy as sa

from ..extensions import db
from ..models import Timer
from ..plugins.schedules import Schedule

PER_DAY = 3
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class DayRuns:
    """A timer's runs on one day: the first few, and whether more follow that day."""

    timer: Timer
    times: list[datetime]
    more: bool


def runs_by_day(days: list[tuple[date, datetime, datetime]], now: datetime,
                per_day: int = PER_DAY) -> dict[date, list[DayRuns]]:
    """Return the runs of every unpaused timer on each (day, start, end) from now on."""
    timers = db.session.scalars(
        sa.select(Timer).where(Timer.paused.is_(False), Timer.next_run_at.is_not(None))
        .order_by(Timer.name, Timer.id)).all()
    shown: dict[date, list[DayRuns]] = {}
    for timer in timers:
        schedule, due = Schedule.of(timer), timer.next_run_at or now  # None is left out above
        for day, start, end in days:
            if end <= max(now, due):
                continue
            times = _runs(schedule, max(start, due), end, per_day + 1)
            if times:
                shown.setdefault(day, []).append(
                    DayRuns(timer, times[:per_day], len(times) > per_day))
    return shown


def _runs(schedule: Schedule, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """Return up to limit slots at or after start and before end."""
    found: list[datetime] = []
    while len(found) < limit:
        try:
            current = schedule.next_after(found[-1] if found else start - _TICK)
        except (OverflowError, ValueError):  # past the calendar's end
            break
        if current is None or current >= end:
            break
        found.append(current)
    return found
