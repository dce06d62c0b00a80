"""Releases, the editors' side: a named set of changes with one time, made, edited, cancelled.

A release holds items: publish a post, take one down, change a live post's text, change
the site's name and description. Each is checked when it is added (the same words as the
post's own forms), and again when the release goes (release_apply): what no longer fits
then is skipped and said so in the release's result. A release is edited until it goes:
every edit locks its row, so an edit lands wholly before the publish leader takes it or
is refused after; afterwards it is read-only. Every edit is audited.
"""

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PUBLISH
from ..models import Post, Release, ReleaseItem
from ..ops import audit
from ..site import state
from ..site.xmltext import unsafe_character
from . import gate, revisions
from .edits import MAX_ID, check_fields, get_post
from .errors import PostError, PublishTimeInPast

MAX_NAME = 200
MAX_ITEMS = 2000  # a launch, not an import: 1,000 go live in well under a second
EDITABLE = ("scheduled", "held")  # held: due while publishing was paused, kept back
KINDS = ReleaseItem.KINDS
KIND_WORDS = {"publish": "Publish", "unpublish": "Take down", "change": "Change the text of",
              "settings": "Change the site's name and description"}


class ReleaseError(PostError):
    """A change to a release was refused; errors names each bad field."""


class ReleaseNotFound(ReleaseError):
    """No release has that id."""

    def __init__(self) -> None:
        super().__init__({"form": "That release does not exist."})


class StaleRelease(ReleaseError):
    """Someone else changed the release after this form was opened."""

    def __init__(self) -> None:
        super().__init__({"form": "Someone else changed this release after you opened it, so "
                                  "nothing was saved. Reload it to see their change."})


@dataclass(frozen=True)
class ItemSpec:
    """One item as typed: kind, the post (its id), a change's text, the settings' values."""

    kind: str
    post_id: int | None = None
    title: str | None = None
    body: str | None = None
    site_name: str | None = None
    site_description: str | None = None


def get_release(release_id: int, lock: bool = False) -> Release:
    """Return the release with release_id (lock: FOR UPDATE) or raise ReleaseNotFound."""
    if not 0 < release_id <= MAX_ID:
        raise ReleaseNotFound()
    query = sa.select(Release).where(Release.id == release_id)
    found = db.session.scalar(query.with_for_update() if lock else query)
    if found is None:
        raise ReleaseNotFound()
    return found


def items_of(release_id: int) -> list[ReleaseItem]:
    """Return a release's items in the order they were added."""
    return list(db.session.scalars(sa.select(ReleaseItem).where(
        ReleaseItem.release_id == release_id).order_by(ReleaseItem.id)))


def item_posts(items: Iterable[ReleaseItem]) -> dict[int, Post]:
    """Return the posts the items name, by id."""
    ids = [item.post_id for item in items if item.post_id is not None]
    if not ids:
        return {}
    return {post.id: post for post in db.session.scalars(sa.select(Post).where(Post.id.in_(ids)))}


def check_head(name: str, release_at: datetime | None, now: datetime) -> str:
    """Return the name cleaned, or raise ReleaseError naming the bad fields."""
    name = " ".join(name.split())
    errors = {}
    if not name:
        errors["name"] = "Give the release a name, e.g. Spring launch."
    elif found := unsafe_character(name):  # first: a lone surrogate cannot even be stored
        errors["name"] = f"Remove the character {found}: a name cannot hold it."
    elif len(name) > MAX_NAME:
        errors["name"] = f"Keep the name under {MAX_NAME} characters (it has {len(name)})."
    if release_at is None:
        errors["release_at"] = "Pick the time the release goes live."
    elif release_at <= now:
        errors.update(PublishTimeInPast(release_at, field="release_at",
                                        instead="publish each post now").errors)
    if errors:
        raise ReleaseError(errors)
    return name


def check_item(spec: ItemSpec, taken: Collection[int | None] = ()) -> ReleaseItem:
    """Return the item spec describes, checked; raise ReleaseError naming the bad field.

    taken: the post ids of the release's other items, None for its settings (a post is
    in a release once, the settings too).
    """
    if spec.kind not in KINDS:
        raise ReleaseError({"kind": "Pick what the item does: publish, take down, change the "
                                    "text of a post, or change the site's settings."})
    if spec.kind == "settings":
        return _settings_item(spec, taken)
    post = _item_post(spec, taken)
    item = ReleaseItem(kind=spec.kind, post_id=post.id)
    if spec.kind == "change":
        try:
            fields = check_fields(spec.title or "", post.slug, spec.body or "")
        except PostError as exc:
            raise ReleaseError({k: v for k, v in exc.errors.items() if k != "slug"}) from None
        if (fields.title, fields.body) == (post.title, post.body):
            raise ReleaseError({"body": "This is the text the post has now: change something "
                                        "first."})
        item.title, item.body = fields.title, fields.body
    return item


