"""Ops alerts: ops.* events in the outbox, once per occurrence, for the webhook endpoints.

An alert is an outbox row like post.published, and the plugin leader fans it out to the
endpoints subscribed to its topic like any event (signed, retried, redeliverable). Whoever
detects an occurrence writes it, in the same transaction as the change it reports when
there is one: a timer's automatic pause, an endpoint turning failing, an eviction (that
one inside the eviction's own statement, leadership/pg_sql.py). What several processes may
notice at once (a key without a leader, a late post) carries a dedupe key naming the
occurrence; it is UNIQUE, so the first writer wins and the others write nothing. Every
alert has one (the others name their subject and time): webhook ids derive from it.
"""

from datetime import datetime, timedelta

import sqlalchemy as sa

from ..db import insert_ignoring_conflicts, wake_scheduler
from ..extensions import db
from ..leadership.keys import PLUGINS, SchedulerKey
from ..models import OutboxEvent, Post, Timer

OPS_TOPICS = ("ops.no_leader", "ops.leader_evicted", "ops.post_late", "ops.timer_paused",
              "ops.webhook_failing", "ops.purge_failing")
LATE_BATCH = 100


def is_ops(topic: str) -> bool:
    """Return whether topic is an ops alert's."""
    return topic.startswith("ops.")


def record(topic: str, payload: dict, now: datetime, dedupe: str | None = None,
           holder: str = "") -> bool:
    """Add one alert to the current transaction (no commit); return whether it is new.

    With dedupe, an occurrence already written (by this process or another) adds nothing.
    """
    written = db.session.execute(
        insert_ignoring_conflicts(OutboxEvent, ["dedupe_key"])
        .values(topic=topic, post_id=None, payload={**payload, "at": now.isoformat()},
                instance=holder[:200], created_at=now, dedupe_key=dedupe)
        .returning(OutboxEvent.id)).first()
    if written is not None:
        wake_scheduler(PLUGINS.name)  # at commit: the plugin leader fans it out at once
    return written is not None


def no_leader(key: SchedulerKey, term: int, seconds: float, now: datetime,
              holder: str = "") -> bool:
    """Report key without a live leader for seconds since term's holder; once per term; commit."""
    new = record("ops.no_leader", {"key": key.name, "key_value": key.value, "term": term,
                                   "seconds": round(seconds, 1), "seen_by": holder},
                 now, f"ops.no_leader:{key.name}:{term}", holder)
    db.session.commit()
    return new


def _late_key(post_id: int, version: int) -> str:
    return f"ops.post_late:{post_id}:v{version}"  # a reschedule changes the version


def posts_late(now: datetime, seconds: float, holder: str = "") -> int:
    """Report scheduled posts due more than seconds ago, once per post and schedule; commit."""
    key = (sa.literal("ops.post_late:") + sa.cast(Post.id, sa.String) + sa.literal(":v")
           + sa.cast(Post.version, sa.String))
    late = db.session.execute(
        sa.select(Post.id, Post.slug, Post.title, Post.publish_at, Post.version)
        .where(Post.status == "scheduled", Post.publish_at <= now - timedelta(seconds=seconds),
               ~sa.exists().where(OutboxEvent.dedupe_key == key))
        .order_by(Post.publish_at, Post.id).limit(LATE_BATCH)).all()
    new = sum(record("ops.post_late", {
        "post_id": post_id, "slug": slug, "title": title, "publish_at": publish_at.isoformat(),
        "late_seconds": round((now - publish_at).total_seconds(), 1)},
        now, _late_key(post_id, version), holder)
        for post_id, slug, title, publish_at, version in late if publish_at is not None)
    db.session.commit()
    return new


def _at(now: datetime) -> str:
    """Return now as it names an occurrence in a dedupe key (webhook ids derive from it)."""
    return now.isoformat(timespec="microseconds")


