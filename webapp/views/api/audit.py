"""Serve the audit log to admins' tokens: GET /api/audit with the page's filters."""

from typing import TypeVar

from flask import jsonify, request

from ...ops import audit
from .auth import api_role
from .blueprint import bp
from .errors import invalid
from .inputs import time_field

MAX_LIMIT = 200
QUERY = {"actor", "action", "from", "to", "limit", "before"}
D = TypeVar("D", bound=int | None)


def _whole(name: str, default: D, low: int, high: int) -> int | D:
    """Return a whole-number query argument between low and high; 422 naming it otherwise."""
    raw = request.args.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise invalid(name, f"must be a whole number from {low} to {high}")
    return int(raw)


@bp.get("/audit")
@api_role("admin")
def audit_events():
    """List audit events newest first: ?actor=&action=&from=&to=&limit=&before=."""
    for name in request.args:
        if name not in QUERY:
            raise invalid(name, f"unknown query parameter; use {', '.join(sorted(QUERY))}")
    args = request.args.to_dict()
    try:
        filters = audit.check_filters(args.get("actor", ""), args.get("action", ""),
                                      time_field(args, "from"), time_field(args, "to"))
        events, older = audit.list_events(filters, _whole("limit", 50, 1, MAX_LIMIT),
                                          _whole("before", None, 1, 2**63 - 1))
    except audit.FilterError as exc:
        raise invalid(exc.field, str(exc)) from None
    return jsonify(events=[audit.event_json(e) for e in events], next_before=older)
