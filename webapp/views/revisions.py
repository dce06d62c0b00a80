"""A post's history (every version, compared, restored) and its scheduled change."""

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from .. import posts
from ..accounts.security import role_required
from ..models import Post
from ..posts import PostError, StalePost, revisions
from ..site.markdown import render
from ..timefmt import human
from ..timezones import input_value, zone_names
from .editor import editor_zone, post_or_404, read_times

bp = Blueprint("revisions", __name__, url_prefix="/admin/posts")


def _revision_or_404(post: Post, revision_id: int):
    try:
        return revisions.get_revision(post.id, revision_id)
    except PostError:
        abort(404)


def _page(template: str, post: Post, **context) -> str:
    """Render a history page: the post, and which of its versions is its text now."""
    return render_template(template, post=post, current=revisions.current_revision_id(post.id),
                           **context)


@bp.get("/<int:post_id>/history")
@role_required("editor")
def history(post_id: int):
    """List a post's versions newest first, 50 a page, with a form to compare any two."""
    post = post_or_404(post_id)
    before = request.args.get("before", type=int)
    page = revisions.history(post.id, before if before and before > 0 else None)
    return _page("posts/history.html", post, page=page)


@bp.get("/<int:post_id>/history/<int:revision_id>")
@role_required("editor")
def revision(post_id: int, revision_id: int):
    """Show one version as readers would see it, with its Markdown and a restore button."""
    post = post_or_404(post_id)
    found = _revision_or_404(post, revision_id)
    return _page("posts/revision.html", post, revision=found, html=render(found.body))


@bp.get("/<int:post_id>/compare")
@role_required("editor")
def compare(post_id: int):
    """Compare two versions (?a=older&b=newer; b defaults to the current text)."""
    post = post_or_404(post_id)
    a_id = request.args.get("a", type=int)
    b_id = request.args.get("b", type=int) or revisions.current_revision_id(post.id)
    if a_id is None or b_id is None:
        flash("Pick two versions to compare.", "error")
        return redirect(url_for("revisions.history", post_id=post.id), code=303)
    a, b = _revision_or_404(post, a_id), _revision_or_404(post, b_id)
    if a.id > b.id:
        a, b = b, a  # always older → newer: removals are what the newer one took out
    return _page("posts/compare.html", post, a=a, b=b, title_changed=a.title != b.title,
                 hunks=revisions.diff(a.body, b.body))


@bp.post("/<int:post_id>/history/<int:revision_id>/restore")
@role_required("editor")
def restore(post_id: int, revision_id: int):
    """Bring an old version back: a new version with its text (the slug stays as it is)."""
    post = post_or_404(post_id)
    found = _revision_or_404(post, revision_id)
    try:
        posts.restore_revision(post.id, found.id, request.form.get("version", 0, type=int))
    except StalePost:
        flash("Someone changed this post after you opened this page: nothing was restored. "
              "Look at the latest version and restore again if you still want to.", "error")
        return redirect(url_for("revisions.revision", post_id=post.id,
                                revision_id=found.id), code=303)
    except PostError as exc:
        flash(next(iter(exc.errors.values())), "error")
        return redirect(url_for("revisions.revision", post_id=post.id,
                                revision_id=found.id), code=303)
    flash(f"Restored the version of {human(found.created_at, editor_zone())}: it is the "
          "post's text now, as a new version.", "success")
    return redirect(url_for("posts.edit", post_id=post.id), code=303)


# -- the scheduled change of a live post ------------------------------------------------

def _change_page(post: Post, status: int = 200, form: dict | None = None,
                 errors: dict | None = None):
    pending = posts.pending_change(post)
    if form is None:
        source = pending.change if pending else post
        form = {"title": source.title, "body": source.body, "zone": editor_zone(),
                "apply_at": input_value(pending.change.apply_at, editor_zone()) if pending else "",
                "change_id": pending.change.id if pending else ""}
    hunks = revisions.diff(post.body, pending.change.body) if pending else []
    return render_template("posts/change.html", post=post, pending=pending, form=form,
                           errors=errors or {}, html=render(form["body"]), hunks=hunks,
                           zones=sorted(zone_names())), status


@bp.route("/<int:post_id>/change", methods=["GET", "POST"])
@role_required("editor")
def change(post_id: int):
    """Write, edit or preview the change a live post takes at a set time."""
    post = post_or_404(post_id)
    if request.method != "POST":
        if post.status != "published" and posts.pending_change(post) is None:
            flash("Only a published post takes a scheduled change: edit a draft's text "
                  "directly.", "error")
            return redirect(url_for("posts.edit", post_id=post.id), code=303)
        return _change_page(post)
    form = {name: request.form.get(name, "") for name in ("title", "body", "apply_at", "zone",
                                                          "change_id")}
    form["zone"] = form["zone"].strip() or editor_zone()
    try:
        apply_at = read_times({"apply_at": form["apply_at"].strip(), "zone": form["zone"]},
                              ("apply_at",))["apply_at"]
        posts.schedule_change(post.id, form["title"], form["body"], apply_at,
                              int(form["change_id"]) if form["change_id"].isdigit() else None)
    except PostError as exc:
        return _change_page(post, 422, form, exc.errors)
    flash(f"The change goes live {human(apply_at, form['zone'])}.", "success")
    return redirect(url_for("posts.edit", post_id=post.id), code=303)


@bp.post("/<int:post_id>/change/cancel")
@role_required("editor")
def cancel_change(post_id: int):
    """Drop the post's scheduled change: the live text stays as it is."""
    post = post_or_404(post_id)
    try:
        posts.cancel_change(post.id)
    except PostError as exc:
        flash(exc.errors["form"], "error")
    else:
        flash("Scheduled change cancelled: the live text stays as it is.", "success")
    return redirect(url_for("posts.edit", post_id=post.id), code=303)
