"""The audit log (admins only): who changed what, when and from where, with filters."""

from datetime import UTC, date, datetime, time, timedelta

from flask import Blueprint, render_template, request

from ..accounts.security import role_required
from ..ops import audit
from ..timefmt import reader_zone
from ..timezones import MAX_YEAR, MIN_YEAR, OUT_OF_RANGE, zone_or_default

bp = Blueprint("audit", __name__, url_prefix="/admin/audit")

PAGE_SIZE = 50
FORM = ("actor", "action", "from", "to")  # the names GET /api/audit takes too


def _day_start(name: str, form: dict, days_after: int = 0) -> datetime | None:
    """Return the start of the day typed in field name (in the reader's zone) in UTC."""
    text = form[name]
    if not text:
        return None
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise audit.FilterError(name, "Type a date like 2026-11-30.") from None
    if not MIN_YEAR <= day.year <= MAX_YEAR:
        raise audit.FilterError(name, OUT_OF_RANGE)
    midnight = datetime.combine(day + timedelta(days=days_after), time(),
                                tzinfo=zone_or_default(reader_zone()))
    return midnight.astimezone(UTC)


def _filters(form: dict) -> audit.Filters:
    """Read the filters typed in the form: whole days, "to" included."""
    since, until = _day_start("from", form), _day_start("to", form, days_after=1)
    return audit.check_filters(form["actor"], form["action"], since, until)


def _cursor() -> int | None:
    value = request.args.get("before", type=int)
    return value if value is not None and value > 0 else None


@bp.get("/")
@role_required("admin")
def index():
    """List audit events newest first, filtered by who, what and when, a page at a time."""
    form = {name: request.args.get(name, "").strip()[:300] for name in FORM}
    try:
        events, older = audit.list_events(_filters(form), PAGE_SIZE, _cursor())
    except audit.FilterError as exc:
        return render_template("audit/index.html", form=form, errors={exc.field: str(exc)},
                               events=[], older=None, actions=audit.ACTIONS), 422
    return render_template("audit/index.html", form=form, errors={}, events=events,
                           older=older, actions=audit.ACTIONS, lines=audit.detail_lines,
                           paged=_cursor() is not None,
                           query={name: value for name, value in form.items() if value})
