"""Releases: many changes that go live as one, at one time (editors)."""

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from ..accounts.security import role_required
from ..models import Release
from ..posts import PostError, get_post, release_preview, releases
from ..posts.releases import ItemSpec, ReleaseError
from ..site import state
from ..site.markdown import render
from ..timefmt import human
from ..timezones import input_value
from .editor import editor_zone, read_times

bp = Blueprint("releases", __name__, url_prefix="/admin/releases")


def _release_or_404(release_id: int) -> Release:
    try:
        return releases.get_release(release_id)
    except ReleaseError:
        abort(404)


def _head_form(release: Release | None = None) -> dict:
    zone = editor_zone()
    if release is None:
        return {"name": "", "release_at": "", "zone": zone, "version": ""}
    return {"name": release.name, "release_at": input_value(release.release_at, zone),
            "zone": zone, "version": release.version}


def _typed_head() -> dict:
    form = {name: request.form.get(name, "").strip() for name in
            ("name", "release_at", "zone", "version")}
    form["zone"] = form["zone"] or editor_zone()
    return form


def _read_time(form: dict):
    """Return the typed time in the typed zone (None when blank), or raise naming the field."""
    if not form["release_at"]:
        return None
    return read_times({"release_at": form["release_at"], "zone": form["zone"]},
                      ("release_at",))["release_at"]


def _version() -> int | None:
    raw = request.form.get("version", "")
    return int(raw) if raw.isdigit() and len(raw) < 10 else None


@bp.get("/")
@role_required("editor")
def index(status: int = 200, form: dict | None = None, errors: dict | None = None):
    """List the releases to go (soonest first) and those gone, with the form to make one."""
    found = releases.list_releases()
    return render_template("releases/index.html", releases=found,
                           counts=releases.item_counts([r.id for r in found]),
                           form=form or _head_form(), errors=errors or {}), status


@bp.post("/")
@role_required("editor")
def create():
    """Make an empty release with a name and a time; its items are added on its page."""
    form = _typed_head()
    try:
        release = releases.create_release(form["name"], _read_time(form))
    except PostError as exc:
        return index(422, form, exc.errors)
    flash(f"Release “{release.name}” made: it goes live {human(release.release_at, form['zone'])}."
          " Add what it changes below.", "success")
    return redirect(url_for("releases.show", release_id=release.id), code=303)


def _page(release: Release, status: int = 200, **context):
    items = releases.items_of(release.id)
    context.setdefault("form", _head_form(release))
    context.setdefault("errors", {})
    context.setdefault("typed", {})
    return render_template(
        "releases/show.html", release=release, items=items,
        posts=releases.item_posts(items), site=state.current(),
        choices=releases.choices(release.id) if release.status in releases.EDITABLE else {},
        kinds=releases.KIND_WORDS, zone=editor_zone(), **context), status


@bp.get("/<int:release_id>")
@role_required("editor")
def show(release_id: int):
    """Show a release: its name, time and items, editable until it goes; then what it did."""
    return _page(_release_or_404(release_id))


@bp.post("/<int:release_id>")
@role_required("editor")
def save(release_id: int):
    """Rename a release or move its time."""
    release = _release_or_404(release_id)
    form = _typed_head()
    try:
        saved = releases.update_release(release.id, form["name"], _read_time(form), _version())
    except PostError as exc:
        return _page(_release_or_404(release_id), 422, form=form, errors=exc.errors)
    flash(f"Saved: the release goes live {human(saved.release_at, form['zone'])}.", "success")
    return redirect(url_for("releases.show", release_id=release_id), code=303)


ITEM_FIELDS = ("kind", "post_id", "title", "body", "site_name", "site_description")


@bp.post("/<int:release_id>/items")
@role_required("editor")
def add(release_id: int):
    """Add one item: publish a post, take one down, change a live post's text, or the
    site's settings."""
    release = _release_or_404(release_id)
    typed = {name: request.form.get(name, "") for name in ITEM_FIELDS}
    post_id = typed["post_id"]
    spec = ItemSpec(typed["kind"], int(post_id) if post_id.isdigit() and len(post_id) < 10
                    else None, typed["title"], typed["body"], typed["site_name"],
                    typed["site_description"])
    try:
        releases.add_item(release.id, spec, _version())
    except PostError as exc:
        if spec.kind == "change" and spec.post_id is not None:
            return _change_page(release, spec.post_id, typed, exc.errors, 422)
        return _page(_release_or_404(release_id), 422, typed=typed, item_errors=exc.errors)
    flash("Added to the release.", "success")
    return redirect(url_for("releases.show", release_id=release_id) + "#items", code=303)


@bp.get("/<int:release_id>/change")
@role_required("editor")
def change(release_id: int):
    """Show the form for a live post's new text, filled with the text it has now."""
    return _change_page(_release_or_404(release_id), request.args.get("post_id", 0, type=int))


def _change_page(release: Release, post_id: int, typed: dict | None = None,
                 errors: dict | None = None, status: int = 200):
    try:
        post = get_post(post_id)
    except PostError:
        abort(404)
    typed = typed or {"kind": "change", "post_id": str(post.id), "title": post.title,
                      "body": post.body}
    return render_template("releases/change.html", release=release, post=post, form=typed,
                           errors=errors or {}, html=render(typed["body"])), status


@bp.post("/<int:release_id>/items/<int:item_id>/remove")
@role_required("editor")
def remove(release_id: int, item_id: int):
    """Take an item out of the release."""
    release = _release_or_404(release_id)
    try:
        releases.remove_item(release.id, item_id, _version())
    except PostError as exc:
        flash(next(iter(exc.errors.values())), "error")
    else:
        flash("Taken out of the release.", "success")
    return redirect(url_for("releases.show", release_id=release_id) + "#items", code=303)


@bp.post("/<int:release_id>/cancel")
@role_required("editor")
def cancel(release_id: int):
    """Cancel a release: nothing in it goes live (each post stays as it is)."""
    release = _release_or_404(release_id)
    try:
        releases.cancel_release(release.id, _version())
    except PostError as exc:
        flash(next(iter(exc.errors.values())), "error")
    else:
        flash(f"Release “{release.name}” cancelled: nothing in it goes live.", "success")
    return redirect(url_for("releases.show", release_id=release_id), code=303)


@bp.post("/<int:release_id>/preview")
@role_required("editor")
def preview(release_id: int):
    """Make the release's preview link (the site as it will be) for days=1, 7 or 30; show it
    once."""
    release = _release_or_404(release_id)
    try:
        _release, token = release_preview.create_preview(release.id,
                                                         request.form.get("days", type=int))
    except PostError as exc:
        flash(" ".join(exc.errors.values()), "error")
        return redirect(url_for("releases.show", release_id=release_id), code=303)
    return _page(_release_or_404(release_id), 201,
                 new_link=url_for("previews.release", token=token, _external=True))


@bp.post("/<int:release_id>/preview/revoke")
@role_required("editor")
def revoke_preview(release_id: int):
    """End the release's preview link now."""
    release = _release_or_404(release_id)
    try:
        release_preview.revoke_preview(release.id)
    except PostError as exc:
        flash(" ".join(exc.errors.values()), "error")
    else:
        flash("Preview link revoked: it no longer opens the release.", "success")
    return redirect(url_for("releases.show", release_id=release_id), code=303)
