"""Read a timer from form or JSON data: every field checked, every problem named."""

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..plugins import registry
from ..plugins.base import ValidationError
from ..plugins.schedules import KINDS, UNITS, check_cron
from ..timezones import TimeInputError, in_range, parse_local, zone_names

MISFIRE = {"run_once": "Run once to catch up", "skip": "Skip missed runs"}
MAX_RUNTIME_LIMIT = 24 * 3600
MAX_GRACE = 30 * 86400
MAX_FAILURES_LIMIT = 1000
MAX_PERIOD = timedelta(days=3660)  # every N units: at most about 10 years between runs
MAX_CRON = 120  # the column's length


def zones() -> frozenset[str]:
    """Return the IANA time zone names zoneinfo knows (the house's one list)."""
    return zone_names()


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


def _params(data: Mapping, action, errors: dict) -> dict:
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
        if len(values["cron"]) > MAX_CRON:
            problem = (f"Keep the cron expression to {MAX_CRON} characters (it has "
                       f"{len(values['cron'])}); ranges such as 0-40 shorten lists.")
        if problem:
            errors["cron"] = problem
    else:
        values["run_at"] = _moment(data, "run_at", zone, errors)
        if values["run_at"] is None and "run_at" not in errors:
            errors["run_at"] = "Give the date and time to run at."
    return values


def _zone(data: Mapping, errors: dict) -> str | None:
    zone = _text(data, "timezone") or "UTC"
    if zone not in zones():
        errors["timezone"] = "Unknown time zone; pick one from the list (e.g. Europe/Paris)."
        return None
    return zone


def parse_schedule(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return the schedule's values alone (kind, times, zone); raise ValidationError."""
    errors: dict[str, str] = {}
    zone = _zone(data, errors)
    values = {"timezone": zone, **_schedule(data, zone, errors)}
    if errors:
        raise ValidationError(errors)
    return values


def parse_timer(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return a timer's column values from form or JSON data; raise ValidationError."""
    errors: dict[str, str] = {}
    name = _text(data, "name")
    if not name:
        errors["name"] = "Give the timer a name."
    elif len(name) > 100:
        errors["name"] = f"Keep the name to 100 characters (it has {len(name)})."
    zone = _zone(data, errors)
    found = registry.find_action(_text(data, "action"))
    if found is None:
        errors["action"] = "Unknown action; pick one from the list."
    values: dict[str, Any] = {"name": name, "timezone": zone,
                              "params": _params(data, found and found[1], errors)}
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
    if errors or found is None:
        raise ValidationError(errors)
    values["plugin"], values["action"] = found[0].name, _text(data, "action").split(".", 1)[1]
    return values
