"""Serve the posts endpoints of the JSON API."""

from flask import current_app, g, jsonify, request, url_for

from ... import posts
from ...models import Post
from .auth import api_role
from .blueprint import bp
from .errors import ApiError, created, invalid
from .inputs import json_body, page_arg, text_field, time_field
from .postdata import get_or_404, post_json, refusal

FIELDS = {"title", "body", "slug", "publish_at", "unpublish_at"}
PAGE_SIZE = 50


@bp.get("/posts")
@api_role("viewer")
def list_posts():
    """List posts, newest first, optionally of one status, PAGE_SIZE a page."""
    status = request.args.get("status")
    if status is not None and status not in Post.STATUSES:
        raise invalid("status", f"must be one of {', '.join(Post.STATUSES)}")
    page = page_arg()
    found = posts.api_page(status, page, PAGE_SIZE)
    return jsonify(posts=[post_json(p, body=False) for p in found[:PAGE_SIZE]], page=page,
                   per_page=PAGE_SIZE, has_next=len(found) > PAGE_SIZE)


@bp.get("/posts/<int:post_id>")
@api_role("viewer")
def get_post(post_id: int):
    """Show one post."""
    return jsonify(post_json(get_or_404(post_id)))


@bp.post("/posts")
@api_role("contributor")
def create_post():
    """Create a draft, or a scheduled post when publish_at is given."""
    data = json_body(FIELDS)
    title = text_field(data, "title", required=True)
    body, slug = text_field(data, "body"), text_field(data, "slug")
    publish_at, unpublish_at = time_field(data, "publish_at"), time_field(data, "unpublish_at")
    if unpublish_at is not None and publish_at is None:
        raise invalid("unpublish_at", "needs publish_at (a draft is not published)")
    try:  # checks the text and the times together: a refusal names every bad field
        post = posts.create_post(title, slug, body, publish_at, unpublish_at)
    except posts.PostError as exc:
        raise refusal(exc) from None
    return created(post_json(post), url_for("api.get_post", post_id=post.id))


@bp.patch("/posts/<int:post_id>")
@api_role("contributor")
def update_post(post_id: int):
    """Change a post's text and/or schedule; send version to refuse a stale edit (409)."""
    data = json_body(FIELDS | {"version"})
    post = get_or_404(post_id)
    version = data.get("version", post.version)
    if not isinstance(version, int) or isinstance(version, bool):
        raise invalid("version", "must be a whole number")
    if version != post.version:
        raise ApiError(409, "Conflict", f"The post is at version {post.version}, not {version}: "
                                        "someone changed it; read it again.")
    text, times = _parse_changes(data, post)
    try:
        posts.change_post(post.id, version, text, times)
    except posts.PostError as exc:
        raise refusal(exc) from None
    return jsonify(post_json(get_or_404(post_id)))


def _parse_changes(data: dict, post: Post) -> tuple[posts.TypedText | None, dict]:
    """Read the text and times sent, by type; the domain checks the rest in one transaction."""
    sent = {name: text_field(data, name, required=name == "title")
            for name in ("title", "body", "slug") if name in data}
    text = posts.TypedText(sent.get("title", post.title), sent.get("slug", post.slug),
                           sent.get("body", post.body), post.version) if sent else None
    times = {name: time_field(data, name) for name in ("publish_at", "unpublish_at")
             if name in data}
    return text, times


@bp.post("/posts/<int:post_id>/publish")
@api_role("editor")
def publish_post(post_id: int):
    """Publish a post now (its outbox row in the same transaction); 409 while frozen.

    An admin may send {"override_freeze": true} to publish through a freeze (audited). A
    post waiting in review is approved by it (as approve_post without a time).
    """
    data = json_body({"override_freeze"}) if request.get_data(cache=True) else {}
    override = data.get("override_freeze", False)
    if not isinstance(override, bool):
        raise invalid("override_freeze", "must be true or false")
    if override and not g.api_user.can("admin"):
        raise ApiError(403, "Forbidden", "Only an admin may override a freeze.")
    instance = current_app.config["INSTANCE_NAME"]
    try:
        if posts.review.waiting(post_id):
            posts.review.approve(post_id, get_or_404(post_id).version, None, instance,
                                 override)
        else:
            posts.publish_now(post_id, instance, override)
    except posts.PostError as exc:
        raise refusal(exc) from None
    return jsonify(post_json(get_or_404(post_id)))
