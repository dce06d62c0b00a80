"""The editors' posts: list, write with a live preview, schedule, publish, unpublish."""

from datetime import datetime

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user

from .. import media, posts
from ..accounts.security import role_required
from ..clockchanges import post_warning
from ..models import Post
from ..posts import PostError, PostNotFound, PublishTimeInPast, StalePost
from ..site import markdown
from ..timefmt import human, zone_label
from ..timezones import TimeInputError, get_zone, input_value, parse_local, zone_names

bp = Blueprint("posts", __name__, url_prefix="/admin/posts")

SCHEDULE_STALE = {"form": "Someone else changed this post after you opened the page; check "
                          "its state here and try again."}


def editor_zone() -> str:
    """Return the zone the signed-in editor reads and types times in."""
    return current_user.timezone or "UTC"


def post_or_404(post_id: int) -> Post:
    try:
        return posts.get_post(post_id)
    except PostNotFound:
        abort(404)


def _list_args() -> dict:
    status = request.args.get("status", "")
    return {"status": status if status in Post.STATUSES else None,
            "query": request.args.get("q", "").strip()[:200],
            "before": _cursor("before"), "after": _cursor("after")}


def _cursor(name: str) -> int | None:
    """Return a keyset cursor (a post id) from the query string; ignore nonsense."""
    value = request.args.get(name, type=int)
    return value if value is not None and 0 <= value <= posts.MAX_ID else None


@bp.get("/")
@role_required("editor")
def index():
    """List posts with status filters, title search and keyset pages."""
    args = _list_args()
    return render_template("posts/index.html", page=posts.list_posts(**args), args=args,
                           counts=_tab_counts(posts.status_counts()), statuses=Post.STATUSES)


def _tab_counts(counts: dict[str, int], cap: int = posts.COUNT_CAP) -> dict[str, str]:
    """Label each filter tab's count; a capped count reads "10,000+"."""
    shown = {s: f"{cap:,}+" if counts.get(s, 0) > cap else f"{counts.get(s, 0):,}"
             for s in Post.STATUSES}
    total = sum(min(n, cap) for n in counts.values())
    shown[""] = f"{total:,}+" if any(n > cap for n in counts.values()) else f"{total:,}"
    return shown


@bp.get("/rows")
@role_required("editor")
def rows():
    """Render the list's rows alone (polled while a post on the page is scheduled)."""
    args = _list_args()
    return render_template("posts/_rows.html", page=posts.list_posts(**args), args=args,
                           counts=_tab_counts(posts.status_counts()),
                           statuses=Post.STATUSES, oob=True)  # the tabs' counts follow


def _content_form() -> dict:
    return {name: request.form.get(name, "") for name in ("title", "slug", "body")}


@bp.route("/new", methods=["GET", "POST"])
@role_required("editor")
def new():
    """Write a new draft, or a post scheduled as it is saved (a publish time typed, or filled
    in by the calendar's "new post on this day")."""
    form, errors = {"title": "", "slug": "", "body": ""}, {}
    # the same create-and-schedule form wherever one starts (the calendar fills the time)
    sched = _new_schedule(request.form if request.method == "POST" else request.args) or {
        "publish_at": "", "zone": editor_zone()}
    if request.method == "POST":
        form = _content_form()
        try:
            post = _start_post(form, sched)
        except PostError as exc:
            errors = exc.errors
        else:
            if post.status == "scheduled":
                flash(f"“{post.title}” is scheduled for "
                      f"{human(post.publish_at, sched['zone'])}.", "success")
            else:
                flash(f"Draft “{post.title}” saved.", "success")
            return redirect(url_for("posts.edit", post_id=post.id), code=303)
    return render_template("posts/new.html", form=form, errors=errors, new_sched=sched,
                           preview=render(form["body"])), 422 if errors else 200


def _new_schedule(source) -> dict | None:
    """Return the publish time offered to a new post (typed in the editor's zone), if any."""
    if "publish_at" not in source:
        return None
    return {"publish_at": source.get("publish_at", "").strip(),
            "zone": source.get("zone", "").strip() or editor_zone()}


def _start_post(form: dict, sched: dict | None) -> Post:
    """Create the post, scheduled in the same transaction when a time is given; refuse naming
    every bad field (create_post names the text's and the time's together)."""
    publish_at = None
    if sched and sched["publish_at"]:
        try:
            publish_at = _read_times(sched)[0]
        except PostError as exc:  # a time that cannot be read: name the text's faults too
            errors = dict(exc.errors)
            try:
                posts.check_fields(**form)
            except PostError as more:
                errors.update(more.errors)
            raise PostError(errors) from None
    return posts.create_post(**form, publish_at=publish_at)


