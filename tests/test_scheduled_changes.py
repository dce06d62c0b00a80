"""A change to a live post, scheduled: refused times, swapped in once, held by a freeze."""

import re
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.support import field_error, new_post, post_form, race_two, text
from webapp import posts
from webapp.extensions import db
from webapp.models import AuditEvent, OutboxEvent, Post, PostRevision, ScheduledChange
from webapp.ops import freezes
from webapp.scheduling import publish
from webapp.site import state

LIVE_BODY = "Tickets cost 40 euros."
SALE_BODY = "Tickets cost 30 euros until Sunday."


@pytest.fixture
def live(app):
    """A published post, with the revision its text has."""
    post_id = new_post(app, "Tickets", status="published", body=LIVE_BODY,
                       published_at=datetime.now(UTC) - timedelta(days=1))
    with app.app_context():
        posts.revisions.keep(post_id, "Tickets", LIVE_BODY, "create", True)
        db.session.commit()
    return post_id


def _schedule(client, post_id: int, apply_at: str, zone: str = "UTC", **fields):
    form = {"title": "Tickets", "body": SALE_BODY, "apply_at": apply_at, "zone": zone,
            "change_id": "", **fields}
    return post_form(client, f"/admin/posts/{post_id}/change", form)


def _change(app, post_id: int) -> ScheduledChange | None:
    with app.app_context():
        return db.session.scalar(sa.select(ScheduledChange)
                                 .where(ScheduledChange.post_id == post_id))


def _updated_events(app) -> list[int]:
    with app.app_context():
        return list(db.session.scalars(sa.select(OutboxEvent.post_id)
                                       .where(OutboxEvent.topic == "post.updated")))


def _text(app, post_id: int) -> tuple[str, str]:
    with app.app_context():
        post = db.session.get(Post, post_id)
        return post.title, post.body


@pytest.mark.parametrize(("apply_at", "zone", "field", "message"), [
    ("2020-01-01T09:00", "UTC", "apply_at", "already passed"),
    ("2030-03-31T02:30", "Europe/Paris", "apply_at", "does not exist in Europe/Paris"),
    ("2031-06-01T09:00", "UTC", "apply_at", "unpublished before then"),
    ("next tuesday", "UTC", "apply_at", ""),
    ("2031-01-01T09:00", "Mars/Olympus", "zone", ""),
])
def test_a_time_that_cannot_be_is_refused_next_to_the_field_and_the_text_kept(
        app, auth, live, apply_at, zone, field, message):
    with app.app_context():
        db.session.execute(sa.update(Post).where(Post.id == live).values(
            unpublish_at=datetime(2031, 5, 1, tzinfo=UTC)))
        db.session.commit()
    client = auth.client("editor")
    response = _schedule(client, live, apply_at, zone, body="My *unsaved* sale text")
    page = text(response)
    assert response.status_code == 422
    assert message in field_error(page, field) and field_error(page, field)
    assert "My *unsaved* sale text</textarea>" in page
    assert _change(app, live) is None and _text(app, live)[1] == LIVE_BODY


def test_only_a_published_post_takes_a_scheduled_change(app, auth):
    draft = new_post(app, "Draft", body="x")
    client = auth.client("editor")
    page = text(_schedule(client, draft, "2031-01-01T09:00"))
    assert "a scheduled change is for a live post" in page
    assert _change(app, draft) is None


