"""Built-in plugin: rebuild the sitemap from published posts, stored for every instance.

A timer rebuilds it, and so does every publish or unpublish (through the hooks),
so /sitemap.xml is current within moments and any instance can serve it.
"""

import json
from datetime import datetime
from urllib.parse import quote

import sqlalchemy as sa

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..models import OutboxEvent, PluginDocument, Post
from ..timefmt import html_datetime
from .base import HookEvent, Param, Plugin, RunContext

DOCUMENT = "sitemap.xml"
LIMIT = 50_000  # the sitemap protocol's limit per file

plugin = Plugin("sitemap", "Sitemap",
                "Rebuilds /sitemap.xml from the published posts on a timer and whenever "
                "a post is published or unpublished.")
plugin.default_timer("rebuild", "rebuild", name="Sitemap: rebuild", every=(15, "minutes"))


def rebuild(now: datetime, limit: int = LIMIT) -> int:
    """Store the sitemap entries (path and last change) of published posts; return how many."""
    rows = db.session.execute(
        sa.select(Post.slug, Post.updated_at, Post.published_at)
        .where(Post.status == "published")
        .order_by(Post.published_at.desc(), Post.id.desc()).limit(limit)).all()
    entries = [{"path": f"/posts/{quote(slug)}",
                # the moment, not a UTC date: 00:04 in Paris is not the day before there
                "lastmod": html_datetime(max(t for t in (updated, published) if t))}
               for slug, updated, published in rows]
    document = db.session.get(PluginDocument, DOCUMENT) or PluginDocument(name=DOCUMENT)
    if document.content is None or json.loads(document.content)["entries"] != entries:
        # the caches' copies go once the new list is stored, not only when its post changed
        # (that purge can come before this build: a reader then re-caches the old list)
        db.session.add(OutboxEvent(topic="sitemap.built", created_at=now,
                                   payload={"entries": len(entries)},
                                   dedupe_key=f"sitemap.built:{now.isoformat()}"))
        wake_scheduler("plugins")
    document.content_type = "application/json"
    document.content = json.dumps({"built_at": now.isoformat(), "entries": entries})
    document.updated_at = now
    db.session.add(document)
    db.session.commit()
    return len(entries)


def load() -> dict | None:
    """Return the stored sitemap ({built_at, entries}), or None before the first build."""
    document = db.session.get(PluginDocument, DOCUMENT)
    return json.loads(document.content) if document else None


@plugin.action("rebuild", params=[Param("limit", "int", LIMIT, minimum=1,
                                        help="most posts to list")])
def rebuild_action(ctx: RunContext, limit: int = LIMIT) -> str:
    """Rebuild /sitemap.xml from the published posts."""
    return f"{rebuild(ctx.started_at, limit)} posts listed"


@plugin.hook("on_publish")
def on_change(event: HookEvent) -> None:
    """Rebuild at once when a post appears or disappears (once for a burst of events)."""
    built = db.session.scalar(sa.select(PluginDocument.updated_at).where(
        PluginDocument.name == DOCUMENT))
    # the event was committed before it was fanned out (processed_at): a build that
    # started after that already lists its post
    fanned_out = db.session.scalar(sa.select(OutboxEvent.processed_at).where(
        OutboxEvent.id == event.id))
    db.session.rollback()
    if built is None or fanned_out is None or built <= fanned_out:
        rebuild(database_now())


plugin.hook("on_unpublish")(on_change)
plugin.hook("on_update")(on_change)  # its lastmod
