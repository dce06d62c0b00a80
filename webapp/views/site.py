"""The public site and the platform's health checks."""

from flask import Blueprint, Response, abort, jsonify, render_template, request

from .. import markdown, posts, xmltext
from ..db import ping
from ..scheduling import process

bp = Blueprint("site", __name__)

PAGE_SIZE = 20
MAX_PAGE = 50_000
FEED_SIZE = 20


@bp.get("/")
def index():
    """List published posts, newest first (read from the database on every request)."""
    page = min(max(request.args.get("page", 1, type=int) or 1, 1), MAX_PAGE)
    found = posts.published_page(page, PAGE_SIZE)
    return render_template("site/index.html", posts=found[:PAGE_SIZE], page=page,
                           has_next=len(found) > PAGE_SIZE)


@bp.get("/posts/<slug>")
def post(slug: str):
    """Show one published post; drafts, scheduled and unpublished posts are 404."""
    found = posts.published_by_slug(slug)
    if found is None:
        abort(404)
    return render_template("site/post.html", post=found, body=markdown.render(found.body))


@bp.get("/feed.xml")
def feed():
    """Serve the latest published posts as an Atom feed."""
    entries = [(p, markdown.render(p.body)) for p in posts.recently_published(FEED_SIZE, body=True)]
    updated = max((p.updated_at for p, _ in entries), default=None)
    xml = render_template("site/feed.xml", entries=entries, updated=updated)
    return Response(xml, mimetype="application/atom+xml")


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
