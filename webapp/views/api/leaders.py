"""Serve the leadership endpoint of the JSON API."""

from flask import jsonify

from ...leadership.status import leaders_json, snapshot
from .auth import api_role
from .blueprint import bp


@bp.get("/leaders")
@api_role("viewer")
def leaders():
    """List every key with its holder and standbys."""
    return jsonify(leaders_json(snapshot(history_size=0)))
