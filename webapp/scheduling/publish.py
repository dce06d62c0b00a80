"""The publish key's tick: publish due posts, unpublish expired ones (the writes are in posts)."""

from datetime import datetime, timedelta

from flask import current_app

from .. import posts
from ..leadership.keys import PUBLISH
from ..ops import alerts
from ..ops.freezes import is_frozen
from .work import record_work

# Due posts that this tick could not take are row-locked by another transaction (a frozen
# or evicted process's; the server ends it within DB_IDLE_IN_TRANSACTION_SECONDS): look
# again a little later instead of spinning on the same past publish_at.
LOCKED_RETRY = timedelta(seconds=0.25)
FROZEN_RECHECK = timedelta(seconds=5)  # resume NOTIFYs the leader; this bounds a missed one


def tick(now: datetime, instance: str = "", term: int = 0) -> datetime | None:
    """Do one unit of publish work at now; return when the next one is due.

    term is not needed here: every post write is fenced by the post's own status.
    While publishing is frozen the leader keeps the key and does nothing. Posts still
    scheduled OPS_POST_LATE_SECONDS after their time get an ops.post_late alert each.
    """
    if is_frozen("publishing"):
        return now + FROZEN_RECHECK
    published = posts.publish_due(now, posts.BATCH_SIZE, instance)
    changed = posts.apply_due_changes(now, posts.BATCH_SIZE, instance)
    unpublished = posts.unpublish_expired(now, posts.BATCH_SIZE, instance)
    if published or unpublished or changed:
        done = f"published {len(published)}, unpublished {len(unpublished)}"
        record_work(PUBLISH.value, now, done + (f", changed {len(changed)}" if changed else ""),
                    term=term or None, holder=instance)
    if posts.BATCH_SIZE in (len(published), len(unpublished), len(changed)):
        return now  # a backlog: come straight back for the next batch
    upcoming = posts.next_due()
    late = current_app.config.get("OPS_POST_LATE_SECONDS", alerts.POST_LATE_SECONDS)
    if upcoming is not None and upcoming <= now - timedelta(seconds=late):
        alerts.posts_late(now, late, instance)  # still due long after their time: say so
    if upcoming is not None and upcoming <= now and not (published or unpublished or changed):
        return now + LOCKED_RETRY
    return upcoming
