"""SQLite mode writes all or nothing, like PostgreSQL, and its workers share the file.

The failures are real database failures: a trigger makes the second statement of a
write abort, as a full disk, a busy timeout or a constraint would.
"""

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.support import AuthActions, new_post, text
from webapp import posts
from webapp.db import sqlite_path
from webapp.extensions import db
from webapp.leadership.fence import Lead
from webapp.models import OutboxEvent, Post, Timer, TimerRun
from webapp.scheduling import plugin_tick
from webapp.timers import create_timer, leader

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)


def fail_on(table: str, event: str = "INSERT") -> None:
    """Make every event on table abort, inside the statement, as a real database error."""
    db.session.execute(sa.text(f"CREATE TRIGGER fail_{table} BEFORE {event} ON {table} "
                               "BEGIN SELECT RAISE(ABORT, 'boom'); END"))
    db.session.commit()


def post_state(post_id: int) -> tuple[str, int]:
    """Return a post's status and how many outbox events it has, as committed."""
    db.session.rollback()
    status = db.session.scalar(sa.select(Post.status).where(Post.id == post_id))
    events = db.session.scalar(sa.select(sa.func.count()).select_from(OutboxEvent)
                               .where(OutboxEvent.post_id == post_id))
    return status, events


def other_worker(url: str) -> sqlite3.Connection:
    """Return a plain connection to the same file, as another worker process has."""
    return sqlite3.connect(sqlite_path(url), timeout=15, isolation_level=None)


def test_a_failed_outbox_insert_leaves_the_leaders_due_post_scheduled(sqlite_app):
    post_id = new_post(sqlite_app, status="scheduled", publish_at=T0)
    with sqlite_app.app_context():
        fail_on("outbox_events")
        with pytest.raises(sa.exc.IntegrityError, match="boom"):
            posts.publish_due(T0 + timedelta(seconds=1))
        assert post_state(post_id) == ("scheduled", 0)  # not live without its webhooks

        db.session.execute(sa.text("DROP TRIGGER fail_outbox_events"))
        db.session.commit()
        assert posts.publish_due(T0 + timedelta(seconds=2)) == [post_id]
        assert post_state(post_id) == ("published", 1)


def test_a_failed_outbox_insert_leaves_an_editors_publish_undone(sqlite_app):
    post_id = new_post(sqlite_app, status="scheduled", publish_at=T0 + timedelta(days=1))
    with sqlite_app.app_context():
        fail_on("outbox_events")
        with pytest.raises(sa.exc.IntegrityError, match="boom"):
            posts.publish_now(post_id)
        assert post_state(post_id) == ("scheduled", 0)


def test_a_timer_claim_that_cannot_advance_the_timer_leaves_no_run(sqlite_app):
    with sqlite_app.app_context():
        timer = create_timer({"name": "Trim", "action": "housekeeping.trim", "kind": "every",
                              "every": "10", "unit": "seconds", "start_at": T0.isoformat(),
                              "timezone": "UTC", "misfire": "run_once", "grace_seconds": "60",
                              "max_runtime_seconds": "300", "max_failures": "3"},
                             now=T0 - timedelta(seconds=1))
        timer_id, due = timer.id, timer.next_run_at
        fail_on("timers", "UPDATE")
        with pytest.raises(sa.exc.IntegrityError, match="boom"):
            leader.claim_due(T0, "", Lead(), {"housekeeping"}, plugin_tick.RUNNER)
        db.session.rollback()
        assert db.session.scalars(sa.select(TimerRun).where(TimerRun.timer_id == timer_id)
                                  ).all() == []  # the slot can still be claimed
        assert db.session.scalar(sa.select(Timer.next_run_at).where(Timer.id == timer_id)) == due


def test_a_change_read_before_another_worker_wrote_is_still_saved(sqlite_app, sqlite_url):
    post_id = new_post(sqlite_app, title="Old title")
    due_id = new_post(sqlite_app, title="Due", status="scheduled", publish_at=T0)
    with sqlite_app.app_context():
        post = db.session.get(Post, post_id)  # an edit form loads the post …
        other = other_worker(sqlite_url)  # … another worker publishes a post …
        assert other.execute("UPDATE posts SET status = 'published' WHERE id = ?",
                             (due_id,)).rowcount == 1
        other.close()
        post.title = "New title"
        db.session.commit()  # … and the save waits its turn, it does not fail as locked
        db.session.rollback()
        assert db.session.scalar(sa.select(Post.title).where(Post.id == post_id)) == "New title"


def test_pages_load_while_another_worker_holds_the_write_lock(sqlite_app, sqlite_url):
    new_post(sqlite_app, title="Readable")
    client = sqlite_app.test_client()
    AuthActions(client).login("editor")
    writer = other_worker(sqlite_url)
    writer.execute("BEGIN IMMEDIATE")  # e.g. the publish leader in the middle of a batch
    try:
        writer.execute("UPDATE posts SET body = 'draft two'")
        page = client.get("/admin/posts/")
        assert page.status_code == 200 and "Readable" in text(page)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