def timer_paused(timer: Timer, reason: str, now: datetime) -> None:
    """Report a timer Soloist paused by itself (no commit: the pause's transaction)."""
    record("ops.timer_paused", {"timer_id": timer.id, "timer": timer.name,
                                "plugin": timer.plugin, "action": timer.action,
                                "failures": timer.consecutive_failures, "reason": reason}, now,
           f"ops.timer_paused:timer:{timer.id}:{_at(now)}")


def plugin_paused(name: str, reason: str, now: datetime) -> None:
    """Report a plugin Soloist paused, and so its timers (no commit)."""
    record("ops.timer_paused", {"plugin": name, "timer_id": None, "reason": reason}, now,
           f"ops.timer_paused:plugin:{name}:{_at(now)}")


def webhook_failing(endpoint_id: int, url: str, failures: int, error: str,
                    now: datetime) -> None:
    """Report an endpoint that turned failing (no commit); it is never told about itself."""
    record("ops.webhook_failing", {"endpoint_id": endpoint_id, "url": url,
                                   "failures": failures, "last_error": error}, now,
           f"ops.webhook_failing:{endpoint_id}:{_at(now)}")


def purge_failing(purger: str, failures: int, error: str, now: datetime) -> None:
    """Report a cache purger that turned failing (no commit): readers may see stale pages."""
    record("ops.purge_failing", {"purger": purger, "failures": failures, "last_error": error},
           now, f"ops.purge_failing:{purger}:{_at(now)}")


def slack_escape(value: str) -> str:
    """Escape &, < and > as Slack requires, so quoted text cannot @channel or make a link."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def text(topic: str, payload: dict) -> str:
    """Return one line a person reads in a chat room (Slack's {"text": ...}).

    Everything quoted (titles, names, reasons, errors) is escaped for Slack's mrkdwn.
    """
    p = {k: slack_escape(v) if isinstance(v, str) else v for k, v in payload.items()}
    lines = {
        "ops.no_leader": lambda: f"No leader for the {p['key']} key for {p['seconds']:g} s "
                                 f"(last term {p['term']}).",
        "ops.leader_evicted": lambda: f"Leader {p['holder']} of the {p['key']} key (term "
                                      f"{p['term']}) was evicted: {p['detail']}.",
        "ops.post_late": lambda: f"Post “{p['title']}” ({p['slug']}) is "
                                 f"{p['late_seconds']:g} s late and still not published.",
        "ops.timer_paused": lambda: (f"Timer “{p['timer']}” was paused: {p['reason']}"
                                     if p.get("timer_id") else
                                     f"Plugin {p['plugin']} was paused: {p['reason']}"),
        "ops.webhook_failing": lambda: f"Webhook {p['url']} is failing after {p['failures']} "
                                       f"attempts: {p['last_error']}",
        "ops.purge_failing": lambda: f"Cache purger {p['purger']} is failing after "
                                     f"{p['failures']} attempts: {p['last_error']}",
        "post.published": lambda: f"Published: “{p['title']}” ({p['slug']}).",
        "post.unpublished": lambda: f"Unpublished: “{p['title']}” ({p['slug']}).",
        "post.updated": lambda: f"Updated: “{p['title']}” ({p['slug']}).",
        "post.submitted": lambda: f"Submitted for review by {p['by']}: “{p['title']}”.",
        "post.approved": lambda: f"Approved by {p['by']}: “{p['title']}”, out {p['publish_at']}.",
        "post.returned": lambda: f"Sent back by {p['by']}: “{p['title']}”: {p['note']}",
        "release.published": lambda: f"Release “{p['name']}” went live: "
                                     f"{len(p['published'])} published, "
                                     f"{len(p['unpublished'])} taken down, "
                                     f"{len(p['changed'])} changed"
                                     f"{', the site settings' if p['settings'] else ''}.",
    }
    try:
        return "[Soloist] " + lines[topic]()
    except (KeyError, TypeError, ValueError):
        return slack_escape(f"[Soloist] {topic}: {payload}")
