"""The public site and the platform's health checks.

Public pages validate against one row read before anything is rendered (webapp.site.state,
webapp.site.httpcache): a reader's copy that still matches gets a 304 at the cost of that read.
"""

import hashlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from urllib.parse import parse_qs

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    g,
    make_response,
    render_template,
    request,
    url_for,
)
from flask_login import current_user
from markupsafe import Markup

from .. import media, posts
from ..db import autocommit_connection, read_without_transaction
from ..site import (
    httpcache,
    markdown,
    pagecache,
    revalidation,
    state,
    structured,
    surrogate,
    xmltext,
)

bp = Blueprint("site", __name__)

PAGE_SIZE = surrogate.HOME_PAGE_SIZE
MAX_PAGE = 50_000
FEED_SIZE = 20
# what the pages show from the environment (the zone: every date readers see; Site settings
# may override the last two)
SITE_CONFIG = ("SITE_URL", "SITE_NAME", "SITE_DESCRIPTION", "SITE_TIMEZONE", "SITE_LANGUAGE")


def _build(app: Flask) -> str:
    """Fingerprint what renders the pages besides the database: templates, Markdown, config.

    Read once per process; a deploy that changes how a page looks changes every ETag.
    """
    if "soloist.site_build" not in app.extensions:
        digest = hashlib.blake2b(digest_size=8)
        for path in sorted(Path(app.root_path, app.template_folder or "").rglob("*")):
            if path.is_file():
                digest.update(path.name.encode() + path.read_bytes())
        digest.update(Path(markdown.__file__).read_bytes())
        digest.update(repr([app.config[k] for k in SITE_CONFIG]).encode())
        app.extensions["soloist.site_build"] = digest.hexdigest()
    return app.extensions["soloist.site_build"]


def _etag(kind: str, *parts: object) -> str:
    """Return an opaque ETag from what a page validates against (times keep it unique)."""
    text = repr([_build(current_app), *(p.isoformat() if isinstance(p, datetime) else p
                                        for p in parts)])
    return kind + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _respond(validators: httpcache.Validators, render: Callable[[], str | Response],
             per_reader: bool = True) -> Response:
    """Answer 304 when the reader's copy matches, else render: public, or private if signed in.

    per_reader: the page shows who is signed in (base.html); the feed does not.
    """
    g.public_keep = validators.keep  # for the 404 render may end in (_answers_not_kept)
    if per_reader and current_user.is_authenticated:
        return httpcache.private(make_response(render()))
    if httpcache.matches(validators):
        return httpcache.not_modified(validators)
    response = make_response(render())  # a page that does not exist is a 404 here
    if httpcache.star_matches() and response.status_code == 200:
        return httpcache.not_modified(validators)
    return httpcache.public(response, validators)


def page_number(raw: str) -> int | None:
    """Return the page ?page= names (from 1), or None for anything but a page that can exist."""
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6 and 1 <= int(raw) <= MAX_PAGE):
        return None
    return int(raw)


def _page_number() -> int:
    page = page_number(request.args.get("page", "1"))
    if page is None:
        abort(404)
    return page


def _first(*moments: datetime | None) -> datetime | None:
    return min((m for m in moments if m is not None), default=None)


def post_validators(found) -> httpcache.Validators:
    """Return what a post page validates against: the post's version and the settings'.

    Kept under the post's keys until its takedown or its next scheduled change.
    """
    site = state.info(found)
    changed = max(t for t in (found.updated_at, site.settings_changed_at) if t is not None)
    keep = httpcache.Keep(surrogate.keys_for("post", found.id),
                          _first(found.unpublish_at, found.next_change, found.next_release),
                          found.db_now)
    return httpcache.Validators(_etag("p", site.settings_version, site.settings_changed_at,
                                      found.id, found.post_version, found.updated_at),
                                changed, keep)


def listing_validators(kind: str, row, *parts) -> httpcache.Validators:
    """Return what the index (kind "i", parts the page) or the feed ("f") validates against.

    row: posts.LISTING read. A page of the index past the first may not exist (404), which
    these validators cannot tell: it has no Last-Modified, so only its ETag, from a copy
    it served, makes a 304. Kept until any post's next publish, takedown or change.
    """
    site, deep = state.info(row), kind == "i" and parts and parts[0] != 1
    keep = httpcache.Keep(surrogate.keys_for("home" if kind == "i" else "feed"),
                          posts.lists_change_at(row), row.db_now)
    return httpcache.Validators(_etag(kind, site.version, site.changed_at, *parts),
                                None if deep else site.changed_at, keep)


def missing_keep(hidden) -> httpcache.Keep:
    """Return how the 404 at a post's URL may be kept: posts.hidden_post's row, or None.

    A scheduled post's until it is due; a draft's or a taken-down post's until an editor
    publishes it (its key is purged then) or a release that names it goes; a URL no post
    has, until a post joins the list.
    """
    if hidden is None:
        return httpcache.Keep(surrogate.keys_for("unknown"))
    due = _first(hidden.publish_at if hidden.status == "scheduled" else None,
                 hidden.next_release)
    return httpcache.Keep(surrogate.keys_for("missing", hidden.id), due, hidden.db_now)


