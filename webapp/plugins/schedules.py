"""Timer schedules: every N units, 5-field cron, once at; next runs in the timer's zone.

Every N seconds, minutes or hours counts real elapsed time from the start. Every
N days keeps the wall-clock time of the start in the timer's zone, so it stays
at 09:00 across DST changes: a start time the clocks skip runs at the first minute
that exists, and one that happens twice runs once, the first time. Cron does the
same (cronsim, Debian semantics) when its minute and hour fields are fixed; a cron
with * in its minute or hour follows real time instead: a skipped wall time does
not run at all and a repeated one runs both times. webapp.timers.preview says so
run by run.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TypeVar
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from .. import timefmt

UNITS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}
KINDS = ("every", "cron", "once")
_MAX_STEPS = 10
T = TypeVar("T")


@dataclass(frozen=True)
class Schedule:
    """When a timer is due; every answer is an aware UTC datetime."""

    kind: str
    timezone: str = "UTC"
    every: int | None = None
    unit: str | None = None
    cron: str | None = None
    run_at: datetime | None = None
    start_at: datetime | None = None

    @classmethod
    def of(cls, timer) -> "Schedule":
        """Return the schedule of a Timer row."""
        return cls(timer.kind, timer.timezone, timer.every, timer.unit, timer.cron,
                   timer.run_at, timer.start_at)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    # the fields its kind needs: a row without one has a schedule that cannot be computed
    @property
    def once_at(self) -> datetime:
        return _needed(self.run_at, "run_at")

    @property
    def start(self) -> datetime:
        return _needed(self.start_at, "start_at")

    @property
    def expression(self) -> str:
        return _needed(self.cron, "cron")

    @property
    def step(self) -> int:
        return _needed(self.every, "every")

    @property
    def period(self) -> timedelta:
        """Return the time between two slots of every N seconds, minutes or hours."""
        return timedelta(seconds=self.step * UNITS[_needed(self.unit, "unit")])

    def next_after(self, t: datetime) -> datetime | None:
        """Return the first slot strictly after t (None when there is none)."""
        if self.kind == "once":
            return self.once_at if self.once_at > t else None
        if self.kind == "cron":
            return self._cron_after(t)
        if self.unit == "days":
            return self._day_after(t)
        return self._elapsed_after(t)

    def latest_at_or_before(self, t: datetime) -> datetime | None:
        """Return the last slot at or before t (None when there is none)."""
        if self.kind == "once":
            return self.once_at if self.once_at <= t else None
        if self.kind == "cron":
            return self._cron_before(t)
        if self.unit == "days":
            return self._day_before(t)
        return self._elapsed_before(t)

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        """Return up to count slots after the given time."""
        slots: list[datetime] = []
        while len(slots) < count:
            try:
                found = self.next_after(slots[-1] if slots else after)
            except OverflowError:  # the calendar ends (year 9999) before the next slot
                break
            if found is None:
                break
            slots.append(found)
        return slots

    # every N seconds/minutes/hours: real elapsed time from start_at
    def _elapsed_after(self, t: datetime) -> datetime:
        if t < self.start:
            return self.start
        return self.start + ((t - self.start) // self.period + 1) * self.period

    def _elapsed_before(self, t: datetime) -> datetime | None:
        if t < self.start:
            return None
        return self.start + ((t - self.start) // self.period) * self.period

    # every N days: the start's wall-clock time in the timer's zone
    def _day_slot(self, k: int) -> datetime:
        local = self.start.astimezone(self.zone)
        day = local.date() + timedelta(days=k * self.step)
        return real_local(datetime.combine(day, local.time()), self.zone).astimezone(UTC)

    def _day_index(self, t: datetime) -> int:
        start_day: date = self.start.astimezone(self.zone).date()
        return (t.astimezone(self.zone).date() - start_day).days // self.step

    def _day_after(self, t: datetime) -> datetime:
        k = max(0, self._day_index(t) - 1)
        while self._day_slot(k) <= t:
            k += 1
        return self._day_slot(k)

    def _day_before(self, t: datetime) -> datetime | None:
        k = self._day_index(t) + 1
        while k >= 0 and self._day_slot(k) > t:
            k -= 1
        return self._day_slot(k) if k >= 0 else None

    # cron in the timer's zone (cronsim handles the DST edge cases like Debian cron)
    def _cron_after(self, t: datetime) -> datetime | None:
        it = CronSim(self.expression, t.astimezone(self.zone))
        for _ in range(_MAX_STEPS):
            found = _next(it)
            if found is None or found > t:
                return found
        return None

    def _cron_before(self, t: datetime) -> datetime | None:
        start = t.replace(microsecond=0) + timedelta(seconds=1)
        it = CronSim(self.expression, start.astimezone(self.zone), reverse=True)
        for _ in range(_MAX_STEPS):
            found = _next(it)
            if found is None or found <= t:
                return found
        return None

    def describe(self) -> str:
        """Return the schedule in words."""
        zone = self.timezone
        human, zone_label = timefmt.human, timefmt.zone_label
        if self.kind == "once":
            return f"once, {human(self.once_at, zone)}"
        if self.kind == "cron":
            return f"{explain_cron(self.expression)}, {zone_label(zone)}"
        unit = _needed(self.unit, "unit")
        words = f"every {unit[:-1]}" if self.step == 1 else f"every {self.step} {unit}"
        if self.unit == "days":
            at = self.start.astimezone(self.zone).strftime("%H:%M")
            return f"{words} at {at} {zone_label(zone)}"
        shown = human(self.start, zone)
        named = zone_label(zone)
        return f"{words}, from {shown}" + (f" ({named})" if named not in shown else "")


def _needed(value: T | None, field: str) -> T:
    if value is None:
        raise ValueError(f"the schedule has no {field}")
    return value


def _next(it: CronSim) -> datetime | None:
    try:
        return next(it).astimezone(UTC)
    except StopIteration:
        return None


def real_local(naive: datetime, zone: ZoneInfo) -> datetime:
    """Attach zone to a wall time; a time skipped by DST moves to the first real minute."""
    for _ in range(24 * 60):
        aware = naive.replace(tzinfo=zone, fold=0)
        if aware == aware.astimezone(UTC).astimezone(zone):  # same zone: compares wall times
            return aware
        naive += timedelta(minutes=1)
    raise ValueError(f"no real time near {naive} in {zone}")


def explain_cron(expr: str) -> str:
    """Return a cron expression in words, or the expression when it cannot be explained."""
    try:
        return CronSim(expr, datetime.now(UTC)).explain()
    except (CronSimError, ValueError, KeyError, IndexError):
        return f"cron {expr}"


def check_cron(expr: str) -> str | None:
    """Return why a 5-field cron expression is invalid, or None when it is fine."""
    if len(expr.split()) != 5:
        return "Give 5 fields: minute hour day-of-month month day-of-week (e.g. */15 * * * *)."
    try:
        it = CronSim(expr, datetime.now(UTC))
        next(it)
    except CronSimError as exc:
        return f"Invalid cron expression: {exc}."
    except StopIteration:
        return "This cron expression never matches a date."
    except (ValueError, KeyError, IndexError):
        return "Invalid cron expression."
    return None
