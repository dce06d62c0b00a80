"""A new post with a publish time is created scheduled in one transaction, never left a draft.

The time is checked against the database clock first; it may then pass while the row waits
to be written (here: another transaction holds the posts table for a moment). The post is
then simply due. Saved as a draft in one transaction and scheduled in a second, it would
be refused for the time that passed meanwhile and the draft left behind.
"""

import json
import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

from tests.support import count, post_form
from webapp.extensions import db
from webapp.models import AuditEvent, Post

HOLD_SECONDS = 1.5


def _database_now(pg_url: str) -> datetime:
    with psycopg.connect(pg_url) as conn:
        return conn.execute("SELECT now()").fetchone()[0].astimezone(UTC)


class TableHeld:
    """Hold the posts table against writes from another connection for HOLD_SECONDS."""

    def __init__(self, pg_url: str) -> None:
        self.conn = psycopg.connect(pg_url)
        self.conn.execute("LOCK TABLE posts IN SHARE MODE")  # reads go on, inserts wait
        self.timer = threading.Timer(HOLD_SECONDS, self.conn.rollback)

    def __enter__(self) -> "TableHeld":
        self.timer.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.timer.join()
        self.conn.close()


def _posts(app) -> list[tuple[str, str, datetime | None]]:
    with app.app_context():
        return [(p.title, p.status, p.publish_at) for p in db.session.scalars(sa.select(Post))]


def _actions(app) -> list[str]:
    with app.app_context():
        return list(db.session.scalars(sa.select(AuditEvent.action).order_by(AuditEvent.id)))


@pytest.mark.parametrize("via", ["api", "form"])
def test_a_time_passing_while_the_post_is_saved_leaves_it_scheduled_not_a_draft(
        app, pg_url, api, auth, via):
    editor = auth.client("editor")  # signed in first: only the save runs against the clock
    at = _database_now(pg_url) + timedelta(seconds=HOLD_SECONDS / 3)
    with TableHeld(pg_url):
        if via == "api":
            answer = api("POST", "/api/posts", body={"title": "Due", "body": "Hi",
                                                     "publish_at": at.isoformat()})
            assert answer.status_code == 201, answer.get_json()
            assert answer.get_json()["status"] == "scheduled"
        else:
            answer = post_form(editor, "/admin/posts/new", {
                "title": "Due", "slug": "", "body": "Hi", "zone": "UTC",
                "publish_at": at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23]})
            assert answer.status_code == 303
            assert "is scheduled for" in editor.get(answer.location).get_data(as_text=True)
    assert _database_now(pg_url) > at  # the time did pass while the row waited
    [(title, status, publish_at)] = _posts(app)
    assert (title, status) == ("Due", "scheduled")
    assert abs(publish_at - at) < timedelta(milliseconds=1)
    assert _actions(app)[-1] == "post.create"


def test_a_scheduled_post_is_one_audit_row_naming_its_time(app, api):
    at = datetime.now(UTC) + timedelta(days=1)
    answer = api("POST", "/api/posts", body={"title": "Later", "publish_at": at.isoformat()})
    assert answer.status_code == 201
    with app.app_context():
        [event] = db.session.scalars(sa.select(AuditEvent)).all()
        detail = json.loads(event.detail)
    assert event.action == "post.create" and detail["status"] == "scheduled"
    assert detail["publish_at"].startswith(at.strftime("%Y-%m-%dT%H:%M"))


def test_a_time_already_passed_is_refused_and_nothing_is_saved(app, api):
    past = datetime.now(UTC) - timedelta(minutes=1)
    answer = api("POST", "/api/posts", body={"title": "Late", "publish_at": past.isoformat()})
    assert answer.status_code == 422 and answer.get_json()["field"] == "publish_at"
    assert count(app, Post) == 0


@pytest.mark.parametrize("publish", [False, True], ids=["draft", "scheduled"])
def test_two_editors_taking_one_slug_at_once_the_second_is_told_not_a_500(
        app, pg_url, api, publish):
    """The other editor's post is written but not yet committed when this one checks."""
    other = psycopg.connect(pg_url)
    other.execute("INSERT INTO posts (title, slug, body, status, version, created_at, "
                  "updated_at) VALUES ('Theirs', 'same', '', 'draft', 1, now(), now())")
    commit = threading.Timer(HOLD_SECONDS / 3, other.commit)  # while this insert waits
    commit.start()
    try:
        body = {"title": "Mine", "slug": "same"}
        if publish:
            body["publish_at"] = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        answer = api("POST", "/api/posts", body=body)
    finally:
        commit.join()
        other.close()
    assert answer.status_code == 422 and answer.get_json()["field"] == "slug"
    assert _posts(app) == [("Theirs", "draft", None)]


def test_a_bad_title_and_a_past_time_are_both_named(app, api):
    past = datetime.now(UTC) - timedelta(minutes=1)
    answer = api("POST", "/api/posts", body={"title": "   ", "publish_at": past.isoformat()})
    assert answer.status_code == 422
    assert set(answer.get_json()["fields"]) == {"title", "publish_at"}
    assert count(app, Post) == 0
