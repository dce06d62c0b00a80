"""The signed-in home page: the publication queue, late posts and the publish leader."""

from flask import Blueprint, current_app, g, render_template, url_for

from .. import posts
from ..accounts.security import role_required
from ..db import database_now
from ..leadership.keys import PUBLISH
from ..leadership.status import leader_summary

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
    return {"now": now, "upcoming": posts.upcoming(now, hours=None, limit=10),
            "late": posts.late(now),
            "recent": posts.recently_published(), "leader": leader_summary(PUBLISH, now),
            "status_url": url_for("status.index")
            if "status.index" in current_app.view_functions else None}
