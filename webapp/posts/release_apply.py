"""Releases, the publish leader's side: a due release applied whole, in one transaction, once.

Fenced like a publication: the release row is taken FOR UPDATE SKIP LOCKED and moved
from scheduled to published by a conditional UPDATE that also holds only while the
caller leads the publish key (its term and holder: webapp.leadership.fence.leads), so
two processes that both believe they lead cannot apply it twice, and a deposed one not
at all. In the same transaction: its posts move (each by the same conditional UPDATE as
a post's own publication, `move`), changes are swapped in, the settings saved, each
post's own event written (post.published, …) beside one release.published, and the
public pages' version bumped once. The caches are purged once, from the release's event
(webapp.plugins.purges): the items' events carry the release's id.

What no longer fits when it goes (a post published meanwhile, one taken down by hand) is
skipped and written in the release's result, which the release's page shows.
"""

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa

from ..db import wake_scheduler
from ..extensions import db
from ..leadership.fence import leads
from ..leadership.keys import PLUGINS, PUBLISH
from ..models import OutboxEvent, Post, Release, ReleaseItem
from ..site import state
from . import revisions
from .lifecycle import SCHEDULABLE, move
from .outbox import write_outbox

TOPIC = Release.TOPIC


def _take(now: datetime, holder: str, term: int) -> Release | None:
    """Take the first due release (skipping one an editor holds) and mark it published, fenced."""
    due = db.session.scalar(
        sa.select(Release.id).where(Release.status == "scheduled", Release.release_at <= now)
        .order_by(Release.release_at, Release.id).limit(1).with_for_update(skip_locked=True))
    if due is None:
        return None
    fence = [leads(PUBLISH.value, term, holder)] if term else []
    taken = db.session.execute(
        sa.update(Release).where(Release.id == due, Release.status == "scheduled",
                                 Release.release_at <= now, *fence)
        .values(status="published", published_at=now, version=Release.version + 1,
                updated_at=now)
        .returning(Release.id).execution_options(synchronize_session=False)).scalar()
    return db.session.get(Release, taken, populate_existing=True) if taken else None


def _change(release: Release, ids: list[int], now: datetime) -> list[sa.Row]:
    """Swap in the release's new texts of ids; return the posts moved (with their status)."""
    if not ids:
        return []
    mine = sa.and_(ReleaseItem.release_id == release.id, ReleaseItem.kind == "change",
                   ReleaseItem.post_id == Post.id)
    text = {column: sa.select(getattr(ReleaseItem, column)).where(mine).scalar_subquery()
            for column in ("title", "body")}
    moved = list(move([Post.id.in_(ids)], {**text, "updated_at": now}, Post.status))
    texts = {item.post_id: item for item in db.session.scalars(
        sa.select(ReleaseItem).where(ReleaseItem.release_id == release.id,
                                     ReleaseItem.kind == "change"))}
    for row in moved:
        item = texts[row.id]
        revisions.keep(row.id, item.title or "", item.body or "", "change",
                       row.status == "published", (release.author_id, release.author), at=now)
    return moved


def apply_due(now: datetime, limit: int = 1, holder: str = "", term: int = 0) -> list[int]:
    """Apply the first due release whole, in one transaction; commit; return [its id] ([]
    when none is due, or another process took it). limit is the pace's batch size: a
    release is one unit whatever its size."""
    release = _take(now, holder, term)
    if release is None:
        db.session.commit()
        return []
    items = db.session.execute(sa.select(
        ReleaseItem.kind, ReleaseItem.post_id, ReleaseItem.site_name,
        ReleaseItem.site_description).where(ReleaseItem.release_id == release.id)).all()
    wanted: dict[str, list[int]] = {"publish": [], "unpublish": [], "change": []}
    settings = None
    for item in items:
        if item.kind == "settings":
            settings = item
        else:
            wanted[item.kind].append(item.post_id)
    changed = _change(release, wanted["change"], now)
    keep_expiry = sa.case((Post.unpublish_at > now, Post.unpublish_at), else_=None)
    published = move([Post.id.in_(wanted["publish"]), Post.status.in_(SCHEDULABLE)],
                     {"status": "published", "published_at": now, "publish_at": now,
                      "unpublish_at": keep_expiry, "updated_at": now}) if wanted["publish"] else []
    revisions.mark_live([row.id for row in published])
    unpublished = move([Post.id.in_(wanted["unpublish"]), Post.status == "published"],
                       {"status": "unpublished", "unpublish_at": None, "updated_at": now}
                       ) if wanted["unpublish"] else []
    # a post is in a release once: a changed one is neither published nor taken down by it
    live_changed = [row for row in changed if row.status == "published"]
    write_outbox("post.published", published, now, holder, release=release.id)
    write_outbox("post.unpublished", unpublished, now, holder, release=release.id)
    write_outbox("post.updated", live_changed, now, holder, release=release.id)
    if settings is not None:
        kept = state.current()  # a release names the site and says what it is; its zone stays
        state.write_settings({"name": settings.site_name, "description": settings.site_description,
                              "timezone": kept.custom_timezone, "language": kept.custom_language},
                             now, holder, release=release.id)
    result = _result(wanted, published, unpublished, changed, settings is not None)
    release.result = result
    db.session.add(OutboxEvent(
        topic=TOPIC, instance=holder, created_at=now,
        dedupe_key=f"{TOPIC}:release:{release.id}:"
                   f"{release.created_at.isoformat(timespec='microseconds')}",
        payload=_payload(release, now, published, unpublished, live_changed, result)))
    state.bump(now)
    wake_scheduler(PLUGINS.name)
    wake_scheduler(PUBLISH.name)  # a post published may carry its unpublish time
    done = [release.id]  # read before the commit expires it (a read after: one more query)
    db.session.commit()
    return done


def _result(wanted: dict[str, list[int]], published: Sequence[sa.Row],
            unpublished: Sequence[sa.Row], changed: Sequence[sa.Row], settings: bool) -> dict:
    """Return what the release did, and what it skipped and why."""
    done = {"publish": {row.id for row in published},
            "unpublish": {row.id for row in unpublished},
            "change": {row.id for row in changed}}
    why = {"publish": "live already", "unpublish": "not live any more",
           "change": "deleted"}
    skipped = [{"post_id": post_id, "kind": kind, "why": why[kind]}
               for kind, ids in wanted.items() for post_id in ids if post_id not in done[kind]]
    return {"published": sorted(done["publish"]), "unpublished": sorted(done["unpublish"]),
            "changed": sorted(done["change"]), "settings": settings, "skipped": skipped}


def _payload(release: Release, now: datetime, published: Sequence[sa.Row],
             unpublished: Sequence[sa.Row], updated: Sequence[sa.Row], result: dict) -> dict:
    """Return the release.published event's payload: what a receiver and a purge need."""
    return {"release_id": release.id, "name": release.name, "at": now.isoformat(),
            "release_at": release.release_at.isoformat(),
            "published": result["published"], "unpublished": result["unpublished"],
            "changed": result["changed"], "settings": result["settings"],
            "skipped": len(result["skipped"]),
            # every slug whose page changed: a plain PURGE names pages, not keys
            "slugs": sorted({row.slug for row in (*published, *unpublished, *updated)})}


def next_release_read() -> sa.ScalarSelect:
    """Return the first release_at still to go, as a scalar subquery (lifecycle.next_due_reads)."""
    return sa.select(sa.func.min(Release.release_at)).where(
        Release.status == "scheduled").scalar_subquery()
