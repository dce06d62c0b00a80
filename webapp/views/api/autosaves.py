"""Serve a post's autosave in the JSON API: the token user's unsaved text beside the post."""

from flask import g, jsonify

from ...models import Post, PostAutosave
from ...posts import PostError, PostNotFound, autosaves, content_digest, get_post
from ...timefmt import iso
from .auth import api_role
from .blueprint import bp
from .errors import ApiError, invalid
from .inputs import json_body, text_field

FIELDS = {"title", "slug", "body", "version"}


def _get(post_id: int) -> Post:
    try:
        return get_post(post_id)
    except PostNotFound:
        raise ApiError(404, "Not found", "No post has that id.") from None


def autosave_json(row: PostAutosave, post: Post) -> dict:
    """Return an autosave as the API shows it."""
    return {"post_id": post.id, "title": row.title, "slug": row.slug, "body": row.body,
            "base_version": row.base_version, "saved_at": iso(row.saved_at),
            "based_on_older_version": row.base_digest != content_digest(
                post.title, post.slug, post.body)}


@bp.get("/posts/<int:post_id>/autosave")
@api_role("contributor")
def get_autosave(post_id: int):
    """Show the token user's unsaved text of a post (404 when there is none)."""
    post = _get(post_id)
    row = autosaves.find(g.api_user.id, post.id)
    if row is None:
        raise ApiError(404, "Not found", "You have no unsaved text for this post.")
    return jsonify(autosave_json(row, post))


@bp.put("/posts/<int:post_id>/autosave")
@api_role("contributor")
def put_autosave(post_id: int):
    """Keep unsaved text for a post, typed on version (never a version of the post itself)."""
    data = json_body(FIELDS)
    post = _get(post_id)
    version = data.get("version", post.version)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= \
            post.version:
        raise invalid("version", f"must be a version the post has had, 1 to {post.version}")
    typed = autosaves.Typed(**{name: text_field(data, name, default=getattr(post, name))
                               for name in ("title", "slug", "body")})
    digest = content_digest(post.title, post.slug, post.body) if version == post.version else ""
    try:
        row = autosaves.keep(g.api_user.id, post.id, typed, version, digest)
    except PostError as exc:
        first = next(iter(exc.errors))
        raise ApiError(422, f"Invalid field: {first}", "; ".join(
            f"{k}: {v}" for k, v in exc.errors.items()), fields=exc.errors) from None
    return jsonify(kept=row is not None,
                   autosave=autosave_json(row, post) if row is not None else None)


@bp.delete("/posts/<int:post_id>/autosave")
@api_role("contributor")
def delete_autosave(post_id: int):
    """Discard the token user's unsaved text of a post."""
    post = _get(post_id)
    return jsonify(discarded=autosaves.discard(g.api_user.id, post.id))
