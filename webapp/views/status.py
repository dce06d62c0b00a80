"""The leader view: who leads each key, live, and the ops actions on a leader."""

import threading
from datetime import datetime

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user

from ..leader_ops import OpsError, current_holder, evict, request_step_down
from ..security import role_required
from ..status import find_key, shared_snapshot, snapshot
from ..timezones import zone_or_default

bp = Blueprint("status", __name__, url_prefix="/status")

POLL_SECONDS = 2
HIDDEN_POLL_SECONDS = 15
ACTIONS = {
    "step-down": ("Step down", "The holder releases the key at its next check (within a "
                  "second) and a standby takes over through NOTIFY. Use it to move "
                  "leadership off an instance before a deploy or a restart."),
    "evict": ("Evict", "Ends the holder's lock session with pg_terminate_backend, which frees "
              "the key at once. Use it on a stuck holder: its heartbeat is old, or it does "
              "not answer. A healthy process reconnects and becomes a standby."),
}


@bp.context_processor
def _helpers() -> dict:
    return {"local_time": local_time, "duration": duration,
            "poll_seconds": POLL_SECONDS, "hidden_poll_seconds": HIDDEN_POLL_SECONDS}


def local_time(moment: datetime | None, fmt: str = "%Y-%m-%d %H:%M:%S %Z") -> str:
    """Show a UTC time in the signed-in user's zone."""
    if moment is None:
        return "—"
    return moment.astimezone(zone_or_default(current_user.timezone)).strftime(fmt)


def duration(seconds: float | None) -> str:
    """Show a duration short: 850 ms, 12.3 s, 4 min 5 s, 3 h 2 min, 2 d 4 h."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s"


@bp.get("/")
@role_required("viewer")
def index():
    """Show the leader view; its live part polls the fragment."""
    return render_template("status/index.html", snap=snapshot())


@bp.get("/live")
def live():
    """Render the live part alone, for htmx to swap in."""
    if not current_user.is_authenticated or not current_user.can("viewer"):
        # a poll after sign-out: send the whole page to sign-in, not a login form into the table
        response = make_response("Sign in again to see the status.", 401)
        response.headers["HX-Redirect"] = url_for("auth.login", next=url_for("status.index"))
        return response
    return _render_live(shared_snapshot())


_rendered_lock = threading.Lock()


def _render_live(snap) -> str:  # noqa: ANN001
    """Render the fragment once per shared snapshot, role and time zone.

    Every poller of a worker shares the snapshot of the last second; what the fragment
    shows beyond it depends only on whether the viewer is an admin (the action links)
    and on the viewer's time zone. It carries no per-session data (no CSRF token).
    """
    store = current_app.extensions.setdefault("soloist_status_html", {})
    key = (current_user.can("admin"), current_user.timezone)
    with _rendered_lock:
        if store.get("snap") is not snap:
            store.clear()
            store["snap"] = snap
        html = store.get(key)
    if html is None:
        html = render_template("status/_live.html", snap=snap)
        with _rendered_lock:
            if store.get("snap") is snap:
                store[key] = html
    return html


@bp.route("/<name>/<action>", methods=["GET", "POST"])
@role_required("admin")
def act(name: str, action: str) -> Response | str:
    """Confirm (GET) and do (POST) an ops action on a key's leader."""
    key = find_key(name)
    if key is None or action not in ACTIONS:
        abort(404)
    if request.method != "POST":  # GET or HEAD: never a write
        holder = current_holder(key)
        return render_template("status/confirm.html", key=key, action=action,
                               title=ACTIONS[action][0], explain=ACTIONS[action][1],
                               holder=holder, snap=snapshot(history_size=0))
    expected = request.form.get("holder", "")
    todo = request_step_down if action == "step-down" else evict
    try:
        holder = todo(key, expected, current_user.email)
    except OpsError as exc:
        flash(str(exc), "error")
    else:
        done = "asked to step down" if action == "step-down" else "evicted"
        flash(f"{holder} was {done} from the {key.name} key.", "success")
    return redirect(url_for("status.index"), code=303)
