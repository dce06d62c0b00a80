"""A post as the API shows it, found by id, and a refused change as the API answers it:
shared by the posts' and the history's endpoints (no routes here)."""

from flask import url_for

from ... import posts
from ...models import Post
from ...timefmt import iso
from .errors import ApiError, refused


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


def refusal(exc: posts.PostError) -> ApiError:
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
    return refused(fields, str(exc), isinstance(exc, posts.StalePost))


def get_or_404(post_id: int) -> Post:
    """Return the post with post_id, or answer 404."""
    try:
        return posts.get_post(post_id)
    except posts.PostNotFound as exc:
        raise refusal(exc) from None
