"""Timers: list, detail with history, create, edit, run now, pause, resume, delete."""

import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_login import current_user

from .. import timers
from ..accounts.security import role_required
from ..db import database_now, parse_identity_parts
from ..extensions import db
from ..models import Timer
from ..plugins import registry
from ..plugins.base import ValidationError
from ..plugins.schedules import UNITS, Schedule
from ..timefmt import to_local
from ..timers import access, preview
from .errors import render_error

bp = Blueprint("timers", __name__, url_prefix="/admin/timers")
TICK = timedelta(microseconds=1)

FIELDS = ("name", "action", "params", "kind", "every", "unit", "cron", "run_at", "start_at",
          "timezone", "misfire", "grace_seconds", "max_runtime_seconds", "max_failures")


def user_zone() -> str:
    """Return the signed-in user's time zone (UTC if it is unknown)."""
    zone = getattr(current_user, "timezone", "") or "UTC"
    return zone if zone in timers.zones() else "UTC"


@bp.app_template_filter("timer_schedule")
def timer_schedule(timer: Timer) -> str:
    """Return a timer's schedule in words."""
    try:
        return Schedule.of(timer).describe()
    except (ValueError, TypeError, KeyError):
        return "invalid schedule"


@bp.app_template_filter("ran_on")
def ran_on(holder: str) -> str:
    """Name the instance a run ran on (web.1), not its process's whole identity."""
    found = parse_identity_parts(holder)
    return found.instance if found else (holder or "—")


@bp.app_template_filter("from_json")
def from_json(text: str) -> dict:
    """Read a parameters box's JSON object for the fields ({} when it is not one)."""
    try:
        found = json.loads(text or "{}")
    except (ValueError, RecursionError):  # hostile nesting is refused by the form, not here
        return {}
    return found if isinstance(found, dict) else {}


@bp.app_template_filter("weekday")
def weekday(moment: datetime, zone: str) -> str:
    """Return the day of the week of a moment in zone (Sun)."""
    return to_local(moment, zone).strftime("%a")


def _timer_or_404(timer_id: int) -> Timer:
    timer = db.session.get(Timer, timer_id)
    if timer is None:
        abort(404)
    return timer


class Refused(Exception):
    """The signed-in user may not touch this plugin's timers (answered 403 with why)."""


@bp.errorhandler(Refused)
def refused(exc: Refused):
    """Answer a refused change with a 403 page saying why."""
    return render_error(403, str(exc))


def _check_may_change(plugin: str) -> None:
    if not access.may_change(current_user, plugin):
        raise Refused(access.refusal(plugin))


def _changeable(timer_id: int) -> Timer:
    timer = _timer_or_404(timer_id)
    _check_may_change(timer.plugin)
    return timer


@bp.app_template_global("may_change_timer")
def may_change_timer(timer: Timer) -> bool:
    """Return whether the signed-in user may change, run or pause timer (controls shown)."""
    return access.may_change(current_user, timer.plugin)


def _state(timer: Timer, enabled: set[str], loaded: set[str]) -> tuple[str, str]:
    if timer.plugin not in loaded:
        return "broken", f"Plugin {timer.plugin} is not loaded."
    if timer.plugin not in enabled:
        return "paused", f"Plugin {timer.plugin} is switched off."
    if timer.paused:
        return "paused", timer.paused_reason
    if timer.next_run_at is None:
        return "done", "Ran its only slot."
    return "scheduled", ""


@bp.get("/")
@role_required("editor")
def index():
    """List timers: schedule in words, next run in the editor's zone, last result."""
    now = database_now()  # first: on PostgreSQL it ends the transaction it reads in
    enabled, loaded = set(registry.enabled_plugins()), set(registry.plugins())
    rows = [(t, run, _state(t, enabled, loaded), _coming(t, now, 1))
            for t, run in timers.list_timers()]
    return render_template("timers/index.html", rows=rows, zone=user_zone())


def _coming(timer: Timer, now: datetime, count: int) -> list[preview.Run]:
    """Return the timer's next count runs with what clock changes do to each.

    Empty for a schedule that cannot be computed (its zone gone from this host's tzdata,
    say): the page still shows the timer, without its runs.
    """
    if timer.next_run_at is None:
        return []
    try:
        schedule = Schedule.of(timer)
        slots = [timer.next_run_at, *schedule.upcoming(timer.next_run_at, count - 1)]
        return preview.annotate(schedule, min(now, timer.next_run_at - TICK), slots)
    except preview.UNCOMPUTABLE:
        return []


PARAM_FIELD = "param:"  # param:<action>:<name>, one field per parameter of each action


def _posted_form() -> dict:
    """Return the timer form as posted; the chosen action's parameter fields, when the page
    sent them, make its parameters (the JSON box under "Advanced" is for anything else)."""
    form = {name: request.form.get(name, "") for name in FIELDS}
    prefix = f"{PARAM_FIELD}{form['action']}:"
    fields = {key[len(prefix):]: value for key, value in request.form.items()
              if key.startswith(prefix) and value.strip() != ""}
    if any(key.startswith(prefix) for key in request.form):
        form["params"] = json.dumps(fields)
    return form


