"""Posts: create, edit with an optimistic version check, schedule, publish, unpublish.

Every function checks its input before writing and writes in one transaction,
so bad input changes nothing. State changes are conditional UPDATEs (fenced
like the publish leader's), with their outbox rows in the same transaction.
"""

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from ..extensions import db
from ..models import Post
from ..scheduling import publish
from ..scheduling.keys import PLUGINS, PUBLISH
from ..scheduling.work import database_now, wake_scheduler

MAX_TITLE = 200
MAX_SLUG = 200
MAX_BODY_BYTES = 200_000
SLUG_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
SCHEDULABLE = ("draft", "scheduled", "unpublished")
MAX_ID = 2**31 - 1  # posts.id is an INTEGER: a larger id in a URL names nothing


class PostError(Exception):
    """A change was refused; errors maps a form field (or "form") to what to do about it."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors


class PostNotFound(PostError):
    """No post has that id (any more)."""

    def __init__(self) -> None:
        super().__init__({"form": "That post does not exist (any more)."})


class StalePost(PostError):
    """Someone else changed the post after this form was opened."""

    def __init__(self, current: Post) -> None:
        super().__init__({"form": "Someone else changed this post after you opened it, so "
                                  "nothing was saved. Your text is kept below."})
        self.current = current


class PublishTimeInPast(PostError):
    """The publish time has already passed; the editor may publish now instead."""

    def __init__(self, when: datetime) -> None:
        super().__init__({"publish_at": "That time has already passed. Pick a later time, "
                                        "or publish now."})
        self.when = when


@dataclass(frozen=True)
class PostFields:
    """A post's editable text, checked."""

    title: str
    slug: str
    body: str


def slugify(title: str) -> str:
    """Return a URL slug made from a title (ASCII letters, digits and dashes)."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return slug[:80].rstrip("-")


def check_fields(title: str, slug: str, body: str) -> PostFields:
    """Return the cleaned fields, or raise PostError naming every bad one."""
    title, slug, body = title.strip(), slug.strip().lower(), body.replace("\r\n", "\n")
    errors = {}
    if not title:
        errors["title"] = "Give the post a title."
    elif len(title) > MAX_TITLE:
        errors["title"] = f"Keep the title under {MAX_TITLE} characters (it has {len(title)})."
    slug = slug or slugify(title)
    if not slug and title:
        errors["slug"] = "Type a slug: letters, digits and dashes, e.g. my-first-post."
    elif slug and (len(slug) > MAX_SLUG or not SLUG_PATTERN.match(slug)):
        errors["slug"] = (f"Use lower-case letters, digits and single dashes, at most "
                          f"{MAX_SLUG} characters, e.g. my-first-post.")
    size = len(body.encode())
    if size > MAX_BODY_BYTES:
        errors["body"] = (f"The body is {-(-size // 1000)} kB; the limit is "
                          f"{MAX_BODY_BYTES // 1000} kB. Shorten it or split the post.")
    if errors:
        raise PostError(errors)
    return PostFields(title, slug, body)


def content_digest(title: str, slug: str, body: str) -> str:
    """Return a short fingerprint of a post's text, to tell content edits from status changes."""
    return hashlib.sha256(f"{title}\0{slug}\0{body}".encode()).hexdigest()[:32]


def get_post(post_id: int) -> Post:
    """Return the post with post_id or raise PostNotFound."""
    post = db.session.get(Post, post_id) if 0 < post_id <= MAX_ID else None
    if post is None:
        raise PostNotFound()
    return post


def _slug_taken(slug: str, except_id: int | None = None) -> bool:
    query = sa.select(Post.id).where(Post.slug == slug)
    if except_id is not None:
        query = query.where(Post.id != except_id)
    return db.session.scalar(query.limit(1)) is not None


SLUG_TAKEN = {"slug": "Another post uses this slug already; pick another."}


def _commit_or_slug_taken() -> None:
    try:
        db.session.commit()
    except IntegrityError:  # two editors took the same slug at the same moment
        db.session.rollback()
        raise PostError(dict(SLUG_TAKEN)) from None


def create_post(title: str, slug: str, body: str) -> Post:
    """Create a draft post; raise PostError for bad fields or a slug in use."""
    fields = check_fields(title, slug, body)
    if _slug_taken(fields.slug):
        raise PostError(dict(SLUG_TAKEN))
    post = Post(title=fields.title, slug=fields.slug, body=fields.body, status="draft",
                version=1)
    db.session.add(post)
    _commit_or_slug_taken()
    return post


