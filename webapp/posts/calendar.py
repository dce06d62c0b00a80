"""The editorial calendar's side of posts: days in the viewer's zone, the posts on them, a move.

A day is a bucket in the viewer's zone, not UTC: a post at 23:30 UTC is on the next day
in Europe/Paris. The days run from one local midnight to the next, so a day when the
clocks change is 23 or 25 hours long. A move is change_post with a new publish time (the
post's unpublish time kept), so it is refused exactly as the editor's form is.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from sqlalchemy.orm import defer

from ..extensions import db
from ..models import Post, Release, ReleaseItem, ScheduledChange
from .changes import change_post
from .edits import get_post
from .errors import PostError
from .pending import changes_with_posts

VIEWS = ("month", "week")
PER_DAY = 8  # posts a day of the month shows; the rest are counted ("+12 more")
PER_HOUR = 4  # posts an hour of the week shows


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
class Hour:
    """One hour of a day on the week page: its wall time, what the clocks do, if it is over."""

    hour: int
    note: str  # "" or what the clocks do in it ("the clocks skip this hour")
    skipped: bool  # no such wall time that day: nothing can be scheduled in it
    past: bool

    @property
    def label(self) -> str:
        return f"{self.hour:02d}:00"


def _exists(wall: datetime, zone: ZoneInfo) -> bool:
    """Return whether a naive wall time happens in zone (False in the hour clocks skip)."""
    aware = wall.replace(tzinfo=zone)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall


def _repeats(wall: datetime, zone: ZoneInfo) -> bool:
    """Return whether a naive wall time happens twice in zone (the hour clocks go back)."""
    return _exists(wall, zone) and wall.replace(tzinfo=zone, fold=0).utcoffset() != \
        wall.replace(tzinfo=zone, fold=1).utcoffset()


def day_hours(day: date, zone: ZoneInfo, now: datetime) -> list[Hour]:
    """Return a day's 24 wall-clock hours in zone, marking the hours clocks skip or repeat.

    An hour is past once its last minute has gone (a post moved into the current hour may
    still be in time; one moved to a minute gone is refused as the form refuses it).
    """
    hours = []
    for h in range(24):
        first, last = (datetime.combine(day, time(h, m)) for m in (0, 59))
        gone = [not _exists(wall, zone) for wall in (first, last)]
        skipped = all(gone)
        twice = _repeats(first, zone) or _repeats(last, zone)
        note = ("the clocks skip this hour" if skipped else
                "the clocks skip part of this hour" if any(gone) else
                "this hour happens twice: the clocks go back" if twice else "")
        end = last.replace(tzinfo=zone, fold=1, second=59).astimezone(UTC)
        hours.append(Hour(h, note, skipped, end < now))
    return hours


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

    PER_DAY in time order and its count.
    """
    bounds = days.bounds()
    found = _bucketed([end for _day, _start, end in bounds], days.start, PER_DAY)
    return {bounds[i][0]: day_posts for i, day_posts in found.items()}


def posts_by_hour(days: Span) -> dict[tuple[date, int], DayPosts]:
    """Return the span's posts by (local day, wall-clock hour): each hour's first PER_HOUR.

    An hour is the UTC range from its wall time to the next hour's, so the hour the clocks
    skip is empty and the one they repeat holds both of its runs.
    """
    keys, ends = [], []
    for day in days.days:
        for hour in range(24):
            keys.append((day, hour))
            following = datetime.combine(day, time(hour)) + timedelta(hours=1)
            ends.append(following.replace(tzinfo=days.zone).astimezone(UTC))
    ends[-1] = days.end
    found = _bucketed(ends, days.start, PER_HOUR)
    return {keys[i]: hour_posts for i, hour_posts in found.items()}


def _bucketed(ends: list[datetime], start: datetime, per: int) -> dict[int, DayPosts]:
    """Return the scheduled and published posts from start by bucket (the first end after
    their time): each bucket's first per in time order, and its count.

    The database ranks and counts them per bucket (one query per status), so a crowded month
    costs its counts, not a chip per post.
    """
    ranked: dict[int, list[tuple[datetime, int]]] = {}
    totals: dict[int, int] = {}
    for status, column in (("scheduled", Post.publish_at), ("published", Post.published_at)):
        bucket = sa.case(*[(column < end, i) for i, end in enumerate(ends)])
        inner = (sa.select(Post.id, column.label("at"), bucket.label("bucket"),
                           sa.func.row_number().over(partition_by=bucket,
                                                     order_by=(column, Post.id)).label("n"),
                           sa.func.count().over(partition_by=bucket).label("total"))
                 .where(Post.status == status, column >= start, column < ends[-1])
                 .subquery())
        for row in db.session.execute(sa.select(inner).where(inner.c.n <= per)):
            ranked.setdefault(row.bucket, []).append((row.at, row.id))
            totals[row.bucket] = totals.get(row.bucket, 0) + (row.total if row.n == 1 else 0)
    firsts = {i: [post_id for _at, post_id in sorted(found)[:per]]
              for i, found in ranked.items()}
    loaded = {post.id: post for post in db.session.scalars(
        sa.select(Post).options(defer(Post.body))
        .where(Post.id.in_([post_id for ids in firsts.values() for post_id in ids])))}
    return {i: DayPosts([loaded[p] for p in ids if p in loaded], totals[i])
            for i, ids in firsts.items()}  # (a post deleted meanwhile is left out)


@dataclass(frozen=True)
class ChangeChip:
    """A live post's scheduled change on the calendar: when, and which post."""

    apply_at: datetime
    post_id: int
    title: str


def changes_by_day(days: Span) -> dict[date, list[ChangeChip]]:
    """Return the scheduled changes to live posts in the span, by local day (one a post at
    most, so a page holds few)."""
    found: dict[date, list[ChangeChip]] = {}
    rows = db.session.execute(changes_with_posts().where(
        ScheduledChange.apply_at >= days.start, ScheduledChange.apply_at < days.end))
    for apply_at, post_id, title in rows:
        day = apply_at.astimezone(days.zone).date()
        found.setdefault(day, []).append(ChangeChip(apply_at, post_id, title))
    return found


@dataclass(frozen=True)
class ReleaseChip:
    """A release on the calendar, one thing whatever it holds: when, its name, its size."""

    release_at: datetime
    release_id: int
    name: str
    status: str
    items: int


def releases_by_day(days: Span) -> dict[date, list[ReleaseChip]]:
    """Return the releases to go or gone in the span (not the cancelled), by local day."""
    found: dict[date, list[ReleaseChip]] = {}
    rows = db.session.execute(
        sa.select(Release.release_at, Release.id, Release.name, Release.status,
                  sa.func.count(ReleaseItem.id))
        .outerjoin(ReleaseItem, ReleaseItem.release_id == Release.id)
        .where(Release.status != "cancelled", Release.release_at >= days.start,
               Release.release_at < days.end)
        .group_by(Release.id).order_by(Release.release_at, Release.id))
    for row in rows:
        day = row[0].astimezone(days.zone).date()
        found.setdefault(day, []).append(ReleaseChip(*row))
    return found


def move_post(post_id: int, version: int, publish_at: datetime) -> Post:
    """Reschedule a scheduled post to publish_at, keeping its unpublish time.

    Refused like the editor's form: a time past, a post changed since version (StalePost),
    one that is no longer scheduled, an unpublish time the new time would pass.
    """
    post = get_post(post_id)
    if post.status != "scheduled":
        raise PostError({"form": f"This post is {post.status} now, not scheduled; "
                                 "nothing changed."})
    return change_post(post_id, version, None, {"publish_at": publish_at})
