"""Timers as editors manage them: validate, create, change, pause, resume, run now.

The views and the JSON API both call these; every function commits its own work,
and wakes the plugin leader when a timer may now be due sooner.
"""

import json
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import available_timezones

import sqlalchemy as sa

from ..extensions import db
from ..models import Timer, TimerRun, utcnow
from ..scheduling.work import wake_scheduler
from ..timezones import TimeInputError, in_range, parse_local
from . import registry
from .base import ValidationError
from .schedules import KINDS, UNITS, Schedule, check_cron
from .store import insert_ignoring_conflicts

log = logging.getLogger("soloist.plugins.timers")

MISFIRE = {"run_once": "Run once to catch up", "skip": "Skip missed runs"}
MAX_RUNTIME_LIMIT = 24 * 3600
MAX_GRACE = 30 * 86400
MAX_FAILURES_LIMIT = 1000
MAX_PERIOD = timedelta(days=3660)  # every N units: at most about 10 years between runs


@lru_cache(maxsize=1)
def zones() -> frozenset[str]:
    """Return the IANA time zone names zoneinfo knows."""
    return frozenset(available_timezones())


def _text(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    return "" if value is None else str(value).strip()


def _whole(data: Mapping, name: str, minimum: int, errors: dict, label: str,
           default: int | None = None, maximum: int | None = None) -> int | None:
    raw = _text(data, name)
    if raw == "" and default is not None:
        return default
    try:
        if isinstance(data.get(name), bool):
            raise ValueError
        value = int(raw)
    except ValueError:
        errors[name] = f"{label} must be a whole number."
        return None
    if value < minimum:
        errors[name] = f"{label} must be at least {minimum}."
    elif maximum is not None and value > maximum:
        errors[name] = f"{label} must be at most {maximum}."
    return value


def parse_moment(raw: str, zone: str) -> datetime:
    """Read 'YYYY-MM-DDTHH:MM' as a wall time in zone (or an ISO time with an offset)."""
    moment = datetime.fromisoformat(raw.replace(" ", "T", 1))
    if moment.tzinfo is None:
        # a wall time, read like a post's: a time the clocks skip (DST) is refused
        moment = parse_local(raw, zone)
    return in_range(moment)  # TimeInputError (a ValueError) far from today


def _moment(data: Mapping, name: str, zone: str | None, errors: dict) -> datetime | None:
    raw = _text(data, name)
    if not raw:
        return None
    try:
        return parse_moment(raw, zone or "UTC")
    except TimeInputError as exc:
        errors[name] = str(exc)
    except ValueError:
        errors[name] = "Give a date and time like 2026-03-29 09:00."
    return None


def _params(data: Mapping, action, errors: dict) -> dict:  # noqa: ANN001
    raw = data.get("params") or {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
            errors["params"] = 'Parameters must be a JSON object, like {"limit": 100}.'
            return {}
    if not isinstance(raw, dict):
        errors["params"] = 'Parameters must be a JSON object, like {"limit": 100}.'
        return {}
    if action is None:
        return raw
    try:
        return action.clean(raw)
    except ValidationError as exc:
        errors["params"] = exc.errors["params"][:1].upper() + exc.errors["params"][1:] + "."
        return raw


def _schedule(data: Mapping, zone: str | None, errors: dict) -> dict:
    kind = _text(data, "kind")
    values: dict[str, Any] = {"kind": kind, "every": None, "unit": None, "cron": None,
                              "run_at": None, "start_at": None}
    if kind not in KINDS:
        errors["kind"] = "Pick every, cron or once."
    elif kind == "every":
        values["every"] = _whole(data, "every", 1, errors, "The interval")
        values["unit"] = _text(data, "unit")
        if values["unit"] not in UNITS:
            errors["unit"] = "Pick seconds, minutes, hours or days."
        elif "every" not in errors and (
                values["every"] * UNITS[values["unit"]] > MAX_PERIOD.total_seconds()):
            errors["every"] = f"The interval can be at most {MAX_PERIOD.days} days (10 years)."
        values["start_at"] = _moment(data, "start_at", zone, errors)
    elif kind == "cron":
        values["cron"] = " ".join(_text(data, "cron").split())
        problem = check_cron(values["cron"])
        if problem:
            errors["cron"] = problem
    else:
        values["run_at"] = _moment(data, "run_at", zone, errors)
        if values["run_at"] is None and "run_at" not in errors:
            errors["run_at"] = "Give the date and time to run at."
    return values


def parse_timer(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return a timer's column values from form or JSON data; raise ValidationError."""
    errors: dict[str, str] = {}
    name = _text(data, "name")
    if not name:
        errors["name"] = "Give the timer a name."
    elif len(name) > 100:
        errors["name"] = f"Keep the name to 100 characters (it has {len(name)})."
    zone = _text(data, "timezone") or "UTC"
    if zone not in zones():
        errors["timezone"] = "Unknown time zone; pick one from the list (e.g. Europe/Paris)."
        zone = None
    found = registry.find_action(_text(data, "action"))
    if found is None:
        errors["action"] = "Unknown action; pick one from the list."
    values = {"name": name, "timezone": zone, "params": _params(data, found and found[1], errors)}
    values.update(_schedule(data, zone, errors))
    misfire = _text(data, "misfire") or "run_once"
    if misfire not in MISFIRE:
        errors["misfire"] = "Pick run once to catch up, or skip."
    values.update(
        misfire=misfire,
        grace_seconds=_whole(data, "grace_seconds", 0, errors, "The grace window", 60,
                             MAX_GRACE),
        max_runtime_seconds=_whole(data, "max_runtime_seconds", 1, errors,
                                   "The maximum runtime", 300, MAX_RUNTIME_LIMIT),
        max_failures=_whole(data, "max_failures", 0, errors, "The failure limit", 5,
                            MAX_FAILURES_LIMIT),
    )
    if errors:
        raise ValidationError(errors)
    values["plugin"], values["action"] = found[0].name, _text(data, "action").split(".", 1)[1]
    return values


def _apply(timer: Timer, values: dict, now: datetime) -> None:
    for key, value in values.items():
        setattr(timer, key, value)
    if timer.kind == "every" and timer.start_at is None:
        timer.start_at = now.replace(microsecond=0)
    timer.next_run_at = Schedule.of(timer).next_after(now)


def create_timer(data: Mapping[str, Any], now: datetime | None = None) -> Timer:
    """Validate data and store a new timer; wake the plugin leader."""
    now = now or utcnow()
    values = parse_timer(data)
    _refuse_past_once(values, now)
    timer = Timer(consecutive_failures=0, paused=False, paused_reason="")
    _apply(timer, values, now)
    db.session.add(timer)
    wake_scheduler("plugins")
    db.session.commit()
    return timer


def update_timer(timer: Timer, data: Mapping[str, Any], now: datetime | None = None) -> Timer:
    """Validate data and change timer; the next run is recomputed from its new schedule."""
    now = now or utcnow()
    values = parse_timer(data)
    if timer.default_key and (values["plugin"], values["action"]) != (timer.plugin, timer.action):
        # the plugin finds its own timer by (plugin, default_key): moving it would orphan it
        raise ValidationError({"action": f"This is the {timer.plugin} plugin's own timer, so its "
                                         f"action stays {timer.qualified_action}; create a new "
                                         "timer for another action."})
    if values["run_at"] != timer.run_at:
        _refuse_past_once(values, now)
    _apply(timer, values, now)
    wake_scheduler("plugins")
    db.session.commit()
    return timer


def _refuse_past_once(values: dict, now: datetime) -> None:
    if values["kind"] == "once" and values["run_at"] <= now:
        raise ValidationError({"run_at": "That time has passed; pick a time in the future."})


def list_timers() -> list[tuple[Timer, TimerRun | None]]:
    """Return every timer with its latest finished (or running) run."""
    timers = db.session.scalars(sa.select(Timer).order_by(Timer.plugin, Timer.name)).all()
    latest = (sa.select(sa.func.max(TimerRun.id)).where(TimerRun.status != "queued")
              .group_by(TimerRun.timer_id))
    runs = {r.timer_id: r for r in db.session.scalars(
        sa.select(TimerRun).where(TimerRun.id.in_(latest)))}
    return [(t, runs.get(t.id)) for t in timers]


def history(timer: Timer, limit: int = 50) -> list[TimerRun]:
    """Return a timer's latest runs, newest first."""
    return list(db.session.scalars(
        sa.select(TimerRun).where(TimerRun.timer_id == timer.id)
        .order_by(TimerRun.scheduled_for.desc(), TimerRun.id.desc()).limit(limit)))


def queue_run_now(timer: Timer, now: datetime | None = None) -> TimerRun:
    """Queue a run for the plugin leader (one waiting run per timer at most)."""
    waiting = db.session.scalar(sa.select(TimerRun).where(
        TimerRun.timer_id == timer.id, TimerRun.status == "queued").limit(1))
    if waiting is not None:
        return waiting
    now = now or utcnow()
    for nudge in range(100):  # the slot's time is taken (a scheduled run): a microsecond on
        run_id = db.session.scalar(
            insert_ignoring_conflicts(TimerRun, ["timer_id", "scheduled_for"])
            .values(timer_id=timer.id, scheduled_for=now + timedelta(microseconds=nudge),
                    queued_at=now, trigger="manual", status="queued", result="", error="",
                    instance="")
            .returning(TimerRun.id))
        if run_id is not None:
            break
    wake_scheduler("plugins")
    db.session.commit()
    return db.session.get(TimerRun, run_id)


def pause(timer: Timer, reason: str = "Paused by an editor.") -> None:
    """Stop a timer from running on schedule until it is resumed."""
    timer.paused = True
    timer.paused_reason = reason[:500]
    db.session.commit()


def resume(timer: Timer, now: datetime | None = None) -> None:
    """Run a timer on schedule again, from the next slot after now, with failures forgiven."""
    timer.paused = False
    timer.paused_reason = ""
    timer.consecutive_failures = 0
    timer.next_run_at = Schedule.of(timer).next_after(now or utcnow())
    wake_scheduler("plugins")
    db.session.commit()


def delete_timer(timer: Timer) -> None:
    """Delete a timer and its history (a plugin's own timers can only be paused)."""
    if timer.default_key:
        raise ValidationError({"timer": "A plugin's own timer cannot be deleted; pause it."})
    db.session.delete(timer)
    db.session.commit()


def ensure_default_timers(now: datetime) -> int:
    """Create the default timers loaded plugins ask for and do not have yet; return how many."""
    have = set(db.session.execute(
        sa.select(Timer.plugin, Timer.default_key).where(Timer.default_key.is_not(None))).all())
    rows = []
    for plugin in registry.plugins().values():
        for default in plugin.default_timers:
            if (plugin.name, default.key) in have:
                continue
            try:
                rows.append(_default_row(plugin.name, default, now))
            except Exception:  # one plugin's bad timer must not stop the others
                log.exception("default timer %s of plugin %s is invalid", default.key,
                              plugin.name)
    if rows:
        db.session.execute(insert_ignoring_conflicts(Timer, ["plugin", "default_key"]), rows)
    db.session.commit()
    return len(rows)


def _default_row(plugin: str, default, now: datetime) -> dict:  # noqa: ANN001
    start = now.replace(microsecond=0)
    row = {"name": default.name, "plugin": plugin, "action": default.action,
           "params": dict(default.params), "default_key": default.key,
           "every": None, "unit": None, "cron": None, "run_at": None,
           "start_at": start if default.schedule["kind"] == "every" else None,
           "timezone": default.timezone, "paused": False, "paused_reason": "",
           "misfire": default.misfire, "grace_seconds": default.grace_seconds,
           "max_runtime_seconds": default.max_runtime_seconds, "max_failures": 0,
           "consecutive_failures": 0, "created_at": now, "updated_at": now}
    row.update(default.schedule)
    row["next_run_at"] = Schedule(row["kind"], row["timezone"], row["every"], row["unit"],
                                  row["cron"], None, row["start_at"]).next_after(now)
    return row
