"""The leader view: who leads each key, live, and the ops actions on a leader; the health
probes (/healthz, /readyz)."""

from datetime import datetime

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    jsonify,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue
from flask_login import current_user
from markupsafe import Markup

from ..accounts.security import role_required
from ..accounts.stepup import step_up
from ..db import ping
from ..leadership.status import find_key, shared_snapshot, snapshot
from ..ops import freezes, verdict
from ..ops.budget import fleet_connections
from ..ops.deploys import WINDOW, build_timeline, report
from ..ops.deploys.timeline import Timeline, changes_mark
from ..ops.leaders import OpsError, current_holder, evict, request_step_down
from ..ops.replica import bound
from ..ops.replica import status as replica_status
from ..plugins.purge_sends import health as purge_health
from ..plugins.webhooks import held_for_replica
from ..scheduling import process
from ..site.purgers import configured
from ..timefmt import reader_zone

bp = Blueprint("status", __name__, url_prefix="/status")
health_bp = Blueprint("health", __name__)  # the load balancer's and the platform's probes


@bp.app_template_filter("session_name")
def session_name(name: str | None) -> Markup:
    """Show a lock session's name so a narrow cell breaks it only after a colon, never
    inside "web-2" or the pid (the text copies as it is)."""
    parts = (name or "").split(":")
    inner = Markup(":<wbr>").join(Markup('<span class="nb">{}</span>').format(p) for p in parts)
    return Markup('<span title="{}">{}</span>').format(name or "", inner)

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
    return {"poll_seconds": POLL_SECONDS, "hidden_poll_seconds": HIDDEN_POLL_SECONDS,
            "drawn": _drawn}


def _drawn(tl: Timeline) -> Markup:
    """Return the timeline's drawing, rendered once per timeline and time zone."""
    zone = reader_zone()
    if zone not in tl.drawings:
        tl.drawings[zone] = render_template("status/_timeline.html", tl=tl)
    return Markup(tl.drawings[zone])  # our own template's output, escaped there


@bp.get("/")
@role_required("viewer")
def index():
    """Show the leader view (its live part polls the fragment) and the last 24 hours."""
    snap = snapshot()
    live = _live_context(snap)
    return render_template("status/index.html", snap=snap, **live,
                           windows=report(snap.as_of, timeline=live["tl"]),
                           window_minutes=int(WINDOW.total_seconds() // 60),
                           replica=replica_status(), bound=bound().total_seconds(),
                           held=held_for_replica(snap.as_of),
                           purgers=purge_health(list(configured(current_app.config))))


@bp.get("/live")
def live():
    """Render the live part alone, for htmx to swap in."""
    if not current_user.is_authenticated or not current_user.can("viewer"):
        # a poll after sign-out: send the whole page to sign-in, not a login form into the table
        response = make_response("Sign in again to see the status.", 401)
        response.headers["HX-Redirect"] = url_for("auth.login", next=url_for("status.index"))
        return response
    return _render_live(shared_snapshot())


def _render_live(snap) -> str:
    """Render the fragment once per shared snapshot, role and time zone.

    Every poller of a worker shares the snapshot of the last second; what the fragment
    shows beyond it depends only on whether the viewer is an admin (the action links)
    and on the viewer's time zone. It carries no per-session data (no CSRF token).
    """
    key = (current_user.can("admin"), current_user.timezone)
    found = current_app.extensions.get("soloist_status_html")
    if found is None or found[0] is not snap:
        # a new snapshot starts a new store; the swap is one atomic assignment, no lock
        pages: dict[tuple[bool, str], str] = {}
        found = (snap, pages, _live_context(snap))
        current_app.extensions["soloist_status_html"] = found
    html = found[1].get(key)
    if html is None:
        html = found[1][key] = render_template("status/_live.html", snap=snap, **found[2])
    return html


def _live_context(snap) -> dict:
    """Read what the live part shows beside the snapshot: the verdict's problems, the
    timeline (so a failover shows without a reload) and the connections."""
    found = verdict.problems(snap, freezes.active(), current_app.config["FOLLOWER_POLL_SECONDS"])
    return {"problems": found, "tl": _timeline(snap.as_of), "conns": _connections(snap)}


TIMELINE_REDRAWN_SECONDS = 30  # at most this stale at its right edge when nothing changes


def _timeline(now: datetime) -> Timeline:
    """Return the timeline, built again when leadership or the deploys changed, or when it is
    TIMELINE_REDRAWN_SECONDS old: a day of a flapping fleet is thousands of segments, too
    many to draw on every poll. Its drawing is kept with it, per time zone (timeline_svg)."""
    mark = changes_mark()
    found = current_app.extensions.get("soloist_status_timeline")
    if (found is None or found[0] != mark
            or (now - found[1].until).total_seconds() >= TIMELINE_REDRAWN_SECONDS):
        found = (mark, build_timeline(now))
        current_app.extensions["soloist_status_timeline"] = found
    return found[1]


def _connections(snap) -> dict | None:
    """The server's connections by instance and role (None in SQLite mode)."""
    return None if snap.single_host else fleet_connections(current_app.config)


@bp.route("/<name>/<action>", methods=["GET", "POST"])
@role_required("admin")
@step_up
def act(name: str, action: str) -> ResponseReturnValue:
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


@health_bp.get("/healthz")
def healthz():
    """Answer while the process is up."""
    return jsonify(status="ok")


@health_bp.get("/readyz")
def readyz():
    """Answer 200 when the database is reachable and this process's scheduler runs."""
    problems = [problem] if (problem := ping()) else []
    scheduler = process.current()
    if scheduler is not None:
        problems.extend(scheduler.problems())
    if problems:  # kept by no cache without asking again: the next answer may be 200
        answer = jsonify(status="unavailable", problems=problems)
        return answer, 503, {"Cache-Control": "no-cache"}
    return jsonify(status="ok", scheduler=bool(scheduler and scheduler.alive))
