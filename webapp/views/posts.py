"""The editors' posts: list, write with a live preview, schedule, publish, unpublish."""

import secrets

from flask import (
    Blueprint,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import current_user

from .. import posts
from ..accounts.security import role_required
from ..clockchanges import post_warning
from ..models import Post
from ..posts import PostError, PublishingFrozen, PublishTimeInPast, StalePost, StaleText
from ..timefmt import human, zone_label
from ..timezones import TimeInputError, parse_local
from .editor import (
    edit_page,
    editor_zone,
    form_errors,
    panel_context,
    post_or_404,
    read_times,
    render,
    unsaved_text,
)

bp = Blueprint("posts", __name__, url_prefix="/admin/posts")

SCHEDULE_STALE = {"form": "Someone else changed this post after you opened the page; check "
                          "its state here and try again."}
SCHEDULE_STALE_MINE = {"form": "You changed this post in another tab after this page opened; "
                               "check its state here and try again."}
TEXT_FIELDS = ("title", "slug", "body")
NEW_POSTS, NEW_POSTS_KEPT = "new_posts", 20  # the New post forms saved, by their one-time token
SAVED_ALREADY = ("You saved this post already, then went back to the New post form: this is "
                 "that post. What you typed since is below, not saved yet; Save keeps it.")


def _list_args() -> dict:
    status, review = request.args.get("status", ""), request.args.get("review", "")
    return {"status": status if status in Post.STATUSES else None,
            "review": review if review in posts.review.FILTERS else None,
            "query": request.args.get("q", "").strip()[:200],
            "before": _cursor("before"), "after": _cursor("after")}


def _cursor(name: str) -> int | None:
    """Return a keyset cursor (a post id) from the query string; ignore nonsense."""
    value = request.args.get(name, type=int)
    return value if value is not None and 0 <= value <= posts.MAX_ID else None


@bp.get("/")
@role_required("contributor")
def index():
    """List posts with status filters, title search and keyset pages."""
    args = _list_args()
    return render_template("posts/index.html", **_list_page(args))


def _list_page(args: dict) -> dict:
    """Return what the list and its tabs show: a page of posts, with their review states."""
    page = posts.list_posts(**args)
    return {"page": page, "args": args, "counts": _tab_counts(posts.status_counts()),
            "statuses": Post.STATUSES, "reviews": posts.review.states(page.posts),
            "review_counts": posts.review.counts(), "review_labels": posts.review.LABELS}


def _tab_counts(counts: dict[str, int], cap: int = posts.COUNT_CAP) -> dict[str, str]:
    """Label each filter tab's count; a capped count reads "10,000+"."""
    shown = {s: f"{cap:,}+" if counts.get(s, 0) > cap else f"{counts.get(s, 0):,}"
             for s in Post.STATUSES}
    total = sum(min(n, cap) for n in counts.values())
    shown[""] = f"{total:,}+" if any(n > cap for n in counts.values()) else f"{total:,}"
    return shown


@bp.get("/rows")
@role_required("contributor")
def rows():
    """Render the list's rows alone (polled while a post on the page is scheduled)."""
    return render_template("posts/_rows.html", **_list_page(_list_args()),
                           oob=True)  # the tabs' counts follow


def _content_form() -> dict:
    return {name: request.form.get(name, "") for name in ("title", "slug", "body")}


@bp.route("/new", methods=["GET", "POST"])
@role_required("contributor")
def new():
    """Write a new draft, or a post scheduled as it is saved (a publish time typed, or filled
    in by the calendar's "new post on this day")."""
    form, errors = {"title": "", "slug": "", "body": ""}, {}
    restored, autosave = unsaved_text(None) if request.method != "POST" else (None, None)
    # the same create-and-schedule form wherever one starts (the calendar fills the time)
    sched = _new_schedule(restored or (request.form if request.method == "POST"
                                       else request.args)) or {
        "publish_at": "", "zone": editor_zone()}
    form = restored or form
    once = request.form.get("once", "")[:64] or secrets.token_urlsafe(16)  # kept on a refusal
    if request.method == "POST":
        form = _content_form()
        if (saved := _saved_before(once)) is not None:
            return _saved_already(saved, form)
        try:
            post = _start_post(form, sched)
        except PostError as exc:
            errors = form_errors(exc)
        else:
            _remember_saved(once, post.id)
            if post.status == "scheduled":
                flash(f"“{post.title}” is scheduled for "
                      f"{human(post.publish_at, sched['zone'])}.", "success")
            else:
                flash(f"Draft “{post.title}” saved.", "success")
            return redirect(url_for("posts.edit", post_id=post.id), code=303)
    if not posts.review.may_publish(current_user):
        sched = {}  # a contributor's post is scheduled by its reviewer
    return render_template("posts/new.html", form=form, errors=errors, new_sched=sched,
                           autosave=autosave, once=once,
                           preview=render(form["body"])), 422 if errors else 200


def _saved_before(once: str) -> int | None:
    """Return the post the New post form sent with once created already (Back, Save again)."""
    return session.get(NEW_POSTS, {}).get(once)


def _remember_saved(once: str, post_id: int) -> None:
    kept = list(session.get(NEW_POSTS, {}).items())[-(NEW_POSTS_KEPT - 1):]
    session[NEW_POSTS] = dict([*kept, (once, post_id)])


def _saved_already(post_id: int, form: dict):
    """Answer a New post form saved before: its post, and any text typed since kept unsaved."""
    post = post_or_404(post_id)
    if (form["title"].strip(), _lines(form["body"])) == (post.title, _lines(post.body)):
        flash(f"“{post.title}” was saved already: here it is.", "success")
        return redirect(url_for("posts.edit", post_id=post.id), code=303)
    typed = {**form, "slug": form["slug"] or post.slug, "version": post.version,
             "digest": posts.content_digest(post.title, post.slug, post.body)}
    return edit_page(post, 409, form=typed, errors={"form": SAVED_ALREADY})


def _lines(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


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


@bp.route("/<int:post_id>", methods=["GET", "POST"])
@role_required("contributor")
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
        return edit_page(post_or_404(post_id), 422, form=form, errors=form_errors(exc))
    flash("Saved.", "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


def _read_times(sched: dict, need_publish: bool = True) -> tuple:
    """Parse the schedule form's publish and unpublish times (see read_times)."""
    optional = ("unpublish_at",) if need_publish else ("publish_at", "unpublish_at")
    times = read_times(sched, ("publish_at", "unpublish_at"), optional)
    return times["publish_at"], times["unpublish_at"]


def _sched_form() -> dict:
    return {name: request.form.get(name, "").strip()
            for name in ("publish_at", "unpublish_at", "zone")}


def _typed_text() -> dict | None:
    """Return the editor's unsaved text sent with a panel form (soloist.js adds it), if any."""
    if "text_version" not in request.form:
        return None
    return {**_content_form(), "version": request.form.get("text_version", 0, type=int),
            "digest": request.form.get("digest", "")}


def _typed() -> posts.TypedText | None:
    typed = _typed_text()
    return posts.TypedText(**typed) if typed else None


def _change(post_id: int, times: dict) -> None:
    """Change the post's times and the text typed beside them, both or neither."""
    posts.change_post(post_id, request.form.get("version", 0, type=int), _typed(), times)


def _refused(post_id: int, exc: PostError, sched: dict | None):
    """Answer a panel form that changed nothing: the page saying why, all that was typed kept
    (someone else's text is shown as the Save button shows it)."""
    typed = _typed_text()
    if isinstance(exc, StaleText):
        return edit_page(exc.current, 409, form=typed, errors=exc.errors, stale=exc.current,
                         sched=sched)
    if isinstance(exc, StalePost):
        mine = posts.conflicts.changed_by_me(exc.current, current_user.id)
        return edit_page(exc.current, 409, form=typed, sched=sched,
                         sched_errors=SCHEDULE_STALE_MINE if mine else SCHEDULE_STALE)
    text_errors = {k: v for k, v in form_errors(exc).items() if k in TEXT_FIELDS}
    status = 409 if isinstance(exc, PublishingFrozen) else 403 if isinstance(
        exc, posts.NeedsReview) else 422
    return edit_page(post_or_404(post_id), status,
                     form=typed, errors=text_errors, sched=sched,
                     sched_errors={k: v for k, v in exc.errors.items() if k not in text_errors},
                     past=isinstance(exc, PublishTimeInPast))


@bp.post("/<int:post_id>/schedule")
@role_required("editor")
def schedule(post_id: int):
    """Schedule a post at a time typed in the editor's zone, with the text typed beside it."""
    post_or_404(post_id)
    sched = _sched_form()
    try:
        publish_at, unpublish_at = _read_times(sched)
        _change(post_id, {"publish_at": publish_at, "unpublish_at": unpublish_at})
    except PostError as exc:
        return _refused(post_id, exc, sched)
    flash(f"Scheduled for {human(publish_at, sched['zone'])}.", "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


@bp.post("/<int:post_id>/unpublish-time")
@role_required("editor")
def unpublish_time(post_id: int):
    """Set or clear when a published post comes down, with the text typed beside it."""
    post_or_404(post_id)
    sched = _sched_form()
    try:
        _, unpublish_at = _read_times(sched, need_publish=False)
        _change(post_id, {"unpublish_at": unpublish_at})
    except PostError as exc:
        return _refused(post_id, exc, sched)
    flash(f"Unpublishes {human(unpublish_at, sched['zone'])}." if unpublish_at
          else "It stays published until you unpublish it.", "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


def _act(post_id: int, action, done: str):
    post_or_404(post_id)
    try:
        action(post_id)
    except PostError as exc:
        # refused as a whole by the form (a freeze, someone else's text, a bad field):
        # the page says why, what was typed kept; else the post's state says it
        if isinstance(exc, StalePost | PublishingFrozen | posts.NeedsReview) or \
                set(exc.errors) & set(TEXT_FIELDS):
            return _refused(post_id, exc, _sched_form() if "zone" in request.form else None)
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
    instance, override = current_app.config["INSTANCE_NAME"], _override_freeze()
    text = _typed()  # publishing now publishes what the editor sees, typed text included
    return _act(post_id, lambda pid: posts.publish_now(pid, instance, override, text),
                "Published.")


@bp.post("/<int:post_id>/unpublish")
@role_required("editor")
def unpublish(post_id: int):
    """Take a published post down now."""
    instance, override = current_app.config["INSTANCE_NAME"], _override_freeze()
    return _act(post_id, lambda pid: posts.unpublish_post(pid, instance, override),
                "Unpublished: the post is no longer on the site.")


@bp.post("/<int:post_id>/submit")
@role_required("contributor")
def submit(post_id: int):
    """Submit a post for review, with the text typed beside the button saved first."""
    post_or_404(post_id)
    version = request.form.get("version", 0, type=int)
    try:
        if (typed := _typed()) is not None:
            version = posts.update_post(post_id, typed.version, typed.digest, typed.title,
                                        typed.slug, typed.body).version
        posts.review.submit(post_id, version)
    except PostError as exc:
        return _refused(post_id, exc, None)
    flash("Submitted for review: a reviewer approves it or sends it back with a note.",
          "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


@bp.post("/<int:post_id>/approve")
@role_required("editor")
def approve(post_id: int):
    """Approve a post in review: schedule it at the time typed, or publish it now."""
    post_or_404(post_id)
    sched = {**_sched_form(), "unpublish_at": ""}
    now = bool(request.form.get("now"))
    try:
        publish_at = None if now else _read_times(sched)[0]
        posts.review.approve(post_id, request.form.get("version", 0, type=int), publish_at,
                             current_app.config["INSTANCE_NAME"])
    except PostError as exc:
        return _refused(post_id, exc, sched)
    flash("Approved and published." if now else
          f"Approved: it publishes {human(publish_at, sched['zone'])}.", "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


@bp.post("/<int:post_id>/return")
@role_required("editor")
def send_back(post_id: int):
    """Send a post in review back to its writer with a note saying what to change."""
    post_or_404(post_id)
    note = request.form.get("note", "")
    try:
        posts.review.send_back(post_id, request.form.get("version", 0, type=int), note)
    except StalePost as exc:
        return _refused(post_id, exc, None)
    except PostError as exc:
        return edit_page(post_or_404(post_id), 422, sched_errors=exc.errors, review_note=note)
    flash("Sent back: the writer sees your note on the post.", "success")
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


@bp.get("/<int:post_id>/panel")
@role_required("contributor")
def panel(post_id: int):
    """Render the publication panel, or 204 while the post is still at version=."""
    post = post_or_404(post_id)
    if request.args.get("version", type=int) == post.version:
        return "", 204
    return render_template("posts/_panel.html", **panel_context(post))


@bp.post("/preview")
@role_required("contributor")
def preview():
    """Render a Markdown body the way the public page will show it."""
    body = request.form.get("body", "")
    if len(body.encode()) > posts.MAX_BODY_BYTES:
        return render_template("posts/_preview.html", too_big=True)
    return render_template("posts/_preview.html", html=render(body))


@bp.get("/when")
@role_required("contributor")
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
