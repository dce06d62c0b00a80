"""What each deploy's window looked like: posts due, publish lag, late, missed, gaps."""

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from ...extensions import db
from ...models import Deploy, Post
from .timeline import SPAN, Segment, Timeline, build_timeline, longest_gap

WINDOW = timedelta(minutes=30)  # a release's rolling restart happens well inside this
LATE_AFTER = timedelta(seconds=60)  # published later than this after its time: late


@dataclass
class DeployWindow:
    """One deploy and what happened between it and the end of its window."""

    deploy: Deploy
    start: datetime
    end: datetime
    ongoing: bool
    due: int
    published: int
    lag_p50: float | None
    lag_max: float | None
    late: int
    missed: int
    no_leader: dict[str, float]  # key name -> the longest time it had no leader, seconds


def report(now: datetime, span: timedelta = SPAN,
           timeline: Timeline | None = None) -> list[DeployWindow]:
    """Return the windows of the deploys of the last span, newest first.

    Their deploys and each key's leaders come from the timeline of that span (the status
    page draws it anyway): every window lies inside it.
    """
    timeline = timeline or build_timeline(now, span)
    deploys = timeline.deploys
    windows = []
    for index, deploy in enumerate(deploys):
        following = deploys[index + 1].at if index + 1 < len(deploys) else None
        end = min(t for t in (following, deploy.at + WINDOW, now) if t is not None)
        windows.append(measure(deploy, deploy.at, end, now, timeline.lanes))
    return windows[::-1]


def measure(deploy: Deploy, start: datetime, end: datetime, now: datetime,
            lanes: dict[str, list[Segment]]) -> DeployWindow:
    """Measure the posts due in [start, end) and the keys' leaderless time in it."""
    rows = db.session.execute(
        sa.select(Post.status, Post.publish_at, Post.published_at)
        .where(Post.publish_at >= start, Post.publish_at < end,
               Post.status.in_(("scheduled", "published", "unpublished")))).all()
    lags = sorted(max((published - due).total_seconds(), 0.0)
                  for status, due, published in rows
                  if status != "scheduled" and published is not None and due is not None)
    missed = sum(1 for status, due, _ in rows
                 if status == "scheduled" and due is not None and due <= now - LATE_AFTER)
    gaps = {name: longest_gap(segments, start, end) for name, segments in lanes.items()}
    return DeployWindow(
        deploy, start, end, ongoing=end >= now, due=len(rows), published=len(lags),
        lag_p50=statistics.median(lags) if lags else None, lag_max=lags[-1] if lags else None,
        late=sum(1 for lag in lags if lag > LATE_AFTER.total_seconds()), missed=missed,
        no_leader=gaps)
