"""The editorial calendar: month and week pages of posts (and timers' runs); move a post."""

from datetime import date, datetime, time, timedelta

from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for
from flask_login import current_user

from ..accounts.security import role_required
from ..clockchanges import changes_between, clock, span
from ..db import database_now
from ..posts import PostError, PostNotFound, StalePost, calendar, get_post
from ..timefmt import format_local, to_local
from ..timers.upcoming import runs_by_day
from ..timezones import (
    MAX_YEAR,
    MIN_YEAR,
    TimeInputError,
    input_value,
    parse_local,
    zone_or_default,
)

bp = Blueprint("calendar", __name__, url_prefix="/admin/calendar")

STALE = ("Someone else changed this post after you opened the calendar, so nothing changed. "
         "It is shown here as it is now; move it again if you still want to.")


def _zone_name() -> str:
    return current_user.timezone or "UTC"


def _page_args(source, anchor_name: str = "date") -> dict:
    """Read view=, date= and timers= (nonsense falls back to this month, posts only)."""
    view = source.get("view", "")
    try:
        anchor = date.fromisoformat(source.get(anchor_name, ""))
    except ValueError:
        anchor = None
    if anchor is None or not MIN_YEAR <= anchor.year <= MAX_YEAR:
        anchor = to_local(g.db_now, _zone_name()).date()
    return {"view": view if view in calendar.VIEWS else "month", "date": anchor.isoformat(),
            "timers": "1" if source.get("timers") == "1" else ""}


def _context(args: dict, **extra) -> dict:
    """Gather the page: its days, the posts on them and, when asked, timers' runs."""
    zone = zone_or_default(_zone_name())
    days = calendar.span(args["view"], date.fromisoformat(args["date"]), zone)
    runs = runs_by_day(days.bounds(), g.db_now) if args["timers"] else {}
    week = days.view == "week"
    posts = calendar.posts_by_hour(days) if week else calendar.posts_by_day(days)
    move = extra.pop("move", {})
    move["shown"] = any(p.id == move.get("post_id") for day in posts.values()
                        for p in day.posts)
    hours = _week_hours(days, posts) if week else {}
    return {"days": days, "args": args, "posts": posts, "runs": runs, "move": move,
            "changes": calendar.changes_by_day(days),
            "releases": calendar.releases_by_day(days),
            "hours": hours,
            "clock_changes": _clock_changes(days),
            "today": to_local(g.db_now, zone.key).date(), "zone": zone.key,
            "new_at": _new_post_times(days, g.db_now), "link": _link,
            "input_value": input_value, **extra}


def _week_hours(days: calendar.Span, posts: dict) -> dict:
    """Return each day of a week page as its 24 hours, each with its posts (or None)."""
    return {day: [(hour, posts.get((day, hour.hour)))
                  for hour in calendar.day_hours(day, days.zone, g.db_now)]
            for day in days.days}


def _clock_changes(days: calendar.Span) -> dict[date, str]:
    """Return the days the clocks change in the editor's zone, each with what happens."""
    found = {}
    for day, start, end in days.bounds():
        for change in changes_between(days.zone, start, end):
            way = "forward" if change.forward else "back"
            found[day] = f"Clocks go {way} {span(abs(change.shift))} at {clock(change.wall_before)}"
    return found


def _new_post_times(days: calendar.Span, now: datetime) -> dict[date, str]:
    """Return the publish time "new post on this day" offers: 09:00, or today the next hour."""
    local_now = now.astimezone(days.zone)
    next_hour = local_now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    offered = {}
    for day, _start, end in days.bounds():
        at = max(datetime.combine(day, time(9), tzinfo=days.zone), next_hour)
        if at < end:
            offered[day] = input_value(at, days.zone.key)
    return offered


def _link(args: dict, **changes) -> str:
    """Return the calendar's address with args changed (empty values left out)."""
    values = {**args, **changes}
    return url_for("calendar.index", **{k: v for k, v in values.items() if v})


@bp.get("/")
@role_required("editor")
def index():
    """Show a month or a week of scheduled and published posts in the viewer's zone."""
    g.db_now = database_now()
    return render_template("calendar/index.html", **_context(_page_args(request.args)))


def _move_form() -> dict:
    return {name: request.form.get(name, "").strip() for name in ("date", "time", "zone")}


def _refused(args: dict, post_id: int, typed: dict, errors: dict[str, str]):
    """Answer a refused move (422): the calendar with the reason next to the post, as typed."""
    move = {"post_id": post_id, "typed": typed, "error": " ".join(errors.values())}
    template = "calendar/_calendar.html" if request.headers.get("HX-Request") else \
        "calendar/index.html"
    return render_template(template, **_context(args, move=move)), 422


@bp.post("/posts/<int:post_id>/move")
@role_required("editor")
def move(post_id: int):
    """Reschedule a post to the date and time typed, in the viewer's zone."""
    try:
        get_post(post_id)  # no such post: 404, whatever was typed
    except PostNotFound:
        abort(404)
    g.db_now = database_now()
    args = _page_args(request.form, "page")  # date is the day the post moves to
    typed = _move_form()
    try:
        if not typed["date"] or not typed["time"]:
            raise TimeInputError("Enter a date and a time.")
        publish_at = parse_local(f"{typed['date']}T{typed['time']}", typed["zone"])
        post = calendar.move_post(post_id, request.form.get("version", 0, type=int), publish_at)
    except TimeInputError as exc:
        return _refused(args, post_id, typed, {"publish_at": str(exc)})
    except PostNotFound:
        abort(404)
    except StalePost:
        return _refused(args, post_id, {}, {"form": STALE})
    except PostError as exc:
        return _refused(args, post_id, typed, exc.errors)
    done = f"Moved “{post.title}” to {format_local(publish_at, typed['zone'])}."
    if request.headers.get("HX-Request"):
        move = {"post_id": post_id, "done": done}
        return render_template("calendar/_calendar.html", **_context(args, move=move))
    flash(done, "success")
    return redirect(_link(args), code=303)
