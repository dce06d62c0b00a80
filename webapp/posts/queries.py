"""Posts, the reading side: the editors' list, the dashboard's queues, the public site."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import QueryableAttribute, defer

from ..extensions import db
from ..models import Post, PostReview, ScheduledChange, SiteState, UTCDateTime
from ..site import state
from .lifecycle import next_due_reads, next_release_of

# the database clock, read with a public page's row: how long the page may be kept is
# measured from it (webapp.site.httpcache.Keep)
DB_NOW = sa.type_coerce(sa.func.now(), UTCDateTime).label("db_now")


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


@dataclass
class PostPage:
    """One page of the editors' post list, newest first, with keyset cursors."""

    posts: list[Post]
    older: int | None  # pass as before= for the next page
    newer: int | None  # pass as after= for the previous page


def list_posts(status: str | None, query: str, before: int | None, after: int | None,
               size: int = 25, review: str | None = None) -> PostPage:
    """Return a page of posts (bodies not loaded) filtered by status (or review state) and
    title text."""
    stmt = sa.select(Post).options(defer(Post.body))
    if status:
        stmt = stmt.where(Post.status == status)
    if review:
        stmt = stmt.join(PostReview, PostReview.post_id == Post.id).where(
            PostReview.state == review, Post.status.in_(("draft", "unpublished")))
    if query:
        stmt = stmt.where(Post.title.ilike(_like(query), escape="\\"))
    if after is not None and before is None:
        rows = list(db.session.scalars(stmt.where(Post.id > after)
                                       .order_by(Post.id.asc()).limit(size + 1)))
        more_newer, rows = len(rows) > size, rows[:size][::-1]
        return PostPage(rows, rows[-1].id if rows else None,
                        rows[0].id if rows and more_newer else None)
    if before is not None:
        stmt = stmt.where(Post.id < before)
    rows = list(db.session.scalars(stmt.order_by(Post.id.desc()).limit(size + 1)))
    more_older, rows = len(rows) > size, rows[:size]
    return PostPage(rows, rows[-1].id if rows and more_older else None,
                    rows[0].id if rows and before is not None else None)


COUNT_CAP = 10_000


def status_counts(cap: int = COUNT_CAP) -> dict[str, int]:
    """Return how many posts have each status, counting no further than cap + 1 each.

    A capped count reads at most cap + 1 index entries per status, so the filter tabs
    cost the same at 100,000 posts as at 10,000 (shown as "10000+").
    """
    capped = [
        sa.select(sa.literal(status).label("status"), sa.func.count().label("n")).select_from(
            sa.select(Post.id).where(Post.status == status).limit(cap + 1).subquery())
        for status in Post.STATUSES
    ]
    return {status: n for status, n in db.session.execute(sa.union_all(*capped))}


def upcoming(now: datetime, hours: int | None = 24, limit: int = 50) -> list[Post]:
    """Return scheduled posts due within hours (None: whenever), soonest first (late ones
    excluded)."""
    query = sa.select(Post).options(defer(Post.body)).where(
        Post.status == "scheduled", Post.publish_at > now - timedelta(minutes=1))
    if hours is not None:
        query = query.where(Post.publish_at <= now + timedelta(hours=hours))
    return list(db.session.scalars(query.order_by(Post.publish_at, Post.id).limit(limit)))


def late(now: datetime, grace: timedelta = timedelta(minutes=1), limit: int = 50) -> list[Post]:
    """Return scheduled posts whose publish time passed more than grace ago: not published."""
    return list(db.session.scalars(
        sa.select(Post).options(defer(Post.body))
        .where(Post.status == "scheduled", Post.publish_at <= now - grace)
        .order_by(Post.publish_at, Post.id).limit(limit)))


def _published(body: bool = False) -> sa.Select:
    query = sa.select(Post).where(Post.status == "published")
    return query if body else query.options(defer(Post.body))


def recently_published(limit: int = 10, body: bool = False) -> list[Post]:
    """Return the latest published posts, newest first."""
    return list(db.session.scalars(
        _published(body).order_by(Post.published_at.desc(), Post.id.desc()).limit(limit)))


LEAD_CHARACTERS = 2000  # enough of a body's Markdown to find its first paragraph


