"""A release's preview link: the site as it will be once the release goes, for anyone holding it.

Like a post's preview link (previews): 256 random bits, only the SHA-256 stored, shown once,
ending at its expiry or when revoked (a new link ends the one before: a release has one).
It opens the home page as it will be (the posts the release publishes on top, those it
takes down gone, the new texts and the site's new name in place) and each post on it.
"""

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from ..db import database_now
from ..extensions import db
from ..models import Post, Release, ReleaseItem
from ..ops import audit
from .errors import PostError
from .previews import DAYS, MAX_TOKEN, hash_token
from .releases import get_release

FRONT = 20  # the posts the previewed home shows, as the site's first page does


def create_preview(release_id: int, days: int | None) -> tuple[Release, str]:
    """Make the release's preview link (ending the one before), audited; return the token."""
    if days not in DAYS:
        raise PostError({"days": "Choose 1, 7 or 30 days."})
    now = database_now()
    release = get_release(release_id, lock=True)
    if release.status != "scheduled":
        db.session.rollback()
        raise PostError({"form": "This release is not to go any more: its posts are what the "
                                 "site shows."})
    token = secrets.token_urlsafe(32)
    release.preview_hash = hash_token(token)
    release.preview_expires_at = now + timedelta(days=days)
    audit.record("release.preview", audit.target("release", release.id, release.name),
                 {"expires_at": release.preview_expires_at})
    db.session.commit()
    return release, token


def revoke_preview(release_id: int) -> None:
    """End the release's preview link now, audited."""
    release = get_release(release_id, lock=True)
    if release.preview_hash is None:
        db.session.rollback()
        raise PostError({"form": "This release has no preview link."})
    release.preview_hash = release.preview_expires_at = None
    audit.record("release.preview_revoke", audit.target("release", release.id, release.name))
    db.session.commit()


def release_for_token(token: str) -> Release | None:
    """Return the release a live preview token opens (to go still), or None."""
    if not token or len(token) > MAX_TOKEN:
        return None
    return db.session.scalar(sa.select(Release).where(
        Release.preview_hash == hash_token(token), Release.status == "scheduled",
        Release.preview_expires_at > database_now()))


@dataclass(frozen=True)
class Shown:
    """A post as it will read once the release goes."""

    id: int
    title: str
    slug: str
    body: str
    published_at: datetime | None
    status: str = "published"


@dataclass(frozen=True)
class SiteAfter:
    """The site's name and description once the release goes (None: as now)."""

    name: str | None
    description: str | None


def _items(release: Release) -> dict[str, dict[int, ReleaseItem]]:
    found: dict[str, dict[int, ReleaseItem]] = {kind: {} for kind in ReleaseItem.KINDS}
    for item in db.session.scalars(sa.select(ReleaseItem).where(
            ReleaseItem.release_id == release.id)):
        found[item.kind][item.post_id or 0] = item
    return found


def _shown(post: Post, items: dict[str, dict[int, ReleaseItem]], at: datetime | None) -> Shown:
    change = items["change"].get(post.id)
    return Shown(post.id, change.title if change and change.title else post.title, post.slug,
                 change.body if change and change.body is not None else post.body,
                 at or post.published_at)


def front(release: Release) -> tuple[list[Shown], SiteAfter | None]:
    """Return the home's first page as it will be once release goes, and the settings."""
    items = _items(release)
    going = list(items["publish"])
    newly = list(db.session.scalars(sa.select(Post).where(
        Post.id.in_(going), Post.status != "published").order_by(Post.id.desc()).limit(FRONT)))
    live = list(db.session.scalars(sa.select(Post).where(
        Post.status == "published", Post.id.not_in(list(items["unpublish"])))
        .order_by(Post.published_at.desc(), Post.id.desc()).limit(FRONT)))
    shown = [_shown(p, items, release.release_at) for p in newly] + [
        _shown(p, items, None) for p in live]
    settings = items["settings"].get(0)
    after = SiteAfter(settings.site_name, settings.site_description) if settings else None
    return shown[:FRONT], after


def post_after(release: Release, post_id: int) -> Shown | None:
    """Return one post as it will read once release goes; None if it will not be live."""
    items = _items(release)
    post = db.session.get(Post, post_id)
    if post is None or post_id in items["unpublish"]:
        return None
    if post.status == "published":
        return _shown(post, items, None)
    if post_id in items["publish"]:
        return _shown(post, items, release.release_at)
    return None
