"""Serve the posts endpoints of the JSON API."""

from datetime import datetime

from flask import current_app, jsonify, request, url_for

from ... import posts
from ...models import Post
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
    """Turn a refused change into 404, 409 (the post's state) or 422 (a field)."""
    if isinstance(exc, posts.PostNotFound):
        return ApiError(404, "Not found", "No post has that id.")
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


def _check_times(publish_at: datetime | None, unpublish_at: datetime | None) -> None:
    """Ask the domain's time rule before anything is written; answer with its refusal."""
    try:
        posts.check_times(publish_at, unpublish_at)
    except posts.PostError as exc:
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
@api_role("editor")
def create_post():
    """Create a draft, or a scheduled post when publish_at is given."""
    data = json_body(FIELDS)
    title = text_field(data, "title", required=True)
    body, slug = text_field(data, "body"), text_field(data, "slug")
    publish_at, unpublish_at = time_field(data, "publish_at"), time_field(data, "unpublish_at")
    if unpublish_at is not None and publish_at is None:
        raise invalid("unpublish_at", "needs publish_at (a draft is not published)")
    _check_times(publish_at, unpublish_at)
    try:
        post = posts.create_post(title, slug, body)
        if publish_at is not None:
            post = posts.schedule_post(post.id, post.version, publish_at, unpublish_at)
    except posts.PostError as exc:
        raise _refusal(exc) from None
    return created(post_json(post), url_for("api.get_post", post_id=post.id))


@bp.patch("/posts/<int:post_id>")
@api_role("editor")
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
    try:
        _apply(post, version, _parse_changes(data, post))
    except posts.PostError as exc:
        raise _refusal(exc) from None
    return jsonify(post_json(_get(post_id)))


def _parse_changes(data: dict, post: Post) -> dict:
    """Check every field before anything is written, so a refused change writes nothing."""
    changes = {name: text_field(data, name, required=name == "title")
               for name in ("title", "body", "slug") if name in data}
    for name in ("publish_at", "unpublish_at"):
        if name in data:
            changes[name] = time_field(data, name)
    if "publish_at" in changes:
        _check_publish_change(changes, post)
    elif "unpublish_at" in changes:
        _check_unpublish_change(changes["unpublish_at"], post)
    if {"title", "body", "slug"} & changes.keys():
        posts.check_fields(changes.get("title", post.title), changes.get("slug", post.slug),
                           changes.get("body", post.body))
    return changes


def _check_publish_change(changes: dict, post: Post) -> None:
    """Refuse a new (or cleared) publish time the post cannot take, with its unpublish time."""
    publish_at = changes["publish_at"]
    unpublish_at = changes.get("unpublish_at", post.unpublish_at)
    if publish_at is None:
        if changes.get("unpublish_at") is not None:
            raise invalid("unpublish_at", "needs a publish time, and publish_at clears it")
        return
    if post.status == "published":
        raise invalid("publish_at", "the post is published already")
    _check_times(publish_at, unpublish_at)  # a kept unpublish time must still follow it


def _check_unpublish_change(unpublish_at: datetime | None, post: Post) -> None:
    """Refuse an unpublish time the post's status or publish time does not allow."""
    if unpublish_at is None:
        return  # clearing it is always possible (a draft has none to clear)
    if post.status in ("draft", "unpublished"):
        raise invalid("unpublish_at", f"needs a publish time: the post is {post.status}, so "
                                      "send publish_at too")
    _check_times(None, unpublish_at)
    if post.status == "scheduled" and post.publish_at and unpublish_at <= post.publish_at:
        raise invalid("unpublish_at", "must come after the post's publish time "
                                      f"({iso(post.publish_at)})")


def _apply(post: Post, version: int, changes: dict) -> None:
    """Write the checked changes: the text first, then the schedule."""
    if {"title", "body", "slug"} & changes.keys():
        post = posts.update_post(post.id, version, None, changes.get("title", post.title),
                                 changes.get("slug", post.slug), changes.get("body", post.body))
        version = post.version
    if changes.get("publish_at") is not None:
        posts.schedule_post(post.id, version, changes["publish_at"],
                            changes.get("unpublish_at", post.unpublish_at))
    elif "publish_at" in changes:
        if post.status == "scheduled":
            posts.unschedule_post(post.id)
    elif "unpublish_at" in changes:
        if post.status == "published":
            posts.set_unpublish_time(post.id, version, changes["unpublish_at"])
        elif post.status == "scheduled":
            posts.schedule_post(post.id, version, post.publish_at, changes["unpublish_at"])


@bp.post("/posts/<int:post_id>/publish")
@api_role("editor")
def publish_post(post_id: int):
    """Publish a post now (its outbox row in the same transaction)."""
    try:
        posts.publish_now(post_id, current_app.config["INSTANCE_NAME"])
    except posts.PostError as exc:
        raise _refusal(exc) from None
    return jsonify(post_json(_get(post_id)))
