"""A typed schedule's next runs, each with what a clock change does to it.

The runs are the scheduler's own (Schedule.upcoming, which the plugin leader follows
slot by slot), so the preview cannot promise what will not happen. The notes say why a
run is where it is when the clocks change in the timer's zone, as cron (cronsim) does:

- a cron with fixed minute and hour, or every N days: a wall time the clocks skip runs
  at the first minute after the gap; one that happens twice runs once, the first time;
- a cron with * in its minute or hour follows real time: a skipped wall time does not
  run at all, a repeated one runs both times;
- every N seconds, minutes or hours counts real time: after a change its runs read an
  hour earlier or later on the wall clock;
- once at a repeated wall time means the first.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from cronsim import CronSim

from ..clockchanges import ClockChange, changes_between, clock, utc_offset
from ..plugins.base import ValidationError
from ..plugins.schedules import Schedule
from . import refuse_past_once
from .fields import parse_schedule

COUNT = 5
# what computing a schedule's runs may raise: an unloadable zone (LookupError), a bad cron,
# a date past the calendar's end; the leader then records the timer's schedule invalid
UNCOMPUTABLE = (ValueError, LookupError, TypeError, ArithmeticError)
_TICK = timedelta(microseconds=1)
_LOOK_BACK = timedelta(days=400)  # how far before a run its clock changes are looked for


@dataclass(frozen=True)
class Run:
    """One coming run (aware UTC) and what clock changes do to it."""

    at: datetime
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Preview:
    """The next runs of a schedule, in words and one by one."""

    schedule: Schedule
    runs: list[Run]


PROMPTS = {"every": ("every", "Type the interval to see the next runs."),
           "cron": ("cron", "Type a cron expression to see the next runs."),
           "once": ("run_at", "Pick the date and time to see the run.")}


def prompt(data) -> str | None:
    """Return what to type first when the schedule's own field is still empty, else None."""
    field, words = PROMPTS.get(str(data.get("kind") or "").strip(), (None, None))
    return words if field and not str(data.get(field) or "").strip() else None


def next_runs(data, now: datetime, count: int = COUNT) -> Preview:
    """Return the next runs of the schedule typed in form data; raise ValidationError."""
    values = parse_schedule(data)
    refuse_past_once(values, now)
    if values["kind"] == "every" and values["start_at"] is None:
        values["start_at"] = now.replace(microsecond=0)  # as saving it would
    schedule = Schedule(values["kind"], values["timezone"], values["every"], values["unit"],
                        values["cron"], values["run_at"], values["start_at"])
    try:
        runs = annotate(schedule, now, schedule.upcoming(now, count))
    except UNCOMPUTABLE as exc:  # as the leader would
        raise ValidationError({"kind": f"This schedule cannot be computed ({exc})."}) from None
    return Preview(schedule, runs)


def annotate(schedule: Schedule, since: datetime, slots: list[datetime]) -> list[Run]:
    """Return the slots (coming after since, in order) with their clock-change notes."""
    return [Run(at, tuple(notes(schedule, previous, at)))
            for previous, at in zip([since, *slots], slots, strict=False)]


def notes(schedule: Schedule, previous: datetime, at: datetime) -> list[str]:
    """Say what the clock changes between previous and at (and at itself) do to this run."""
    zone = schedule.zone
    start = max(previous, at - _LOOK_BACK)
    try:
        changes = changes_between(zone, start - timedelta(days=1), at + timedelta(days=1))
    except OverflowError:  # at the calendar's ends: no zone changes there
        return []
    found: list[str | None] = [_repeated(schedule, change, at) for change in changes
                               if change.repeats(at)]
    for change in changes:
        if change.forward and previous < change.at <= at:
            found.append(_skipped(schedule, change, at))
    if _counts_real_time(schedule):
        found.append(_shifted(schedule, at))
    return [note for note in found if note]


def _repeated(schedule: Schedule, change: ClockChange, at: datetime) -> str:
    local = at.astimezone(schedule.zone)
    first = at < change.at
    twin = at - change.shift if first else at + change.shift
    twin_runs = schedule.next_after(twin - _TICK) == twin
    wall = clock(local.replace(tzinfo=None))
    said = f"{_cap(change.headline())}: {wall} happens twice"
    if first:
        return (f"{said}; this is the first ({local.tzname()}), and it runs again at the "
                "second." if twin_runs else
                f"{said}; it runs at the first ({local.tzname()}) only.")
    return (f"{said}; this is the second ({local.tzname()}), after a run at the first."
            if twin_runs else f"{said}; this is the second ({local.tzname()}).")


def _skipped(schedule: Schedule, change: ClockChange, at: datetime) -> str | None:
    """Say which wall times the clocks skip before this run, and what the schedule does."""
    wanted = _wanted_in_gap(schedule, change)
    if not wanted:
        return None
    said = f"{_cap(change.headline())}: {_walls(wanted)} {'does' if len(wanted) == 1 else 'do'}"
    if schedule.kind == "cron" and _follows_real_time(schedule.expression):
        return (f"{said} not exist and {'is' if len(wanted) == 1 else 'are'} not run (a cron "
                "with * in its minute or hour follows real time).")
    if change.at <= at < change.at + timedelta(minutes=1):
        local = at.astimezone(schedule.zone).replace(tzinfo=None)
        once = " once" if len(wanted) > 1 else ""
        return f"{said} not exist, so it runs{once} at {clock(local)} instead."
    return None


def _wanted_in_gap(schedule: Schedule, change: ClockChange) -> list[datetime]:
    """Return the wall times the schedule names inside the skipped gap."""
    if schedule.kind == "every" and schedule.unit == "days":
        start = schedule.start.astimezone(schedule.zone)
        wall = datetime.combine(change.wall_before.date(), start.time().replace(tzinfo=None))
        return [wall] if change.skips(wall) else []
    if schedule.kind != "cron":
        return []
    found: list[datetime] = []
    # naive: cronsim steps through wall times with no zone, so none is skipped
    for wall in CronSim(schedule.expression, change.wall_before - timedelta(seconds=1)):
        if wall >= change.wall_after or len(found) >= 120:
            break
        found.append(wall)
    return found


def _counts_real_time(schedule: Schedule) -> bool:
    return schedule.kind == "every" and schedule.unit != "days"


def _shifted(schedule: Schedule, at: datetime) -> str | None:
    """Say that a real-time schedule's run reads differently after a change since the last."""
    previous = schedule.latest_at_or_before(at - _TICK)
    if previous is None:
        return None
    zone = schedule.zone
    before, now = utc_offset(previous, zone), utc_offset(at, zone)
    period = schedule.period
    if before == now or period <= abs(now - before):
        return None
    changes = changes_between(zone, max(previous, at - _LOOK_BACK), at)
    if not changes:
        return None
    local = at.astimezone(zone).replace(tzinfo=None)
    daily = period % timedelta(days=1) == timedelta(0)
    kept = " (every N days keeps the wall time)" if daily else ""
    return (f"{_cap(changes[-1].headline())} since the previous run: counting real time, "
            f"this runs at {clock(local)}, not {clock(local - (now - before))}{kept}.")


def _follows_real_time(cron: str) -> bool:
    """Return whether cronsim runs this cron on real time (* in its minute or hour field)."""
    minute, hour = cron.split()[:2]
    return minute.startswith("*") or hour.startswith("*")


def _walls(walls: list[datetime]) -> str:
    if len(walls) > 3:
        return f"{clock(walls[0])} to {clock(walls[-1])} ({len(walls)} slots)"
    shown = [clock(wall) for wall in walls]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def _cap(words: str) -> str:
    return words[:1].upper() + words[1:]
