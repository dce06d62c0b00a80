"""Autosave from the post editor: keep what is typed, every few seconds and as the tab
hides (soloist's autosave.js), and discard it. Restoring it is the editor page's."""

from flask import Blueprint, jsonify, redirect, request, url_for
from flask_login import current_user

from ..accounts.security import role_required
from ..posts import PostError, autosaves
from ..timefmt import to_local
from .editor import editor_zone, post_or_404

bp = Blueprint("autosaves", __name__, url_prefix="/admin/posts")


def _typed() -> autosaves.Typed:
    return autosaves.Typed(**{name: request.form.get(name, "")
                              for name in ("title", "slug", "body", "publish_at", "zone")})


def _kept(post_id: int | None, base_version: int | None = None, base_digest: str = ""):
    """Keep the form's text; answer JSON the status line says ("Saved a draft 12:04:31")."""
    try:
        row = autosaves.keep(current_user.id, post_id, _typed(), base_version, base_digest)
    except PostError as exc:
        field = next(iter(exc.errors))
        return jsonify(error=f"{field}: {exc.errors[field]}", field=field,
                       fields=exc.errors), 422
    if row is None:
        return jsonify(saved_at=None, said="Nothing unsaved")
    shown = to_local(row.saved_at, editor_zone()).strftime("%H:%M:%S")
    return jsonify(saved_at=row.saved_at.isoformat(), said=f"Saved a draft {shown}")


@bp.post("/<int:post_id>/autosave")
@role_required("contributor")
def keep(post_id: int):
    """Keep the text typed into a post's form, with the version it was typed on."""
    post_or_404(post_id)
    version = request.form.get("version", type=int)
    return _kept(post_id, version, request.form.get("digest", "") if version else "")


@bp.post("/new/autosave")
@role_required("contributor")
def keep_new():
    """Keep the text typed into New post, for New post to offer back."""
    return _kept(None)


@bp.post("/<int:post_id>/autosave/discard")
@role_required("contributor")
def discard(post_id: int):
    """Throw away the text kept for this post: reopening it shows the saved post alone."""
    post_or_404(post_id)
    autosaves.discard(current_user.id, post_id)
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


@bp.post("/new/autosave/discard")
@role_required("contributor")
def discard_new():
    """Throw away the text kept from New post."""
    autosaves.discard(current_user.id, None)
    return redirect(url_for("posts.new"), code=303)

