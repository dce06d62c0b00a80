"""The public site and the platform's health checks."""

import sqlalchemy as sa
from flask import Blueprint, abort, jsonify, render_template, request

from ..extensions import db
from ..models import Post
from ..scheduling import runner

bp = Blueprint("site", __name__)

PAGE_SIZE = 20


@bp.get("/")
def index():
    """List published posts, newest first."""
    page = max(request.args.get("page", 1, type=int) or 1, 1)
    posts = db.session.scalars(
        sa.select(Post)
        .where(Post.status == "published")
        .order_by(Post.published_at.desc(), Post.id.desc())
        .limit(PAGE_SIZE + 1)
        .offset((page - 1) * PAGE_SIZE)
    ).all()
    return render_template(
        "site/index.html", posts=posts[:PAGE_SIZE], page=page, has_next=len(posts) > PAGE_SIZE
    )


@bp.get("/posts/<slug>")
def post(slug: str):
    """Show one published post; anything else is 404 to the public."""
    found = db.session.scalar(sa.select(Post).where(Post.slug == slug))
    if found is None or found.status != "published":
        abort(404)
    return render_template("site/post.html", post=found)


@bp.get("/healthz")
def healthz():
    """Answer while the process is up."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz():
    """Answer 200 when the database is reachable and this process's scheduler runs."""
    problems = []
    try:
        db.session.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as exc:
        problems.append(f"database unreachable: {type(exc).__name__}")
    finally:
        db.session.rollback()
    scheduler = runner.current()
    if scheduler is not None and not scheduler.alive:
        problems.append("scheduler thread is not running")
    if problems:
        return jsonify(status="unavailable", problems=problems), 503
    return jsonify(status="ok", scheduler=bool(scheduler and scheduler.alive))