def _form_of(timer: Timer) -> dict:
    def local(moment: datetime | None) -> str:
        return moment.astimezone(ZoneInfo(timer.timezone)).strftime("%Y-%m-%dT%H:%M") if (
            moment) else ""

    return {"name": timer.name, "action": timer.qualified_action,
            "params": json.dumps(timer.params or {}), "kind": timer.kind,
            "every": timer.every or "", "unit": timer.unit or "minutes", "cron": timer.cron or "",
            "run_at": local(timer.run_at), "start_at": local(timer.start_at),
            "timezone": timer.timezone, "misfire": timer.misfire,
            "grace_seconds": timer.grace_seconds,
            "max_runtime_seconds": timer.max_runtime_seconds, "max_failures": timer.max_failures}


def _render_form(form: dict, errors: dict, timer: Timer | None = None, status: int = 200):
    actions = [(qualified, action) for qualified, action in registry.action_choices()
               if access.may_change(current_user, access.plugin_of(qualified))]
    return render_template("timers/form.html", form=form, errors=errors, timer=timer,
                           actions=actions, units=UNITS,
                           misfire=timers.MISFIRE, zones=sorted(timers.zones())), status


@bp.route("/new", methods=["GET", "POST"])
@role_required("editor")
def create():
    """Show the new-timer form; create the timer on POST."""
    if request.method != "POST":  # GET or HEAD: never a write
        blank = {"kind": "every", "every": "", "unit": "minutes", "timezone": user_zone(),
                 "misfire": "run_once", "grace_seconds": 60, "max_runtime_seconds": 300,
                 "max_failures": 5, "params": "{}"}
        return _render_form(blank, {})
    form = _posted_form()
    _check_may_change(access.plugin_of(form["action"]))
    try:
        timer = timers.create_timer(form)
    except ValidationError as exc:
        db.session.rollback()
        return _render_form(form, exc.errors, status=422)
    flash(f"Timer “{timer.name}” created.", "success")
    return redirect(url_for("timers.detail", timer_id=timer.id), code=303)


@bp.get("/next-runs")
@role_required("editor")
def next_runs():
    """Preview the next runs of the schedule typed in the form (its fields in the query)."""
    if words := preview.prompt(request.args):  # not typed yet: not an error
        return render_template("timers/_next_runs.html", prompt=words, errors={})
    try:
        found = preview.next_runs(request.args, database_now())
    except ValidationError as exc:
        # 422 like the form; soloist.js swaps it into [data-swap-invalid] targets
        return render_template("timers/_next_runs.html", errors=exc.errors), 422
    return render_template("timers/_next_runs.html", preview=found, errors={},
                           zone=user_zone())


@bp.route("/<int:timer_id>/edit", methods=["GET", "POST"])
@role_required("editor")
def edit(timer_id: int):
    """Show a timer's form; save the changes on POST."""
    timer = _changeable(timer_id)
    if request.method != "POST":  # GET or HEAD: never a write
        return _render_form(_form_of(timer), {}, timer)
    form = _posted_form()
    _check_may_change(access.plugin_of(form["action"]))
    try:
        timers.update_timer(timer, form)
    except ValidationError as exc:
        db.session.rollback()
        return _render_form(form, exc.errors, timer, 422)
    flash("Timer saved; its next run follows the new schedule.", "success")
    return redirect(url_for("timers.detail", timer_id=timer.id), code=303)


@bp.get("/<int:timer_id>")
@role_required("editor")
def detail(timer_id: int):
    """Show one timer, its next slots and its run history."""
    now = database_now()  # first: on PostgreSQL it ends the transaction that loads the timer
    timer = _timer_or_404(timer_id)
    enabled, loaded = set(registry.enabled_plugins()), set(registry.plugins())
    return render_template("timers/detail.html", timer=timer, runs=timers.history(timer),
                           state=_state(timer, enabled, loaded),
                           upcoming=_coming(timer, now, preview.COUNT),
                           zone=user_zone())


@bp.get("/<int:timer_id>/runs")
@role_required("editor")
def runs(timer_id: int):
    """Return the run history fragment (polled by the detail page)."""
    timer = _timer_or_404(timer_id)
    return render_template("timers/_runs.html", timer=timer, runs=timers.history(timer),
                           zone=user_zone())


@bp.post("/<int:timer_id>/run")
@role_required("editor")
def run_now(timer_id: int):
    """Queue a run for the plugin leader."""
    timers.queue_run_now(_changeable(timer_id))
    flash("Run queued; the plugin scheduler starts it in a moment.", "success")
    return redirect(url_for("timers.detail", timer_id=timer_id), code=303)


@bp.post("/<int:timer_id>/pause")
@role_required("editor")
def pause(timer_id: int):
    """Pause a timer."""
    timers.pause(_changeable(timer_id), f"Paused by {current_user.email}.")
    flash("Timer paused.", "success")
    return redirect(request.form.get("back") == "index" and url_for("timers.index")
                    or url_for("timers.detail", timer_id=timer_id), code=303)


@bp.post("/<int:timer_id>/resume")
@role_required("editor")
def resume(timer_id: int):
    """Resume a paused timer from its next slot."""
    timers.resume(_changeable(timer_id))
    flash("Timer resumed.", "success")
    return redirect(request.form.get("back") == "index" and url_for("timers.index")
                    or url_for("timers.detail", timer_id=timer_id), code=303)


@bp.post("/<int:timer_id>/delete")
@role_required("editor")
def delete(timer_id: int):
    """Delete a timer (not a plugin's own)."""
    timer = _changeable(timer_id)
    try:
        timers.delete_timer(timer)
    except ValidationError as exc:
        flash(exc.errors["timer"], "error")
        return redirect(url_for("timers.detail", timer_id=timer_id), code=303)
    flash("Timer deleted.", "success")
    return redirect(url_for("timers.index"), code=303)