def published_page(page: int, size: int) -> list[sa.Row]:
    """Return page (from 1) of the public list, newest first, plus one to tell if more follow.

    Each row has id, title, slug, published_at and lead: the start of the body, for
    an excerpt (a whole body may be 200 kB).
    """
    return list(db.session.execute(
        sa.select(Post.id, Post.title, Post.slug, Post.published_at,
                  sa.func.substr(Post.body, 1, LEAD_CHARACTERS).label("lead"))
        .where(Post.status == "published")
        .order_by(Post.published_at.desc(), Post.id.desc())
        .limit(size + 1).offset((page - 1) * size)))


def published_post(slug: str, conn: sa.Connection | None = None) -> sa.Row | None:
    """Return the published post at slug with the site's row beside it, in one read.

    The row has the post's id, title, slug, body, published_at, version and updated_at,
    and webapp.site.state.columns() (None when the site has no row yet): all a public post
    page shows and validates against. None for anything the public may not see. Read on
    conn when given, else in the session.
    """
    conn = conn or db.session.connection()
    return conn.execute(PUBLISHED_POST, {"slug": slug}).one_or_none()


def _published_at_slug(*columns: QueryableAttribute[Any]) -> sa.Select:
    """Return a read of columns of the published post at :slug, the site's row beside them.

    With when the page turns wrong next (unpublish_at, next_change) and the clock (db_now).
    """
    next_change = (sa.select(sa.func.min(ScheduledChange.apply_at))
                   .where(ScheduledChange.post_id == Post.id).scalar_subquery())
    return (sa.select(*columns, Post.version.label("post_version"), Post.updated_at,
                      Post.unpublish_at, next_change.label("next_change"),
                      next_release_of(Post.id).label("next_release"), DB_NOW,
                      *state.columns())
            .outerjoin(SiteState, SiteState.id == SiteState.ROW)
            .where(Post.slug == sa.bindparam("slug"), Post.status == "published"))


# built once: a public page's read is most of what a 304 costs
PUBLISHED_POST = _published_at_slug(Post.id, Post.title, Post.slug, Post.body,
                                    Post.published_at)
# what a post page validates against (webapp.views.site.post_validators), nothing to render
PUBLISHED_POST_VALIDATORS = _published_at_slug(Post.id)


# what a list (the home, the feed) validates against: the site's row (None columns when
# there is none yet), the next publish, takedown and change of any post, and the clock
_ONE_ROW = sa.select(sa.literal(1).label("one")).subquery("one_row")
LISTING = (sa.select(*state.columns(), *(read.label(name) for read, name in zip(
    next_due_reads(), ("next_publish", "next_unpublish", "next_change", "next_release"),
    strict=True)), DB_NOW)
    .select_from(_ONE_ROW.outerjoin(SiteState, SiteState.id == SiteState.ROW)))
# the post at :slug that is not live, for its 404: its id and when it is due, if scheduled
HIDDEN_POST = sa.select(Post.id, Post.status, Post.publish_at,
                        next_release_of(Post.id).label("next_release"), DB_NOW).where(
    Post.slug == sa.bindparam("slug"), Post.status != "published")


def listing() -> sa.Row:
    """Return the site's row with the next moments any post changes (LISTING), in the session."""
    return db.session.execute(LISTING).one()


def lists_change_at(row: sa.Row) -> datetime | None:
    """Return when the public lists next change from a LISTING row (None: nothing is due)."""
    return min((t for t in (row.next_publish, row.next_unpublish, row.next_change,
                            row.next_release) if t is not None), default=None)


def hidden_post(slug: str, conn: sa.Connection | None = None) -> sa.Row | None:
    """Return the post at slug the public may not see (HIDDEN_POST), None if there is none."""
    return (conn or db.session.connection()).execute(HIDDEN_POST, {"slug": slug}).one_or_none()


def published_by_slug(slug: str) -> Post | None:
    """Return the published post at slug; None for anything the public may not see."""
    return db.session.scalar(_published(body=True).where(Post.slug == slug))


def api_page(status: str | None, page: int, size: int) -> list[Post]:
    """Return page (from 1) of posts, newest first, bodies not loaded, plus one more if any.

    For the JSON API's ?page= (the Leader view work); the editors' list uses keyset cursors.
    """
    stmt = sa.select(Post).options(defer(Post.body))
    if status:
        stmt = stmt.where(Post.status == status)
    return list(db.session.scalars(
        stmt.order_by(Post.id.desc()).offset((page - 1) * size).limit(size + 1)))
