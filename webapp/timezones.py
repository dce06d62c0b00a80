"""Local date-times in a named zone to aware UTC, and back into a datetime-local input.

Editors type wall-clock times in their own zone. A time that does not exist
(skipped when clocks go forward) is refused with a suggestion; a time that
happens twice (when clocks go back) means its first occurrence, and is shown
back with its zone abbreviation so the editor can see which one it is.
"""

import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import TypeGuard
from zoneinfo import ZoneInfo, available_timezones

# showing a time is timefmt's job; format_local and relative stay importable from here
# for tests/test_timezones.py, which checks them next to the parsing they mirror
from .timefmt import ago as relative  # noqa: F401
from .timefmt import format_local, to_local  # noqa: F401

DEFAULT_ZONE = "UTC"
MIN_YEAR, MAX_YEAR = 1970, 9000  # far enough from datetime's limits for any zone's offset
OUT_OF_RANGE = f"That date is out of range; pick a year between {MIN_YEAR} and {MAX_YEAR}."
_LOCAL = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?$")


class TimeInputError(ValueError):
    """A zone or date-time an editor typed cannot be used; the message says why.

    suggestion, when there is one, is a time that works, as a datetime-local value.
    """

    def __init__(self, message: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.suggestion = suggestion


@lru_cache(maxsize=1)
def zone_names() -> frozenset[str]:
    """Return every IANA zone name this system knows.

    "localtime" is no IANA name but the host's own zone (/etc/localtime): chosen for a
    person or the site, each instance of a fleet would read it as its own host's.
    """
    return frozenset(available_timezones()) - HOST_ZONES


HOST_ZONES = frozenset({"localtime"})


def is_zone(name: str | None) -> TypeGuard[str]:
    """Return whether name is a known IANA zone."""
    return bool(name) and name in zone_names()


def get_zone(name: str | None) -> ZoneInfo:
    """Return the zone called name; raise TimeInputError for an unknown one."""
    name = (name or "").strip()
    if not is_zone(name):
        shown = f"“{name[:64]}”" if name else "An empty time zone"
        raise TimeInputError(f"{shown} is not a time zone I know; pick one from the list, "
                             "e.g. Europe/Paris or America/Los_Angeles.")
    return ZoneInfo(name)


def zone_or_default(name: str | None) -> ZoneInfo:
    """Return the zone called name, or UTC when it is unset or unknown (for display)."""
    return ZoneInfo(name) if is_zone(name) else ZoneInfo(DEFAULT_ZONE)


def parse_local(text: str | None, zone_name: str | None) -> datetime:
    """Read a wall-clock date-time typed in zone_name and return it as aware UTC."""
    zone = get_zone(zone_name)
    naive = _parse_naive(text)
    first = naive.replace(tzinfo=zone, fold=0)
    try:
        as_utc = first.astimezone(UTC)
        round_trip = as_utc.astimezone(zone).replace(tzinfo=None)
    except (OverflowError, ValueError):
        raise TimeInputError(OUT_OF_RANGE) from None
    if round_trip != naive:
        raise TimeInputError(
            f"{_show(naive)} does not exist in {zone.key}: the clocks skip it when daylight "
            f"saving time starts. Pick a time outside the gap, e.g. {_show(round_trip)}.",
            suggestion=round_trip.strftime("%Y-%m-%dT%H:%M:%S" if round_trip.second
                                           else "%Y-%m-%dT%H:%M"))
    return as_utc


def _parse_naive(text: str | None) -> datetime:
    text = (text or "").strip()
    if not text:
        raise TimeInputError("Enter a date and time.")
    if not _LOCAL.match(text):
        raise TimeInputError(f"“{text[:40]}” is not a date and time; use the picker or type "
                             "it like 2026-03-29 09:30.")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise TimeInputError(f"“{text}” is not a real date or time.") from None
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        raise TimeInputError(OUT_OF_RANGE)
    return value


def _show(naive: datetime) -> str:
    return naive.strftime("%Y-%m-%d %H:%M:%S" if naive.second else "%Y-%m-%d %H:%M")


def in_range(moment: datetime) -> datetime:
    """Return an aware moment as UTC if its year is within range; raise TimeInputError if not.

    A time near year 9999 (or 1) cannot be shown in every zone, so none is accepted.
    """
    try:
        as_utc = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise TimeInputError(OUT_OF_RANGE) from None
    if not MIN_YEAR <= as_utc.year <= MAX_YEAR:
        raise TimeInputError(OUT_OF_RANGE)
    return as_utc


def input_value(moment: datetime | None, zone_name: str | None) -> str:
    """Return a UTC moment as a datetime-local input value in zone_name."""
    if moment is None:
        return ""
    local = to_local(moment, zone_name).replace(tzinfo=None, microsecond=0)
    return local.strftime("%Y-%m-%dT%H:%M:%S" if local.second else "%Y-%m-%dT%H:%M")