def test_the_change_swaps_in_once_at_its_time_with_one_event_revision_and_validators(
        app, auth, live):
    client = auth.client("editor")
    assert _schedule(client, live, "2031-01-15T09:30", "Europe/Paris").status_code == 303
    change = _change(app, live)
    assert change.apply_at == datetime(2031, 1, 15, 8, 30, tzinfo=UTC)
    panel = text(client.get(f"/admin/posts/{live}"))
    assert "New text goes live" in panel and "Cancel it" in panel
    with app.app_context():
        site_before = state.current().version
        assert publish.tick(change.apply_at - timedelta(seconds=1)) == change.apply_at
        assert _text(app, live)[1] == LIVE_BODY  # not a second early
        assert publish.tick(change.apply_at + timedelta(milliseconds=40)) is None
        assert state.current().version > site_before  # readers' copies are stale now
        assert publish.tick(change.apply_at + timedelta(seconds=5)) is None  # nothing again
    assert _text(app, live) == ("Tickets", SALE_BODY)
    assert _updated_events(app) == [live]
    assert _change(app, live) is None
    with app.app_context():
        newest = db.session.scalars(sa.select(PostRevision).where(
            PostRevision.post_id == live).order_by(PostRevision.id.desc())).first()
        assert (newest.body, newest.reason, newest.author, newest.was_live) == (
            SALE_BODY, "change", "editor@example.com", True)
        assert db.session.scalar(sa.select(sa.func.count(AuditEvent.id)).where(
            AuditEvent.action == "post.change_schedule")) == 1
    assert SALE_BODY in text(client.get("/posts/tickets"))


def test_a_newer_edit_makes_the_change_say_it_was_written_against_an_older_version(
        app, auth, live):
    client = auth.client("editor")
    _schedule(client, live, "2031-01-15T09:30")
    assert "Written against an older version" not in text(client.get(f"/admin/posts/{live}"))
    with app.app_context():
        post = db.session.get(Post, live)
        version, digest = post.version, posts.content_digest(post.title, post.slug, post.body)
    edited = post_form(client, f"/admin/posts/{live}", {
        "title": "Tickets", "slug": "tickets", "body": "Tickets cost 45 euros.",
        "version": version, "digest": digest})
    assert edited.status_code == 303
    assert "Written against an older version" in text(client.get(f"/admin/posts/{live}"))
    page = text(client.get(f"/admin/posts/{live}/change"))
    assert "Written against an older version" in page
    assert "Removed: </span><del>Tickets cost <mark>45</mark> euros" in page  # what it undoes
    preview = page[page.index('id="preview"'):]
    assert preview.index("Tickets cost 30 euros until Sunday.") < preview.index("</div>")


def test_the_change_can_be_edited_and_cancelled_and_both_are_audited(app, auth, live):
    client = auth.client("editor")
    _schedule(client, live, "2031-01-15T09:30")
    change = _change(app, live)
    assert _schedule(client, live, "2031-01-16T10:00", body="Edited sale text.",
                     change_id=str(change.id)).status_code == 303
    edited = _change(app, live)
    assert (edited.id, edited.body) == (change.id, "Edited sale text.")
    assert "already" in text(_schedule(client, live, "2031-01-17T10:00"))  # one a post
    assert post_form(client, f"/admin/posts/{live}/change/cancel").status_code == 303
    assert _change(app, live) is None
    gone = _schedule(client, live, "2031-01-16T10:00", change_id=str(change.id))
    assert "went out or was cancelled" in text(gone) and _change(app, live) is None
    with app.app_context():
        actions = list(db.session.scalars(sa.select(AuditEvent.action).order_by(AuditEvent.id)))
    assert [a for a in actions if a.startswith("post.change")] == [
        "post.change_schedule", "post.change_edit", "post.change_cancel"]
    assert _text(app, live)[1] == LIVE_BODY


def test_a_publishing_freeze_holds_the_change_too(app, live, auth):
    _schedule(auth.client("editor"), live, "2031-01-15T09:30")
    change = _change(app, live)
    with app.app_context():
        freezes.freeze("publishing", "legal review", "publish", "ops@example.com")
        publish.tick(change.apply_at + timedelta(minutes=1))
    assert _text(app, live)[1] == LIVE_BODY and _change(app, live) is not None
    page = text(auth.client("editor").get(f"/admin/posts/{live}"))  # said in words
    assert "Publishing is paused: this change waits until it resumes." in page


