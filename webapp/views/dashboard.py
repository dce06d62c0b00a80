"""The signed-in home page."""

from flask import Blueprint, render_template

from ..security import role_required

bp = Blueprint("dashboard", __name__, url_prefix="/admin")


@bp.get("/")
@role_required("viewer")
def index():
    """Show the publication queue and the leader summary."""
    return render_template("dashboard/index.html")