def update_post(post_id: int, version: int, digest: str | None, title: str, slug: str,
                body: str) -> Post:
    """Save new text if nobody else changed the text since version (digest names that text).

    A form opened at an older version still saves when only the status changed in
    between (the publish leader published it, say): its text digest still matches.
    """
    fields = check_fields(title, slug, body)
    now = database_now()
    post = get_post(post_id)
    if _slug_taken(fields.slug, except_id=post_id):
        raise PostError(dict(SLUG_TAKEN))
    if post.version != version and digest != content_digest(post.title, post.slug, post.body):
        raise StalePost(post)
    saved = db.session.execute(
        sa.update(Post)
        .where(Post.id == post_id, Post.version == post.version)
        .values(title=fields.title, slug=fields.slug, body=fields.body,
                version=Post.version + 1, updated_at=now)
        .execution_options(synchronize_session=False)
    ).rowcount
    if saved != 1:
        db.session.rollback()
        raise StalePost(get_post(post_id))
    _commit_or_slug_taken()
    return get_post(post_id)


def _locked(post_id: int, version: int) -> Post:
    """Return the post locked for update, or raise if it is gone or changed since version."""
    post = db.session.get(Post, post_id, with_for_update=True, populate_existing=True)
    if post is None:
        db.session.rollback()
        raise PostNotFound()
    if post.version != version:
        db.session.rollback()
        raise StalePost(post)
    return post


def schedule_post(post_id: int, version: int, publish_at: datetime,
                  unpublish_at: datetime | None) -> Post:
    """Schedule a post for publish_at (and optionally unpublish_at), waking the leader."""
    now = database_now()
    if publish_at <= now:
        raise PublishTimeInPast(publish_at)
    if unpublish_at is not None and unpublish_at <= publish_at:
        raise PostError({"unpublish_at": "The unpublish time must come after the publish time."})
    post = _locked(post_id, version)
    if post.status not in SCHEDULABLE:
        db.session.rollback()
        raise PostError({"form": "This post is published: unpublish it first, or set when it "
                                 "should be unpublished."})
    publish.schedule(post, publish_at, unpublish_at)
    db.session.commit()
    return post


def set_unpublish_time(post_id: int, version: int, unpublish_at: datetime | None) -> Post:
    """Set or clear when a published post is taken down, waking the leader."""
    now = database_now()
    if unpublish_at is not None and unpublish_at <= now:
        raise PostError({"unpublish_at": "That time has already passed; pick a later one, or "
                                         "unpublish now."})
    post = _locked(post_id, version)
    if post.status != "published":
        db.session.rollback()
        raise PostError({"form": f"This post is {post.status}, not published; nothing changed."})
    post.unpublish_at = unpublish_at
    post.version += 1
    wake_scheduler(PUBLISH.name)
    db.session.commit()
    return post


def _move(post_id: int, sources: tuple[str, ...], values: dict) -> tuple | None:
    return db.session.execute(
        sa.update(Post)
        .where(Post.id == post_id, Post.status.in_(sources))
        .values(version=Post.version + 1, **values)
        .returning(Post.id, Post.slug, Post.title)
        .execution_options(synchronize_session=False)
    ).first()


def _refused(post_id: int, wanted: str) -> PostError:
    db.session.rollback()
    post = get_post(post_id)
    return PostError({"form": f"This post is {post.status} now, so it cannot be {wanted}; "
                              "nothing changed."})


def unschedule_post(post_id: int) -> None:
    """Take a scheduled post back to draft."""
    now = database_now()
    row = _move(post_id, ("scheduled",), {"status": "draft", "publish_at": None,
                                          "unpublish_at": None, "updated_at": now})
    if row is None:
        raise _refused(post_id, "unscheduled")
    db.session.commit()


def publish_now(post_id: int, instance: str = "") -> None:
    """Publish a post at once, with its 'post.published' outbox row in the same transaction."""
    now = database_now()
    keep_expiry = sa.case((Post.unpublish_at > now, Post.unpublish_at), else_=None)
    row = _move(post_id, SCHEDULABLE, {"status": "published", "published_at": now,
                                       "publish_at": now, "unpublish_at": keep_expiry,
                                       "updated_at": now})
    if row is None:
        raise _refused(post_id, "published")
    publish.write_outbox("post.published", [row], now, instance)
    wake_scheduler(PUBLISH.name)  # it may carry an unpublish time
    wake_scheduler(PLUGINS.name)  # the outbox's hooks (webhooks, sitemap) at once
    db.session.commit()


def unpublish_post(post_id: int, instance: str = "") -> None:
    """Take a published post down, with its 'post.unpublished' outbox row."""
    now = database_now()
    row = _move(post_id, ("published",), {"status": "unpublished", "unpublish_at": None,
                                          "updated_at": now})
    if row is None:
        raise _refused(post_id, "unpublished")
    publish.write_outbox("post.unpublished", [row], now, instance)
    wake_scheduler(PLUGINS.name)
    db.session.commit()


# The reading side lives in queries.py; import it from here like the rest.
from .queries import (  # noqa: E402
    COUNT_CAP,
    PostPage,
    api_page,
    late,
    list_posts,
    published_by_slug,
    published_page,
    recently_published,
    status_counts,
    upcoming,
)

__all__ = ["COUNT_CAP", "PostPage", "api_page", "late", "list_posts", "published_by_slug",
           "published_page", "recently_published", "status_counts", "upcoming"]
