"""The public site and the platform's health checks.

Public pages validate against one row read before anything is rendered (webapp.sitestate,
webapp.httpcache): a reader's copy that still matches gets a 304 at the cost of that read.
"""

import hashlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    jsonify,
    make_response,
    render_template,
    request,
)
from flask_login import current_user

from .. import httpcache, markdown, posts, sitestate, xmltext
from ..db import ping, read_without_transaction
from ..scheduling import process

bp = Blueprint("site", __name__)

PAGE_SIZE = 20
MAX_PAGE = 50_000
FEED_SIZE = 20


def _build(app: Flask) -> str:
    """Fingerprint what renders the pages besides the database: templates, Markdown, config.

    Read once per process; a deploy that changes how a page looks changes every ETag.
    """
    if "soloist.site_build" not in app.extensions:
        digest = hashlib.blake2b(digest_size=8)
        for path in sorted(Path(app.template_folder).rglob("*")):
            if path.is_file():
                digest.update(path.name.encode() + path.read_bytes())
        digest.update(Path(markdown.__file__).read_bytes())
        digest.update(repr([app.config.get(k) for k in ("SITE_URL", "SITE_NAME",
                                                        "SITE_DESCRIPTION")]).encode())
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
    if per_reader and current_user.is_authenticated:
        return httpcache.private(make_response(render()))
    if httpcache.matches(validators):
        return httpcache.not_modified(validators)
    return httpcache.public(make_response(render()), validators)


def _page_number() -> int:
    """Return ?page= (1 when absent); anything but a page that can exist is 404."""
    raw = request.args.get("page", "1")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6 and 1 <= int(raw) <= MAX_PAGE):
        abort(404)
    return int(raw)


@bp.get("/")
def index():
    """List published posts newest first, with excerpts, 20 a page; past the last page, 404."""
    page = _page_number()
    read_without_transaction()
    site = sitestate.current()
    validators = httpcache.Validators(_etag("i", site.version, site.changed_at, page),
                                      site.changed_at)

    def render() -> str:
        found = posts.published_page(page, PAGE_SIZE)
        if page > 1 and not found:
            abort(404)
        entries = [(row, markdown.excerpt(row.lead)) for row in found[:PAGE_SIZE]]
        return render_template("site/index.html", site=site, entries=entries, page=page,
                               has_next=len(found) > PAGE_SIZE)

    return _respond(validators, render)


@bp.get("/posts/<slug>")
def post(slug: str):
    """Show one published post; drafts, scheduled and unpublished posts are 404."""
    read_without_transaction()
    found = posts.published_post(slug)
    if found is None:
        abort(404)
    site = sitestate.info(found)
    changed = max(t for t in (found.updated_at, site.settings_changed_at) if t is not None)
    validators = httpcache.Validators(
        _etag("p", site.settings_version, site.settings_changed_at, found.id,
              found.post_version, found.updated_at), changed)
    return _respond(validators, lambda: render_template(
        "site/post.html", site=site, post=found, body=markdown.render(found.body),
        description=markdown.excerpt(found.body)))


@bp.get("/feed.xml")
def feed():
    """Serve the latest published posts as an Atom feed."""
    read_without_transaction()
    site = sitestate.current()
    validators = httpcache.Validators(_etag("f", site.version, site.changed_at),
                                      site.changed_at)

    def render() -> Response:
        entries = [(p, markdown.render(p.body))
                   for p in posts.recently_published(FEED_SIZE, body=True)]
        updated = max((p.updated_at for p, _ in entries), default=None)
        xml = render_template("site/feed.xml", site=site, entries=entries, updated=updated)
        return Response(xml, mimetype="application/atom+xml")

    return _respond(validators, render, per_reader=False)


@bp.app_template_filter("xml_text")
def xml_text(text: str) -> str:
    """Drop the characters XML cannot hold (rows stored before posts refused them)."""
    return xmltext.strip_unsafe(str(text))


@bp.get("/healthz")
def healthz():
    """Answer while the process is up."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz():
    """Answer 200 when the database is reachable and this process's scheduler runs."""
    problems = [problem] if (problem := ping()) else []
    scheduler = process.current()
    if scheduler is not None:
        problems.extend(scheduler.problems())
    if problems:
        return jsonify(status="unavailable", problems=problems), 503
    return jsonify(status="ok", scheduler=bool(scheduler and scheduler.alive))