def _settings_item(spec: ItemSpec, taken: Collection[int | None]) -> ReleaseItem:
    if None in taken:
        raise ReleaseError({"kind": "This release changes the site's settings already: "
                                    "remove that item first."})
    try:
        new = state.check_settings(spec.site_name or "", spec.site_description or "")
    except state.SiteSettingsError as exc:
        raise ReleaseError({f"site_{k}": v for k, v in exc.errors.items()}) from None
    return ReleaseItem(kind="settings", site_name=new["name"], site_description=new["description"])


def _item_post(spec: ItemSpec, taken: Collection[int | None]) -> Post:
    """Return the post a post's item names, if the item may do its kind to it."""
    if spec.post_id is None:
        raise ReleaseError({"post_id": "Pick a post."})
    try:
        post = get_post(spec.post_id)
    except PostError:
        raise ReleaseError({"post_id": "That post does not exist (any more)."}) from None
    if post.id in taken:
        raise ReleaseError({"post_id": f"“{post.title}” is in this release already: remove "
                                       "it first to change what the release does with it."})
    if spec.kind == "publish" and post.status == "published":
        raise ReleaseError({"post_id": f"“{post.title}” is live already."})
    if spec.kind == "unpublish" and post.status != "published":
        raise ReleaseError({"post_id": f"“{post.title}” is not live: only a live post can be "
                                       "taken down."})
    if spec.kind != "unpublish":  # a release takes it live: review's gate, as every way live
        try:
            gate.refuse_going_live(post.id, "post_id")
        except gate.NeedsReview as exc:
            raise ReleaseError(exc.errors) from None
    return post


def _editable(release_id: int, version: int | None) -> Release:
    """Lock a release to edit it, or raise: gone out, cancelled, or changed since version."""
    release = get_release(release_id, lock=True)
    if release.status not in EDITABLE:
        db.session.rollback()
        word = "went live" if release.status == "published" else "was cancelled"
        raise ReleaseError({"form": f"This release {word}, so it cannot change any more; "
                                    "nothing was saved."})
    if version is not None and version != release.version:
        db.session.rollback()
        raise StaleRelease()
    return release


def hold_due(now: datetime) -> list[tuple[int, str]]:
    """Hold the releases already due (a publishing freeze's "hold" on resume): none goes
    until an editor gives it a new time. Return them (id, name); the caller commits."""
    return [(row.id, row.name) for row in db.session.execute(
        sa.update(Release).where(Release.status == "scheduled", Release.release_at <= now)
        .values(status="held", version=Release.version + 1)
        .returning(Release.id, Release.name))]


def came_due(now: datetime) -> list[tuple[int, str]]:
    """Return the releases already due (id, name), first due first: what a publishing
    freeze's "publish" on resume lets go."""
    return [(row.id, row.name) for row in db.session.execute(
        sa.select(Release.id, Release.name)
        .where(Release.status == "scheduled", Release.release_at <= now)
        .order_by(Release.release_at, Release.id))]


def _checked_items(specs: Sequence[ItemSpec]) -> list[ReleaseItem]:
    """Check specs in order (each against those before it); name a bad one's field by its
    place: items[3].post_id."""
    if len(specs) > MAX_ITEMS:
        raise ReleaseError({"items": f"A release holds at most {MAX_ITEMS} items (this one "
                                     f"has {len(specs)})."})
    ids = [s.post_id for s in specs if s.post_id is not None and 0 < s.post_id <= MAX_ID]
    if ids:  # read the posts at once: get_post then finds each in the session
        list(db.session.scalars(sa.select(Post).where(Post.id.in_(ids))))
    items: list[ReleaseItem] = []
    taken: set[int | None] = set()
    for n, spec in enumerate(specs):
        try:
            items.append(check_item(spec, taken))
            taken.add(items[-1].post_id)
        except ReleaseError as exc:
            raise ReleaseError({f"items[{n}].{k}" if k != "form" else "items": v
                                for k, v in exc.errors.items()}) from None
    return items


def create_release(name: str, release_at: datetime | None,
                   specs: Sequence[ItemSpec] = ()) -> Release:
    """Make a release of specs at release_at, audited; commit; return it."""
    now = database_now()
    name = check_head(name, release_at, now)
    items = _checked_items(specs)
    author_id, author = revisions.author_now()
    release = Release(name=name, release_at=release_at, status="scheduled", version=1,
                      author_id=author_id, author=author[:254])
    db.session.add(release)
    db.session.flush()
    for item in items:
        item.release_id = release.id
    db.session.add_all(items)
    audit.record("release.create", audit.target("release", release.id, name),
                 {"release_at": release_at, "items": len(items)})
    wake_scheduler(PUBLISH.name)  # delivered at commit: the leader sleeps until the time
    db.session.commit()
    return release


