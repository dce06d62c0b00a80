"""Serve a post's history (list, show, restore) and its scheduled change (show, create, edit,
cancel) in the JSON API: the same domain functions the history and change pages call."""

from flask import jsonify, request, url_for

from ... import posts
from ...models import PostRevision, ScheduledChange
from ...posts import revisions
from ...timefmt import iso
from .auth import api_role
from .blueprint import bp
from .errors import ApiError, created, invalid
from .inputs import json_body, text_field, time_field
from .postdata import get_or_404, post_json, refusal

CHANGE_FIELDS = {"title", "body", "apply_at"}


def revision_json(found: PostRevision, current: int | None, body: bool = True) -> dict:
    """Return a version of a post as the API shows it (lists leave the body out)."""
    data = {"id": found.id, "post_id": found.post_id, "title": found.title,
            "author": found.author or None, "reason": found.reason,
            "restored_from": found.restored_from, "was_live": found.was_live,
            "current": found.id == current, "created_at": iso(found.created_at)}
    if body:
        data["body"] = found.body
    return data


def change_json(change: ScheduledChange, outdated: bool) -> dict:
    """Return a post's scheduled change as the API shows it."""
    return {"id": change.id, "post_id": change.post_id, "title": change.title,
            "body": change.body, "apply_at": iso(change.apply_at),
            "base_version": change.base_version, "outdated": outdated,
            "author": change.author or None, "created_at": iso(change.created_at),
            "updated_at": iso(change.updated_at)}


def _revision(post_id: int, revision_id: int) -> PostRevision:
    try:
        return revisions.get_revision(post_id, revision_id)
    except posts.PostError:
        raise ApiError(404, "Not found", "This post has no version with that id (any more): "
                                         "housekeeping keeps the last ones and every "
                                         "published one.") from None


@bp.get("/posts/<int:post_id>/revisions")
@api_role("viewer")
def list_revisions(post_id: int):
    """List a post's versions newest first, 50 a page (?before= the id the last page gave)."""
    get_or_404(post_id)
    raw = request.args.get("before")
    if raw is not None and not (raw.isascii() and raw.isdigit() and 0 < int(raw) < 2**63):
        raise invalid("before", "must be a version id (a whole number from 1)")
    page = revisions.history(post_id, int(raw) if raw else None)
    current = revisions.current_revision_id(post_id)
    return jsonify(revisions=[revision_json(r, current, body=False) for r in page.revisions],
                   total=page.total, older=page.older)


@bp.get("/posts/<int:post_id>/revisions/<int:revision_id>")
@api_role("viewer")
def get_revision(post_id: int, revision_id: int):
    """Show one version of a post, with its body."""
    get_or_404(post_id)
    return jsonify(revision_json(_revision(post_id, revision_id),
                                 revisions.current_revision_id(post_id)))


@bp.post("/posts/<int:post_id>/revisions/<int:revision_id>/restore")
@api_role("editor")
def restore_revision(post_id: int, revision_id: int):
    """Make an old version the post's text again, as a new version; send version to refuse
    the restore when someone changed the post since (409)."""
    data = json_body({"version"}) if request.get_data(cache=True).strip() else {}
    post = get_or_404(post_id)
    _revision(post_id, revision_id)
    version = data.get("version", post.version)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise invalid("version", "must be a whole number from 1")
    try:
        restored = posts.restore_revision(post_id, revision_id, version)
    except posts.PostError as exc:
        if "revision" in exc.errors:  # the text it has now: nothing to restore
            raise ApiError(409, "Conflict", exc.errors["revision"]) from None
        raise refusal(exc) from None
    return jsonify(post_json(restored))


def _pending(post_id: int) -> posts.ChangeState:
    """Return the post's scheduled change; without one, 409: the post is there, the change
    went out, was cancelled or was never made (as the page's cancel says)."""
    found = posts.pending_change(get_or_404(post_id))
    if found is None:
        raise ApiError(409, "Conflict", "This post has no scheduled change: it went out, was "
                                        "cancelled, or was never made.")
    return found


@bp.get("/posts/<int:post_id>/change")
@api_role("viewer")
def get_change(post_id: int):
    """Show the change a live post takes at a set time (null: it has none)."""
    found = posts.pending_change(get_or_404(post_id))
    return jsonify(None if found is None else change_json(found.change, found.outdated))


@bp.post("/posts/<int:post_id>/change")
@api_role("editor")
def create_change(post_id: int):
    """Schedule new text for a published post at apply_at (title and body default to the
    live ones: send what changes)."""
    data = json_body(CHANGE_FIELDS)
    post = get_or_404(post_id)
    return _schedule(post_id, data, post.title, post.body, None, 201)


@bp.patch("/posts/<int:post_id>/change")
@api_role("editor")
def update_change(post_id: int):
    """Edit the post's scheduled change: its text, its time, or both."""
    data = json_body(CHANGE_FIELDS)
    change = _pending(post_id).change
    return _schedule(post_id, data, change.title, change.body, change, 200)


def _schedule(post_id: int, data: dict, title: str, body: str,
              change: ScheduledChange | None, status: int):
    apply_at = time_field(data, "apply_at") or (change.apply_at if change else None)
    if apply_at is None:
        raise invalid("apply_at", "required: when the change goes live, e.g. "
                                  "2030-01-31T09:00:00+01:00")
    title, body = text_field(data, "title", default=title), text_field(data, "body", default=body)
    try:
        saved = posts.schedule_change(post_id, title, body, apply_at,
                                      change.id if change else None)
    except posts.PostError as exc:
        raise refusal(exc) from None
    found = _pending(post_id)
    if status == 201:
        return created(change_json(found.change, found.outdated),
                       url_for("api.get_change", post_id=saved.post_id))
    return jsonify(change_json(found.change, found.outdated))


@bp.delete("/posts/<int:post_id>/change")
@api_role("editor")
def cancel_change(post_id: int):
    """Drop the post's scheduled change: the live text stays as it is; answer the post."""
    _pending(post_id)
    try:
        posts.cancel_change(post_id)
    except posts.PostError as exc:
        raise refusal(exc) from None
    return jsonify(post_json(get_or_404(post_id)))
