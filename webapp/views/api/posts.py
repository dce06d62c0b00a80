"""Serve the posts endpoints of the JSON API, review's included."""

from flask import current_app, g, jsonify, request, url_for

from ... import posts
from ...models import Post, PostReview
from ...timefmt import iso
from .auth import api_role
from .blueprint import bp
from .errors import ApiError, created, invalid
from .inputs import json_body, page_arg, text_field, time_field

FIELDS = {"title", "body", "slug", "publish_at", "unpublish_at"}
PAGE_SIZE = 50


def post_json(post: Post, body: bool = True) -> dict:
    """Return a post as the API shows it (times in UTC ISO 8601; lists leave the body out)."""
    data = {"id": post.id, "slug": post.slug, "title": post.title,
            "status": post.status, "publish_at": iso(post.publish_at),
            "unpublish_at": iso(post.unpublish_at), "published_at": iso(post.published_at),
            "version": post.version, "created_at": iso(post.created_at),
            "updated_at": iso(post.updated_at),
            "url": url_for("site.post", slug=post.slug, _external=True)
            if post.status == "published" else None}
    if body:
        data["body"] = post.body
    return data


def _refusal(exc: posts.PostError) -> ApiError:
    """Turn a refused change into 404, 409 (the post's state, a freeze) or 422 (a field)."""
    if isinstance(exc, posts.PostNotFound):
        return ApiError(404, "Not found", "No post has that id.")
    if isinstance(exc, posts.NeedsReview):  # the writer's role, or the post waits in review
        return ApiError(403, "Review required", str(exc))
    if isinstance(exc, posts.PublishingFrozen):
        row = exc.freeze
        return ApiError(409, "Publishing is frozen", str(exc), extra={"freeze": {
            "scope": row.scope, "reason": row.reason, "frozen_by": row.frozen_by,
            "frozen_at": iso(row.frozen_at)}})
    fields = {k: v for k, v in exc.errors.items() if k != "form"}
    if isinstance(exc, posts.StalePost) or not fields:
        return ApiError(409, "Conflict", str(exc))
    first = next(iter(fields))
    return ApiError(422, f"Invalid field: {first}",
                    "; ".join(f"{k}: {v}" for k, v in fields.items()), fields=fields)


def _get(post_id: int) -> Post:
    try:
        return posts.get_post(post_id)
    except posts.PostNotFound as exc:
        raise _refusal(exc) from None


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
    return jsonify(post_json(_get(post_id)))


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
        raise _refusal(exc) from None
    return created(post_json(post), url_for("api.get_post", post_id=post.id))


@bp.patch("/posts/<int:post_id>")
@api_role("contributor")
def update_post(post_id: int):
    """Change a post's text and/or schedule; send version to refuse a stale edit (409)."""
    data = json_body(FIELDS | {"version"})
    post = _get(post_id)
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
        raise _refusal(exc) from None
    return jsonify(post_json(_get(post_id)))


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
            posts.review.approve(post_id, _get(post_id).version, None, instance, override)
        else:
            posts.publish_now(post_id, instance, override)
    except posts.PostError as exc:
        raise _refusal(exc) from None
    return jsonify(post_json(_get(post_id)))


# -- review ------------------------------------------------------------------------------

def review_json(row: PostReview) -> dict:
    """Return a post's place in review as the API shows it."""
    return {"post_id": row.post_id, "state": row.state, "author": row.author,
            "submitted_at": iso(row.submitted_at), "reviewer": row.reviewer,
            "reviewed_at": iso(row.reviewed_at), "note": row.note}


def _version(data: dict, post_id: int) -> int:
    """Return the version sent (the post's own when left out: no stale check)."""
    version = data.get("version")
    if version is None:
        return _get(post_id).version
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
        raise _refusal(exc) from None
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
        raise _refusal(exc) from None
    return jsonify(post_json(_get(post_id)))


@bp.post("/posts/<int:post_id>/return")
@api_role("editor")
def return_post(post_id: int):
    """Send a post in review back to its writer with a note; answer its place in review."""
    data = _body({"version", "note"})
    note = text_field(data, "note", required=True)
    try:
        row = posts.review.send_back(post_id, _version(data, post_id), note)
    except posts.PostError as exc:
        raise _refusal(exc) from None
    return jsonify(review_json(row))