def update_release(release_id: int, name: str, release_at: datetime | None,
                   version: int | None = None,
                   specs: Sequence[ItemSpec] | None = None) -> Release:
    """Rename or move a release (and with specs, replace its items); commit; return it."""
    now = database_now()
    release = _editable(release_id, version)
    try:
        name = check_head(name, release_at, now)
        items = _checked_items(specs) if specs is not None else None
    except ReleaseError:
        db.session.rollback()
        raise
    before = {"name": release.name, "release_at": release.release_at}
    release.name, release.release_at = name, release_at  # type: ignore[assignment]
    release.status = "scheduled"  # a held one goes again, at its new time (checked ahead)
    release.version += 1
    detail: dict[str, Any] = audit.changes(before, {"name": name, "release_at": release_at})
    if items is not None:
        db.session.execute(sa.delete(ReleaseItem).where(ReleaseItem.release_id == release.id))
        for item in items:
            item.release_id = release.id
        db.session.add_all(items)
        detail["items"] = len(items)
    audit.record("release.edit", audit.target("release", release.id, name), detail)
    wake_scheduler(PUBLISH.name)
    db.session.commit()
    return release


def add_item(release_id: int, spec: ItemSpec, version: int | None = None) -> ReleaseItem:
    """Add one item to a release still to go, audited; commit; return it."""
    release = _editable(release_id, version)
    try:
        item = check_item(spec, {item.post_id for item in items_of(release_id)})
    except ReleaseError:
        db.session.rollback()
        raise
    item.release_id = release.id
    db.session.add(item)
    release.version += 1
    audit.record("release.add", audit.target("release", release.id, release.name),
                 {"kind": item.kind, "post": item.post_id})
    db.session.commit()
    return item


def remove_item(release_id: int, item_id: int, version: int | None = None) -> None:
    """Take one item out of a release still to go, audited; commit."""
    release = _editable(release_id, version)
    gone = db.session.execute(sa.delete(ReleaseItem).where(
        ReleaseItem.release_id == release_id, ReleaseItem.id == item_id)
        .returning(ReleaseItem.kind, ReleaseItem.post_id)).first()
    if gone is None:
        db.session.rollback()
        raise ReleaseError({"form": "That item is not in this release (any more)."})
    release.version += 1
    audit.record("release.remove", audit.target("release", release.id, release.name),
                 {"kind": gone.kind, "post": gone.post_id})
    db.session.commit()


def cancel_release(release_id: int, version: int | None = None) -> Release:
    """Cancel a release still to go (its items stay, for the record), audited; commit."""
    release = _editable(release_id, version)
    release.status = "cancelled"
    release.version += 1
    audit.record("release.cancel", audit.target("release", release.id, release.name),
                 {"release_at": release.release_at})
    db.session.commit()
    return release


def list_releases(statuses: Sequence[str] = Release.STATUSES, limit: int = 100,
                  offset: int = 0) -> list[Release]:
    """Return releases with one of statuses: the ones to go first (soonest), then the rest
    newest first (from offset)."""
    return list(db.session.scalars(
        sa.select(Release).where(Release.status.in_(list(statuses)))
        .order_by(sa.case((Release.status == "held", -1), (Release.status == "scheduled", 0),
                          else_=1),
                  sa.case((Release.status == "scheduled", Release.release_at)),
                  Release.release_at.desc(), Release.id.desc()).offset(offset).limit(limit)))


def item_counts(release_ids: Sequence[int]) -> dict[int, int]:
    """Return how many items each release holds."""
    if not release_ids:
        return {}
    rows = db.session.execute(sa.select(ReleaseItem.release_id, sa.func.count()).where(
        ReleaseItem.release_id.in_(list(release_ids))).group_by(ReleaseItem.release_id))
    return {release_id: n for release_id, n in rows}


def upcoming_releases(limit: int = 10) -> list[Release]:
    """Return the next releases to go, soonest first."""
    return list_releases(("scheduled",), limit)


CHOICES = 300  # posts each of the add forms offers, newest first


def choices(release_id: int) -> dict[str, list[Post]]:
    """Return the posts the add forms offer, not in the release yet: those to publish (not
    live) and those to take down or change (live), newest first."""
    inside = sa.select(ReleaseItem.post_id).where(ReleaseItem.release_id == release_id,
                                                  ReleaseItem.post_id.is_not(None))
    base = (sa.select(Post).options(sa.orm.load_only(Post.id, Post.title, Post.status))
            .where(Post.id.not_in(inside)).order_by(Post.id.desc()).limit(CHOICES))
    return {"hidden": list(db.session.scalars(base.where(Post.status != "published"))),
            "live": list(db.session.scalars(base.where(Post.status == "published")))}


def releases_of(post_id: int) -> list[tuple[Release, str]]:
    """Return the releases still to go that name the post, soonest first, with what each
    does to it (the item's kind)."""
    return [(release, kind) for release, kind in db.session.execute(
        sa.select(Release, ReleaseItem.kind).join(ReleaseItem, ReleaseItem.release_id == Release.id)
        .where(ReleaseItem.post_id == post_id, Release.status == "scheduled")
        .order_by(Release.release_at, Release.id))]
