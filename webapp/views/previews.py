"""Preview links: editors make and revoke them; anyone holding one reads the draft (or the
change a live post will take at its time).

The page a link opens is never kept by a cache nor indexed, and a link that ended (expired,
revoked, or never was) answers the site's 404 without a word about the post.
"""

import dataclasses
from types import SimpleNamespace

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user

from .. import media, posts
from ..accounts.security import role_required
from ..site import markdown, state
from .editor import edit_page
from .errors import render_site_missing

bp = Blueprint("previews", __name__)

# on every answer of /preview/<token>: no copy anywhere, no search engine, no Referer
# carrying the token to whatever the draft links to
PRIVATE = {"Cache-Control": "private, no-store", "X-Robots-Tag": "noindex",
           "Referrer-Policy": "no-referrer"}
ENDED = ("This preview link has ended",
         "It expired or was revoked, or it was mistyped. Ask whoever sent it for a new one.")


@bp.post("/admin/posts/<int:post_id>/previews")
@role_required("editor")
def create(post_id: int):
    """Make a preview link for days=1, 7 or 30; show it once on the post's page."""
    days = request.form.get("days", type=int)
    try:
        link, token = posts.create_link(post_id, days, current_user.id)
    except posts.PostNotFound:
        abort(404)
    except posts.PostError as exc:  # a post gone live, or a crafted expiry: the form says why
        return _back(post_id, " ".join(exc.errors.values()), "error")
    new_link = {"url": url_for("previews.show", token=token, _external=True),
                "expires_at": link.expires_at}
    return edit_page(posts.get_post(post_id), 201, new_link=new_link)


@bp.post("/admin/posts/<int:post_id>/previews/<int:link_id>/revoke")
@role_required("editor")
def revoke(post_id: int, link_id: int):
    """End a preview link now: whoever holds it sees the site's 404 from then on."""
    try:
        posts.revoke_link(post_id, link_id)
    except posts.PostNotFound:
        abort(404)
    except posts.PostError as exc:
        return _back(post_id, " ".join(exc.errors.values()), "error")
    return _back(post_id, "Preview link revoked: it no longer opens the post.", "success")


def _back(post_id: int, message: str, category: str):
    flash(message, category)
    return redirect(url_for("posts.edit", post_id=post_id), code=303)


@bp.get("/preview/<token>")
def show(token: str):
    """Show the post a live link opens, in the public layout, with a banner; else 404."""
    found = posts.preview_for_token(token)
    if found is None:
        return render_site_missing(*ENDED), 404, PRIVATE
    post, change = found.post, found.change
    if post.status == "published" and change is None:  # it went out since: the real page
        return redirect(url_for("site.post", slug=post.slug)), 302, PRIVATE
    shown = post if change is None else SimpleNamespace(
        title=change.title, body=change.body, published_at=post.published_at, status="live")
    page = render_template("site/preview.html", site=state.current(), post=shown,
                           change=change,
                           body=markdown.render(shown.body, media.describe_images(shown.body)))
    return page, 200, PRIVATE


@bp.get("/preview/release/<token>")
def release(token: str):
    """Show the home page as it will be once a release goes (a live link's), else 404."""
    found = posts.release_preview.release_for_token(token)
    if found is None:
        return render_site_missing(*ENDED), 404, PRIVATE
    shown, after = posts.release_preview.front(found)
    entries = [(post, markdown.excerpt(post.body)) for post in shown]
    page = render_template("site/release_preview.html", site=_site_after(after), release=found,
                           entries=entries, token=token)
    return page, 200, PRIVATE


@bp.get("/preview/release/<token>/posts/<int:post_id>")
def release_post(token: str, post_id: int):
    """Show one post as it will read once a release goes (a live link's), else 404."""
    found = posts.release_preview.release_for_token(token)
    post = posts.release_preview.post_after(found, post_id) if found is not None else None
    if found is None or post is None:
        return render_site_missing(*ENDED), 404, PRIVATE
    after = posts.release_preview.front(found)[1]
    page = render_template("site/release_preview.html", site=_site_after(after), release=found,
                           post=post, token=token,
                           body=markdown.render(post.body, media.describe_images(post.body)))
    return page, 200, PRIVATE


def _site_after(after) -> state.SiteInfo:
    """Return the site as a page shows it once the release's settings (if any) are saved."""
    site = state.current()
    if after is None:
        return site
    return dataclasses.replace(
        site, name=after.name or current_app.config["SITE_NAME"],
        description=after.description if after.description is not None
        else current_app.config["SITE_DESCRIPTION"])
