"""The signed-in home page: the publication queue, late posts and the publish leader."""

from datetime import datetime

from flask import Blueprint, current_app, g, render_template, url_for

from .. import posts
from ..extensions import db
from ..models import LeaderState
from ..scheduling.keys import PUBLISH
from ..scheduling.work import database_now
from ..security import role_required

bp = Blueprint("dashboard", __name__, url_prefix="/admin")


@bp.get("/")
@role_required("viewer")
def index():
    """Show the publication queue and the leader summary."""
    return render_template("dashboard/index.html", **overview())


@bp.get("/live")
@role_required("viewer")
def live():
    """Render the dashboard's body alone (polled)."""
    return render_template("dashboard/_overview.html", **overview())


def overview() -> dict:
    """Gather what the dashboard shows, all at one database time."""
    now = g.db_now = database_now()
    return {"now": now, "upcoming": posts.upcoming(now), "late": posts.late(now),
            "recent": posts.recently_published(), "leader": leader_summary(now),
            "status_url": url_for("status.index")
            if "status.index" in current_app.view_functions else None}


def leader_summary(now: datetime) -> dict | None:
    """Return the publish leader's holder, term and heartbeat age, or None if none yet."""
    state = db.session.get(LeaderState, PUBLISH.value)
    if state is None or not state.holder:
        return None
    age = (now - state.heartbeat_at).total_seconds() if state.heartbeat_at else None
    stale_after = current_app.config["LEADER_STALE_SECONDS"]
    return {"holder": state.holder, "term": state.term, "age": age,
            "stale": age is None or age > stale_after, "last_result": state.last_result,
            "last_work_at": state.last_work_at}
