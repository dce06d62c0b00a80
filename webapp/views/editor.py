"""The post editor's page and what reads it, for every view that answers with it.

Not a view: it declares no routes. The posts, revisions and previews views share these
helpers through here, so that no view imports another.
"""

from datetime import datetime

from flask import abort, render_template
from flask_login import current_user

from .. import media, posts
from ..models import Post
from ..posts import PostError, PostNotFound
from ..site import markdown
from ..timezones import TimeInputError, get_zone, input_value, parse_local, zone_names


def editor_zone() -> str:
    """Return the zone the signed-in editor reads and types times in."""
    return current_user.timezone or "UTC"


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
    form = context.pop("form", None) or {
        "title": post.title, "slug": post.slug, "body": post.body, "version": post.version,
        "digest": posts.content_digest(post.title, post.slug, post.body)}
    context.setdefault("errors", {})
    page = panel_context(post, **context)
    if post.status in posts.SHAREABLE or page["pending"]:  # the "Share a preview" section
        page.setdefault("preview_links", posts.live_links(post.id))
    return render_template("posts/edit.html", form=form, preview=render(form["body"]),
                           **page), status


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
            "in_releases": posts.releases.releases_of(post.id), **context}
