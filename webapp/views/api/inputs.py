"""Read an API request's JSON body, fields and query arguments, refusing bad ones by name."""

import json
from datetime import datetime

from flask import request

from ...timezones import MAX_YEAR, MIN_YEAR, TimeInputError, in_range
from .errors import invalid, malformed


def json_body(allowed: set[str]) -> dict:
    """Return the request's JSON object; refuse malformed JSON, bad UTF-8 and unknown fields."""
    try:
        # strict: a lenient decode would store U+FFFD in place of the bytes that were sent
        raw = request.get_data(cache=False).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise malformed(f"The body is not valid UTF-8 (byte {exc.start} cannot start or "
                        "continue a character).") from None
    try:
        data = json.loads(raw) if raw.strip() else None
    except ValueError as exc:
        raise malformed(f"The body is not valid JSON: {exc}") from None
    except RecursionError:
        raise malformed("The body nests arrays or objects too deeply.") from None
    if not isinstance(data, dict):
        raise malformed('The body must be a JSON object, e.g. {"title": "Hello"}.')
    for name, value in data.items():
        if name not in allowed:
            raise invalid(name, f"unknown field; use {', '.join(sorted(allowed))}")
        problem = unstorable(value)
        if problem:
            raise invalid(name, problem)
    return data


def unstorable(value: object) -> str | None:
    """Say why a JSON value holds text no database can store (NUL, lone surrogates), or None."""
    todo = [value]  # a loop, not recursion: JSON may nest deeper than the stack
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, str) and "\x00" in item:
            return "must not contain NUL characters (\\u0000)"
        elif isinstance(item, str) and not _encodable(item):
            return "must be valid Unicode (it has an unpaired surrogate such as \\ud800)"
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def text_field(data: dict, name: str, required: bool = False, default: str = "") -> str:
    """Return a string field; 422 naming it when null, not a string, or missing but required."""
    value = data.get(name)
    if value is None and name in data:
        raise invalid(name, "must be a string, not null (leave the field out instead)")
    if value is None:
        if required:
            raise invalid(name, "required")
        return default
    if not isinstance(value, str):
        raise invalid(name, "must be a string")
    return value


def time_field(data: dict, name: str) -> datetime | None:
    """Return an ISO 8601 time with an offset as aware UTC (None when null or absent)."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(name, "must be an ISO 8601 string such as 2030-01-31T09:00:00+01:00")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise invalid(name, f"{value[:40]!r} is not an ISO 8601 date-time, e.g. "
                            "2030-01-31T09:00:00+01:00") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise invalid(name, "needs a UTC offset (Z or +01:00) so it means one moment")
    try:
        return in_range(moment)
    except TimeInputError:
        raise invalid(name, f"must be between the years {MIN_YEAR} and {MAX_YEAR}") from None


def page_arg() -> int:
    """Return ?page= (1 when absent); 422 when it is not a positive whole number."""
    raw = request.args.get("page", "1")
    # isdigit() alone lets "²" through, which int() then refuses
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 1_000_000:
        raise invalid("page", "must be a whole number from 1 to 1000000")
    return int(raw)
