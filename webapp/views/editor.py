"""The post editor's page and what reads it, for every view that answers with it.

Not a view: it declares no routes. The posts, revisions and previews views share these
helpers through here, so that no view imports another.
"""

from datetime import datetime

from flask import abort, render_template, request, url_for
from flask_login import current_user
from markupsafe import Markup

from .. import media, posts
from ..models import Post
from ..posts import PostError, PostNotFound, SlugTaken
from ..site import markdown
from ..timezones import TimeInputError, get_zone, input_value, parse_local, zone_names


def editor_zone() -> str:
    """Return the zone the signed-in editor reads and types times in."""
    return current_user.timezone or "UTC"


def form_errors(exc: PostError) -> dict:
    """Return a refusal's messages for the form: a slug in use links the post that has it."""
    if not isinstance(exc, SlugTaken) or exc.owner_id is None:
        return exc.errors
    return {**exc.errors, "slug": Markup(
        '“{}” uses this slug already — <a href="{}">open it</a>, or pick another.').format(
        exc.owner_title, url_for("posts.edit", post_id=exc.owner_id))}


def post_or_404(post_id: int) -> Post:
    try:
        return posts.get_post(post_id)
    except PostNotFound:
        abort(404)


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


def render(body: str):
    """Render the preview as readers will see it: the site's images with their srcset."""
    return markdown.render(body, media.describe_images(body))


def edit_page(post: Post, status: int = 200, **context):
    """Render the editor's page for post: its text (or form, as typed), the publication panel
    (sched, sched_errors: as typed and refused), its preview links."""
    form = context.pop("form", None)
    if form is None:  # the page opened afresh: the editor's unsaved text offered, or restored
        form, context["autosave"] = unsaved_text(post)
    form = form or {
        "title": post.title, "slug": post.slug, "body": post.body, "version": post.version,
        "digest": posts.content_digest(post.title, post.slug, post.body)}
    context.setdefault("errors", {})
    if context.get("stale") is not None:  # said once, by the banner, with what changed
        context["errors"] = {k: v for k, v in context["errors"].items() if k != "form"}
        context["conflict"] = posts.conflicts.explain(
            post, form.get("digest", ""), form.get("slug", ""), current_user.id)
    page = panel_context(post, **context)
    if (post.status in posts.SHAREABLE or page["pending"]) and current_user.can("editor"):
        # the "Share a preview" section (a contributor's posts are shared by a reviewer)
        page.setdefault("preview_links", posts.live_links(post.id))
    return render_template("posts/edit.html", form=form, preview=render(form["body"]),
                           **page), status


def unsaved_text(post: Post | None) -> tuple[dict | None, posts.autosaves.Offer | None]:
    """Return the form as the editor's autosave of post (None: New post) holds it, when the
    page asks to restore it (?restore=1); else None and the offer of it, if there is one."""
    offer = posts.autosaves.offer(current_user.id, post)
    if offer is None or not request.args.get("restore"):
        return None, offer
    row = offer.autosave
    form = {"title": row.title, "slug": row.slug, "body": row.body, "restored": row.saved_at}
    if post is not None:  # a save checks the text against the version it was typed on
        form.update(version=row.base_version or post.version, digest=row.base_digest)
    else:
        form.update(publish_at=row.publish_at, zone=row.zone or editor_zone())
    return form, None


def panel_context(post: Post, sched: dict | None = None, sched_errors: dict | None = None,
                  **context) -> dict:
    """Return what the publication panel shows: the post, its times in the editor's zone."""
    zone = editor_zone()
    if sched is None:
        # a draft with a time was held by a freeze: its time is offered again
        keeps = post.status == "scheduled" or (post.status == "draft" and post.publish_at)
        sched = {"publish_at": input_value(post.publish_at, zone) if keeps else "",
                 "unpublish_at": input_value(post.unpublish_at, zone), "zone": zone}
    return {"post": post, "sched": sched, "sched_errors": sched_errors or {},
            "zones": sorted(zone_names()), "pending": posts.pending_change(post),
            "versions": posts.revisions.history(post.id, limit=5),
            "review": posts.review.review_of(post.id), "review_labels": posts.review.LABELS,
            "may_publish": posts.review.may_publish(current_user),
            "in_releases": posts.releases.releases_of(post.id), **context}
