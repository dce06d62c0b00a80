"""The publish key's tick: publish due posts, unpublish expired ones (the writes are in posts)."""

from collections.abc import Callable, Sized
from datetime import datetime, timedelta
from functools import partial

from flask import current_app

from .. import posts
from ..leadership.fence import record_work
from ..leadership.keys import PUBLISH
from ..ops import alerts
from ..ops.freezes import is_frozen
from .pace import Pace

# Due posts that this tick could not take are row-locked by another transaction (a frozen
# or evicted process's; the server ends it within LEADER_STALE_SECONDS / 2): look
# again a little later instead of spinning on the same past publish_at.
LOCKED_RETRY = timedelta(seconds=0.25)
FROZEN_RECHECK = timedelta(seconds=5)  # resume NOTIFYs the leader; this bounds a missed one
# the leader's four kinds of post work, each done in fenced batches of one transaction
KINDS: dict[str, Callable[..., Sized]] = {
    "published": posts.publish_due, "changed": posts.apply_due_changes,
    "unpublished": posts.unpublish_expired, "released": posts.apply_due_releases}
FENCED = ("released",)  # fenced by the leadership's term too (a release is one big unit)


def tick(now: datetime, holder: str = "", term: int = 0) -> datetime | None:
    """Do one unit of publish work at now; return when the next one is due.

    A post's write is fenced by the post's own status; a release's by its status and the
    leadership (term, holder).
    While publishing is frozen the leader keeps the key and does nothing. Posts still
    scheduled OPS_POST_LATE_SECONDS after their time get an ops.post_late alert each.
    """
    if is_frozen("publishing"):
        return now + FROZEN_RECHECK
    done, more = _work(now, holder, term)
    if any(done.values()):
        changed = f", changed {done['changed']}" if done["changed"] else ""
        released = f", released {done['released']}" if done["released"] else ""
        record_work(PUBLISH.value, now, f"published {done['published']}, unpublished "
                    f"{done['unpublished']}{changed}{released}", term=term or None,
                    holder=holder)
    if more:
        return now  # a backlog, or out of time: the runner heartbeats and calls again at once
    upcoming = posts.next_due()
    late = current_app.config["OPS_POST_LATE_SECONDS"]
    if upcoming is not None and upcoming <= now - timedelta(seconds=late):
        alerts.posts_late(now, late, holder)  # still due long after their time: say so
    if upcoming is not None and upcoming <= now and not any(done.values()):
        return now + LOCKED_RETRY
    return upcoming


def _work(now: datetime, holder: str, term: int = 0) -> tuple[dict[str, int], bool]:
    """Move due posts a batch of each kind in turn, round after round, until a round finds
    none full or time is up; return what moved and whether work is left.

    The first batch is always done, so a tick makes progress however slow the database
    is; another starts only if it should end within the budget (webapp.scheduling.pace).
    A round cut short goes on next tick, so a backlog of one kind never holds back the
    others (a takedown behind 10,000 publications); a kind found with nothing due sits
    out the rest of the tick.
    """
    pace = Pace.of("publish", posts.BATCH_SIZE)
    pace.start()
    done = dict.fromkeys(KINDS, 0)
    queue, full = pace.queue or list(KINDS), pace.full
    empty: set[str] = set()
    first = True
    while queue:
        if not first and pace.over():
            pace.queue, pace.full = queue, full
            return done, True
        first, kind = False, queue.pop(0)
        fence = {"term": term} if kind in FENCED else {}
        moved, more = pace.run(partial(KINDS[kind], now, holder=holder, **fence))
        done[kind] += moved
        (full if more else empty).add(kind)
        if not queue and full:  # the next round: the kinds not found empty this tick
            queue, full = [k for k in KINDS if k not in empty], set()
    pace.queue, pace.full = [], set()
    return done, False
