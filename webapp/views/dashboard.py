"""The signed-in home page: the publication queue, late posts and the publish leader."""

from flask import Blueprint, current_app, g, render_template, url_for
from flask_login import current_user

from .. import posts
from ..accounts.security import role_required
from ..db import database_now
from ..leadership.keys import PUBLISH
from ..leadership.status import leader_summary
from ..site import setup

bp = Blueprint("dashboard", __name__, url_prefix="/admin")


@bp.get("/")
@role_required("viewer")
def index():
    """Show the publication queue and the leader summary (and an admin's first steps)."""
    steps = first_steps() if current_user.can("admin") else []
    return render_template("dashboard/index.html", first_steps=steps, **overview())


def first_steps() -> list[tuple[str, str, bool]]:
    """Return a new install's checklist, (what, where, done), while any of it is left to do."""
    done = setup.progress()
    steps = [("Name your site", url_for("site_settings.edit"), done["named"]),
             ("Invite an editor", url_for("users.index"), done["invited"]),
             ("Add a webhook", url_for("webhooks.index"), done["hooked"])]
    if all(done for _, _, done in steps):
        return []
    return [*steps, ("See who leads on the status page", url_for("status.index"), False)]


@bp.get("/live")
@role_required("viewer")
def live():
    """Render the dashboard's body alone (polled)."""
    return render_template("dashboard/_overview.html", **overview())


def overview() -> dict:
    """Gather what the dashboard shows, all at one database time."""
    now = g.db_now = database_now()
    return {"now": now, "upcoming": posts.upcoming(now, hours=None, limit=10),
            "changes": posts.upcoming_changes(limit=10),
            "releases": posts.releases.upcoming_releases(limit=5),
            "late": posts.late(now),
            "recent": posts.recently_published(), "leader": leader_summary(PUBLISH, now),
            "status_url": url_for("status.index")
            if "status.index" in current_app.view_functions else None}