@bp.get("/")
def index():
    """List published posts newest first, with excerpts, 20 a page; past the last page, 404."""
    page = _page_number()
    read_without_transaction()
    listed = posts.listing()
    site = state.info(listed)

    def render() -> Response:
        found = posts.published_page(page, PAGE_SIZE)
        if page > 1 and not found:
            abort(404)
        entries = [(row, markdown.excerpt(row.lead)) for row in found[:PAGE_SIZE]]
        html = render_template("site/index.html", site=site, entries=entries, page=page,
                               has_next=len(found) > PAGE_SIZE)
        return surrogate.tag(make_response(html), surrogate.keys_for(
            "home", listed=[row.id for row, _ in entries]))

    return _respond(listing_validators("i", listed, page), render)


@bp.get("/posts/<slug>")
def post(slug: str):
    """Show one published post; drafts, scheduled and unpublished posts are 404."""
    if current_user.is_authenticated:  # the session has begun: read in it
        found = posts.published_post(slug)
    else:  # a reader: one autocommit read, no session transaction to begin and end
        with autocommit_connection() as conn:
            found = posts.published_post(slug, conn)
            if found is None:
                g.public_keep = missing_keep(posts.hidden_post(slug, conn))
    if found is None:
        abort(404)
    return _respond(post_validators(found), lambda: _post_page(found))


def _post_page(found) -> str:
    """Render a post: its images with their srcset, the first one its og:image."""
    images = media.describe_images(found.body)
    first = media.first_image(found.body, images)
    og_image = url_for("media_files.serve", _external=True, **first) if isinstance(
        first, dict) else first
    site = state.info(found)
    article = structured.article(found, site.name, url_for("site.post", slug=found.slug,
                                 _external=True), url_for("site.index", _external=True), og_image)
    return render_template("site/post.html", site=site, post=found, article=article,
                           body=markdown.render(found.body, images), og_image=og_image,
                           description=markdown.excerpt(found.body) or found.title)


@bp.get("/feed.xml")
def feed():
    """Serve the latest published posts as an Atom feed."""
    read_without_transaction()
    listed = posts.listing()
    site = state.info(listed)

    def render() -> Response:
        # plain <img>s: a feed reader may not know <picture>, and every one takes JPEG
        entries = [(p, markdown.render(p.body, media.describe_images(p.body), picture=False))
                   for p in posts.recently_published(FEED_SIZE, body=True)]
        # when readers last saw a change (an unpublished post too), else the newest entry's
        updated = site.changed_at or max((p.updated_at for p, _ in entries), default=None)
        xml = render_template("site/feed.xml", site=site, entries=entries, updated=updated)
        return surrogate.tag(Response(xml, mimetype="application/atom+xml"),
                             surrogate.keys_for("feed", listed=[p.id for p, _ in entries]))

    return _respond(listing_validators("f", listed), render, per_reader=False)


@bp.after_request
def _answers_not_kept(response: Response) -> Response:
    """Keep a public 404 no longer than it is right: a scheduled post's until it is due.

    Any other error, and any 404 a signed-in viewer gets, is kept by no cache.
    """
    keep = g.get("public_keep")
    if response.status_code == 404 and keep is not None and not (
            current_user.is_authenticated and request.endpoint != "site.feed"):
        return httpcache.not_found(response, keep)
    if response.status_code >= 400:
        response.headers.setdefault("Cache-Control", "no-cache")
    return response


def validators_of(environ: dict) -> httpcache.Validators | None:
    """Return the validators of the public page a WSGI request asks for; None if it is not one.

    What httpcache.RevalidateFirst asks, with the views' own reads, before Flask runs: on
    PostgreSQL through the worker's revalidation connection (None while it cannot read:
    the app answers), else on a pooled connection.
    """
    path, query = environ.get("PATH_INFO", ""), parse_qs(environ.get("QUERY_STRING", ""))
    slug = path.removeprefix("/posts/")
    page = page_number(query.get("page", ["1"])[0]) if set(query) <= {"page"} else None
    try:
        if path == "/feed.xml" and not query:
            return listing_validators("f", revalidation.read(posts.LISTING))
        if path == "/" and page is not None:
            return listing_validators("i", revalidation.read(posts.LISTING), page)
        if slug != path and posts.is_slug(slug) and not query:  # anything else: the app's 404
            found = revalidation.read(posts.PUBLISHED_POST_VALIDATORS, slug=slug)
            return None if found is None else post_validators(found)
    except revalidation.Unavailable:
        return None
    return None


def init_app(app: Flask) -> None:
    """Answer readers' public pages before Flask runs: a 304, else the page kept in memory
    (their reads on revalidation's connection, which create_app gives the app first)."""
    read = pagecache.remembered(validators_of)  # one read serves both
    app.wsgi_app = httpcache.RevalidateFirst(  # type: ignore[method-assign]
        pagecache.PageCache(app.wsgi_app, app, read), app, read)


@bp.app_template_filter("xml_text")
def xml_text(text: str) -> str:
    """Drop the characters XML cannot hold (rows stored before posts refused them)."""
    return xmltext.strip_unsafe(str(text))


@bp.app_template_filter("absolute")
def absolute(html: str, base: str) -> Markup:
    """Make a rendered body's addresses absolute on base: a feed reader has no page to resolve
    "/media/…" against."""
    return markdown.absolute(html, base)
