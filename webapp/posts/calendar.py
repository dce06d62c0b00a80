"""The editorial calendar's side of posts: days in the viewer's zone, the posts on them, a move.

A day is a bucket in the viewer's zone, not UTC: a post at 23:30 UTC is on the next day
in Europe/Paris. The days run from one local midnight to the next, so a day when the
clocks change is 23 or 25 hours long. A move is schedule_post with the post's own
unpublish time, so it is refused exactly as the editor's form is.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from sqlalchemy.orm import defer

from ..extensions import db
from ..models import Post
from .edits import get_post
from .errors import PostError
from .lifecycle import schedule_post

VIEWS = ("month", "week")
PER_DAY = {"month": 8, "week": 60}  # posts a day shows; the rest are counted ("+12 more")


def local_midnight(day: date, zone: ZoneInfo) -> datetime:
    """Return the UTC moment day starts in zone (when midnight is skipped, the moment it is)."""
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)


@dataclass(frozen=True)
class Span:
    """The days a calendar page shows: whole weeks, Monday first, and their bounds in UTC."""

    view: str
    anchor: date
    days: tuple[date, ...]
    zone: ZoneInfo

    @property
    def weeks(self) -> list[tuple[date, ...]]:
        return [self.days[i:i + 7] for i in range(0, len(self.days), 7)]

    @property
    def start(self) -> datetime:
        return local_midnight(self.days[0], self.zone)

    @property
    def end(self) -> datetime:
        return local_midnight(self.days[-1] + timedelta(days=1), self.zone)

    def bounds(self) -> list[tuple[date, datetime, datetime]]:
        """Return each day with the UTC moments it starts and ends."""
        edges = [local_midnight(self.days[0] + timedelta(days=i), self.zone)
                 for i in range(len(self.days) + 1)]
        return [(day, edges[i], edges[i + 1]) for i, day in enumerate(self.days)]

    def step(self, direction: int) -> date:
        """Return the anchor of the previous (-1) or next (+1) page."""
        if self.view == "week":
            return self.anchor + timedelta(days=7 * direction)
        month = self.anchor.year * 12 + self.anchor.month - 1 + direction
        return date(month // 12, month % 12 + 1, 1)

    def in_focus(self, day: date) -> bool:
        """Return whether day belongs to the page's month (a month page shows a few more)."""
        return self.view == "week" or day.month == self.anchor.month


def span(view: str, anchor: date, zone: ZoneInfo) -> Span:
    """Return the days of the month or week page around anchor."""
    if view == "week":
        first = anchor - timedelta(days=anchor.weekday())
        return Span(view, anchor, tuple(first + timedelta(days=i) for i in range(7)), zone)
    start = anchor.replace(day=1)
    after = (start + timedelta(days=32)).replace(day=1)
    first = start - timedelta(days=start.weekday())
    last = after - timedelta(days=1)
    last += timedelta(days=6 - last.weekday())
    count = (last - first).days + 1
    return Span("month", start, tuple(first + timedelta(days=i) for i in range(count)), zone)


@dataclass(frozen=True)
class DayPosts:
    """A day's first posts in time order, and how many fall on it in all."""

    posts: list[Post]
    total: int

    @property
    def hidden(self) -> int:
        return self.total - len(self.posts)


def posts_by_day(days: Span) -> dict[date, DayPosts]:
    """Return the span's scheduled and published posts by local day: each day's first

    PER_DAY[view] in time order and its count. The database ranks and counts them per day
    (one query per status), so a crowded month costs its counts, not a chip per post.
    """
    bounds = days.bounds()
    per_day = PER_DAY[days.view]
    ranked: dict[int, list[tuple[datetime, int]]] = {}
    totals: dict[int, int] = {}
    for status, column in (("scheduled", Post.publish_at), ("published", Post.published_at)):
        day = sa.case(*[(column < end, i) for i, (_day, _start, end) in enumerate(bounds)])
        inner = (sa.select(Post.id, column.label("at"), day.label("day"),
                           sa.func.row_number().over(partition_by=day,
                                                     order_by=(column, Post.id)).label("n"),
                           sa.func.count().over(partition_by=day).label("total"))
                 .where(Post.status == status, column >= days.start, column < days.end)
                 .subquery())
        for row in db.session.execute(sa.select(inner).where(inner.c.n <= per_day)):
            ranked.setdefault(row.day, []).append((row.at, row.id))
            totals[row.day] = totals.get(row.day, 0) + (row.total if row.n == 1 else 0)
    firsts = {i: [post_id for _at, post_id in sorted(found)[:per_day]]
              for i, found in ranked.items()}
    loaded = {post.id: post for post in db.session.scalars(
        sa.select(Post).options(defer(Post.body))
        .where(Post.id.in_([post_id for ids in firsts.values() for post_id in ids])))}
    return {bounds[i][0]: DayPosts([loaded[p] for p in ids if p in loaded], totals[i])
            for i, ids in firsts.items()}  # (a post deleted meanwhile is left out)


def move_post(post_id: int, version: int, publish_at: datetime) -> Post:
    """Reschedule a scheduled post to publish_at, keeping its unpublish time.

    Refused like the editor's form: a time past, a post changed since version (StalePost),
    one that is no longer scheduled, an unpublish time the new time would pass.
    """
    post = get_post(post_id)
    if post.status != "scheduled":
        raise PostError({"form": f"This post is {post.status} now, not scheduled; "
                                 "nothing changed."})
    return schedule_post(post_id, version, publish_at, post.unpublish_at)