def edit_page(post: Post, status: int = 200, **context):
    form = context.pop("form", None) or {
        "title": post.title, "slug": post.slug, "body": post.body, "version": post.version,
        "digest": posts.content_digest(post.title, post.slug, post.body)}
    context.setdefault("errors", {})
    page = _panel_context(post, **context)
    if post.status in posts.SHAREABLE or page["pending"]:  # the "Share a preview" section
        page.setdefault("preview_links", posts.live_links(post.id))
    return render_template("posts/edit.html", form=form, preview=render(form["body"]),
                           **page), status


def _panel_context(post: Post, sched: dict | None = None, sched_errors: dict | None = None,
                   **context) -> dict:
    zone = editor_zone()
    if sched is None:
        # a draft with a time was held by a freeze: its time is offered again
        keeps = post.status == "scheduled" or (post.status == "draft" and post.publish_at)
        sched = {"publish_at": input_value(post.publish_at, zone) if keeps else "",
                 "unpublish_at": input_value(post.unpublish_at, zone), "zone": zone}
    return {"post": post, "sched": sched, "sched_errors": sched_errors or {},
            "zones": sorted(zone_names()), "pending": posts.pending_change(post),
            "versions": posts.revisions.history(post.id, limit=5), **context}


@bp.route("/<int:post_id>", methods=["GET", "POST"])
@role_required("editor")
def edit(post_id: int):
    """Edit a post's text; a form opened before someone else's change is refused."""
    post = post_or_404(post_id)
    if request.method != "POST":  # GET or HEAD: never a write
        return edit_page(post)
    form = {**_content_form(), "version": request.form.get("version", 0, type=int),
            "digest": request.form.get("digest", "")}
    version = request.form.get("force_version", type=int) or form["version"]
    try:
        posts.update_post(post_id, version, form["digest"], form["title"], form["slug"],
                          form["body"])
    except StalePost as exc:
        return edit_page(exc.current, 409, form=form, errors=exc.errors, stale=exc.current)
    except PostError as exc:
        return edit_page(post_or_404(post_id), 422, form=form, errors=exc.errors)
    flash("Saved.", "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


def read_times(sched: dict, names: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """Parse the typed times in the typed zone; raise PostError naming each bad field.

    A time the clocks skip or repeat is refused with a suggestion (a button fills it in).
    """
    try:
        get_zone(sched["zone"])
    except TimeInputError as exc:
        raise PostError({"zone": str(exc)}) from None
    times: dict[str, datetime | None] = {}
    errors: dict[str, str] = {}
    for name in names:
        if not sched.get(name) and name in optional:
            times[name] = None
            continue
        try:
            times[name] = parse_local(sched.get(name), sched["zone"])
        except TimeInputError as exc:
            errors[name] = str(exc)
            if exc.suggestion:  # offered as a button that fills the field
                errors[f"{name}_suggestion"] = exc.suggestion
    if errors:
        raise PostError(errors)
    return times


def _read_times(sched: dict, need_publish: bool = True) -> tuple:
    """Parse the schedule form's publish and unpublish times (see read_times)."""
    optional = ("unpublish_at",) if need_publish else ("publish_at", "unpublish_at")
    times = read_times(sched, ("publish_at", "unpublish_at"), optional)
    return times["publish_at"], times["unpublish_at"]


def _sched_form() -> dict:
    return {name: request.form.get(name, "").strip()
            for name in ("publish_at", "unpublish_at", "zone")}


class _TextRefused(Exception):
    """The text typed beside a schedule could not be saved; response is the page saying why."""

    def __init__(self, response) -> None:
        super().__init__("text refused")
        self.response = response


def _typed_text() -> dict | None:
    """Return the editor's unsaved text sent with a panel form (soloist.js adds it), if any."""
    if "text_version" not in request.form:
        return None
    return {**_content_form(), "version": request.form.get("text_version", 0, type=int),
            "digest": request.form.get("digest", "")}


def _save_typed_text(post: Post, sched: dict | None = None) -> int:
    """Save text typed but not saved, sent with a schedule or publish form; return the version
    the schedule applies to. Someone else's newer text is refused as the Save button refuses
    it (the typed text kept on the page); nothing else is done then."""
    form = _typed_text()
    version, current = request.form.get("version", 0, type=int), post.version  # before saving
    if form is None or (form["title"], form["slug"], form["body"]) == (post.title, post.slug,
                                                                      post.body):
        return version
    try:
        saved = posts.update_post(post.id, form["version"], form["digest"], form["title"],
                                  form["slug"], form["body"])
    except StalePost as exc:
        raise _TextRefused(edit_page(exc.current, 409, form=form, errors=exc.errors,
                                      stale=exc.current, sched=sched)) from None
    except PostError as exc:
        raise _TextRefused(edit_page(post_or_404(post.id), 422, form=form, errors=exc.errors,
                                      sched=sched)) from None
    # the panel was current when the text was saved: the schedule applies to the saved text
    return saved.version if version == current else version


@bp.post("/<int:post_id>/schedule")
@role_required("editor")
def schedule(post_id: int):
    """Schedule a post at a time typed in the editor's zone, saving text typed beside it."""
    post = post_or_404(post_id)
    sched = _sched_form()
    try:
        publish_at, unpublish_at = _read_times(sched)
        posts.check_times(publish_at, unpublish_at)  # a bad time saves nothing, text included
        version = _save_typed_text(post, sched)
        posts.schedule_post(post_id, version, publish_at, unpublish_at)
    except _TextRefused as exc:
        return exc.response
    except StalePost as exc:
        return edit_page(exc.current, 409, sched=sched, sched_errors=SCHEDULE_STALE,
                          form=_typed_text())
    except PostError as exc:
        return edit_page(post_or_404(post_id), 422, sched=sched, sched_errors=exc.errors,
                          past=isinstance(exc, PublishTimeInPast), form=_typed_text())
    flash(f"Scheduled for {human(publish_at, sched['zone'])}.", "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


@bp.post("/<int:post_id>/unpublish-time")
@role_required("editor")
def unpublish_time(post_id: int):
    """Set or clear when a published post comes down."""
    post = post_or_404(post_id)
    sched = _sched_form()
    try:
        _, unpublish_at = _read_times(sched, need_publish=False)
        posts.check_times(None, unpublish_at)
        posts.set_unpublish_time(post_id, _save_typed_text(post, sched), unpublish_at)
    except _TextRefused as exc:
        return exc.response
    except StalePost as exc:
        return edit_page(exc.current, 409, sched=sched, sched_errors=SCHEDULE_STALE)
    except PostError as exc:
        return edit_page(post, 422, sched=sched, sched_errors=exc.errors)
    flash(f"Unpublishes {human(unpublish_at, sched['zone'])}." if unpublish_at
          else "It stays published until you unpublish it.", "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


def _act(post_id: int, action, done: str, save_text: bool = False):
    post = post_or_404(post_id)
    try:
        if save_text:  # publishing now publishes what the editor sees, typed text included
            _save_typed_text(post)
        action(post_id)
    except _TextRefused as exc:
        return exc.response
    except posts.PublishingFrozen as exc:  # by the form, what was typed kept
        typed = _sched_form() if "zone" in request.form else None
        return edit_page(post, 409, sched=typed, sched_errors=exc.errors)
    except PostError as exc:
        flash(exc.errors.get("form", str(exc)), "error")
    else:
        flash(done, "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


def _override_freeze() -> bool:
    """Return whether an admin ticked "override the freeze" (an editor's tick is ignored)."""
    return bool(request.form.get("override_freeze")) and current_user.can("admin")


@bp.post("/<int:post_id>/unschedule")
@role_required("editor")
def unschedule(post_id: int):
    """Take a scheduled post back to draft."""
    return _act(post_id, posts.unschedule_post, "Unscheduled: the post is a draft again.")


@bp.post("/<int:post_id>/publish")
@role_required("editor")
def publish(post_id: int):
    """Publish a post now (refused while publishing is frozen, unless an admin overrides)."""
    instance, override = current_app.config.get("INSTANCE_NAME", ""), _override_freeze()
    return _act(post_id, lambda pid: posts.publish_now(pid, instance, override), "Published.",
                save_text=True)


@bp.post("/<int:post_id>/unpublish")
@role_required("editor")
def unpublish(post_id: int):
    """Take a published post down now."""
    instance, override = current_app.config.get("INSTANCE_NAME", ""), _override_freeze()
    return _act(post_id, lambda pid: posts.unpublish_post(pid, instance, override),
                "Unpublished: the post is no longer on the site.")


@bp.get("/<int:post_id>/panel")
@role_required("editor")
def panel(post_id: int):
    """Render the publication panel, or 204 while the post is still at version=."""
    post = post_or_404(post_id)
    if request.args.get("version", type=int) == post.version:
        return "", 204
    return render_template("posts/_panel.html", **_panel_context(post))


@bp.post("/preview")
@role_required("editor")
def preview():
    """Render a Markdown body the way the public page will show it."""
    body = request.form.get("body", "")
    if len(body.encode()) > posts.MAX_BODY_BYTES:
        return render_template("posts/_preview.html", too_big=True)
    return render_template("posts/_preview.html", html=render(body))


def render(body: str):
    """Render the preview as readers will see it: the site's images with their srcset."""
    return markdown.render(body, media.describe_images(body))


@bp.get("/when")
@role_required("editor")
def when():
    """Say when a typed local time is, in UTC and relative to now (the schedule form's hint)."""
    text = (request.args.get("publish_at") or request.args.get("apply_at", "")).strip()
    if not text:
        return ""
    zone = request.args.get("zone", "").strip()
    try:
        moment = parse_local(text, zone)
    except TimeInputError as exc:
        return render_template("posts/_when.html", error=str(exc))
    return render_template("posts/_when.html", moment=moment, zone=zone,
                           zone_label=zone_label, clock_change=post_warning(moment, zone))
