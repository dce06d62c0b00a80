"""Serve review's endpoints of the JSON API: submit, approve, send back, what waits."""

from flask import current_app, jsonify, request

from ... import posts
from ...models import PostReview
from ...timefmt import iso
from .auth import api_role
from .blueprint import bp
from .errors import invalid
from .inputs import json_body, text_field, time_field
from .postdata import get_or_404, post_json, refusal


def review_json(row: PostReview) -> dict:
    """Return a post's place in review as the API shows it."""
    return {"post_id": row.post_id, "state": row.state, "author": row.author,
            "submitted_at": iso(row.submitted_at), "reviewer": row.reviewer,
            "reviewed_at": iso(row.reviewed_at), "note": row.note}


def _version(data: dict, post_id: int) -> int:
    """Return the version sent (the post's own when left out: no stale check)."""
    version = data.get("version")
    if version is None:
        return get_or_404(post_id).version
    if not isinstance(version, int) or isinstance(version, bool):
        raise invalid("version", "must be a whole number")
    return version


def _body(allowed: set[str]) -> dict:
    return json_body(allowed) if request.get_data(cache=True) else {}


@bp.get("/reviews")
@api_role("editor")
def list_reviews():
    """List the posts waiting for review, first submitted first (100 at most)."""
    return jsonify(reviews=[{**review_json(row), "post": post_json(post, body=False)}
                            for row, post in posts.review.awaiting()])


@bp.post("/posts/<int:post_id>/submit")
@api_role("contributor")
def submit_post(post_id: int):
    """Submit a post for review; answer its place in review."""
    data = _body({"version"})
    try:
        row = posts.review.submit(post_id, _version(data, post_id))
    except posts.PostError as exc:
        raise refusal(exc) from None
    return jsonify(review_json(row))


@bp.post("/posts/<int:post_id>/approve")
@api_role("editor")
def approve_post(post_id: int):
    """Approve a post in review: scheduled for publish_at, or published now without one."""
    data = _body({"version", "publish_at"})
    publish_at = time_field(data, "publish_at")
    try:
        posts.review.approve(post_id, _version(data, post_id), publish_at,
                             current_app.config["INSTANCE_NAME"])
    except posts.PostError as exc:
        raise refusal(exc) from None
    return jsonify(post_json(get_or_404(post_id)))


@bp.post("/posts/<int:post_id>/return")
@api_role("editor")
def return_post(post_id: int):
    """Send a post in review back to its writer with a note; answer its place in review."""
    data = _body({"version", "note"})
    note = text_field(data, "note", required=True)
    try:
        row = posts.review.send_back(post_id, _version(data, post_id), note)
    except posts.PostError as exc:
        raise refusal(exc) from None
    return jsonify(review_json(row))