def _apply_until_done(url: str, when: datetime, barrier, results) -> None:
    """Child process: apply due changes as fast as it can until none is left."""
    from tests.harness.support import make_app

    app = make_app(url)
    done: list[int] = []
    with app.app_context():
        barrier.wait(timeout=30)
        while batch := posts.apply_due_changes(when, 20):
            done.extend(post_id for post_id, _ in batch)
        db.engine.dispose()
    results.put(done)


def _live_with_changes(app, n: int, apply_at: datetime, prefix: str = "p") -> list[int]:
    """Add n published posts, each with a change due at apply_at; return their ids."""
    with app.app_context():
        ids = db.session.scalars(sa.insert(Post).returning(Post.id), [
            {"title": f"P{i}", "slug": f"{prefix}-{i}", "body": "old", "status": "published",
             "version": 1} for i in range(n)]).all()
        db.session.execute(sa.insert(ScheduledChange), [
            {"post_id": i, "title": f"P{i}", "body": "new", "apply_at": apply_at,
             "base_version": 1, "base_digest": "x", "author": ""} for i in ids])
        db.session.commit()
    return ids


def test_two_leaders_applying_at_once_swap_each_change_in_exactly_once(app, pg_url):
    apply_at = datetime(2030, 1, 1, tzinfo=UTC)
    ids = _live_with_changes(app, 300, apply_at)
    done = race_two(_apply_until_done, pg_url, apply_at + timedelta(seconds=1))
    assert sorted(done[0] + done[1]) == sorted(ids)
    assert sorted(_updated_events(app)) == sorted(ids)
    with app.app_context():
        assert set(db.session.scalars(sa.select(Post.version))) == {2}
        assert db.session.scalar(sa.select(sa.func.count(PostRevision.id))) == 300


def test_a_burst_of_due_changes_takes_as_few_statements_as_one_change(app):
    """A batch is swapped in set-wise: 2,000 changes due at once cleared in 3.4 s when each
    change took its own UPDATE and flush (bench/scheduled_changes.py)."""
    apply_at = datetime(2030, 1, 1, tzinfo=UTC)
    counts = []
    for n, prefix in ((1, "one"), (200, "many")):
        ids = _live_with_changes(app, n, apply_at, prefix)
        statements = []

        def count(*_args, seen=statements) -> None:
            seen.append(1)

        with app.app_context():
            sa.event.listen(db.engine, "before_cursor_execute", count)
            try:
                done = posts.apply_due_changes(apply_at + timedelta(seconds=1), posts.BATCH_SIZE)
            finally:
                sa.event.remove(db.engine, "before_cursor_execute", count)
        assert sorted(post_id for post_id, _lag in done) == sorted(ids)
        counts.append(len(statements))
    assert counts[0] == counts[1]
    assert len(_updated_events(app)) == 201


def test_a_pending_change_shows_on_the_calendar_and_in_the_dashboards_queue(app, auth, live):
    client = auth.client("editor")
    _schedule(client, live, "2031-01-15T09:30")
    month = text(client.get("/admin/calendar/?date=2031-01-15"))
    assert re.search(r'<li class="chip change">.*?09:30</time> Change: Tickets', month)
    week = text(client.get("/admin/calendar/?view=week&date=2031-01-15"))
    assert "Change: Tickets" in week
    dashboard = text(client.get("/admin/"))
    assert 'id="upcoming-changes"' in dashboard and ">Tickets</a>" in dashboard


def test_a_change_swaps_in_on_sqlite_too(sqlite_app):
    post_id = new_post(sqlite_app, "Tickets", status="published", body=LIVE_BODY,
                       published_at=datetime.now(UTC) - timedelta(days=1))
    apply_at = datetime.now(UTC) + timedelta(hours=1)
    with sqlite_app.test_request_context():
        posts.schedule_change(post_id, "Tickets", SALE_BODY, apply_at)
    with sqlite_app.app_context():
        assert publish.tick(apply_at + timedelta(seconds=1)) is None
    assert _text(sqlite_app, post_id)[1] == SALE_BODY
    assert _updated_events(sqlite_app) == [post_id] and _change(sqlite_app, post_id) is None
