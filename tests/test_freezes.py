"""Freezes: an admin pauses publishing or timers with a reason; leaders keep
their keys and do nothing for it; on resume, due posts follow the chosen policy."""

import json
import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import PUBLISH_KEY, wait_for
from tests.harness.support import WebSession, csrf_from, post_form, post_status, text
from webapp import posts
from webapp.extensions import db
from webapp.models import AuditEvent, Freeze, Post, TimerRun
from webapp.ops import freezes
from webapp.scheduling import plugin_tick, publish, workers
from webapp.timers import create_timer

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)


def due_post(title: str = "Due", at: datetime = T0 - timedelta(minutes=1)) -> int:
    post = Post(title=title, slug=title.lower(), body="", status="scheduled", version=1,
                publish_at=at)
    db.session.add(post)
    db.session.commit()
    return post.id


def test_a_frozen_publish_leader_publishes_nothing_until_resumed(app):
    with app.app_context():
        post_id = due_post()
        freezes.freeze("publishing", "incident 42", "publish", "ops@example.com")
        assert publish.tick(T0) == T0 + publish.FROZEN_RECHECK
        assert post_status(app, post_id) == "scheduled"
        freezes.resume("publishing", posts.hold_due)
        publish.tick(T0)
        assert post_status(app, post_id) == "published"


def test_resume_with_hold_turns_posts_that_came_due_into_drafts_keeping_their_time(app):
    with app.app_context():
        held = due_post("Held")
        later = due_post("Later", at=T0 + timedelta(hours=1))
        freezes.freeze("publishing", "bad copy in the queue", "hold", "ops@example.com")
        done = freezes.resume("publishing", posts.hold_due, now=T0)
        assert done.held == [(held, "Held")]
        assert post_status(app, held) == "draft" and post_status(app, later) == "scheduled"
        assert db.session.get(Post, held).publish_at == T0 - timedelta(minutes=1)
        publish.tick(T0)
        assert post_status(app, held) == "draft"


def test_a_held_post_says_so_on_its_page_during_the_freeze_and_after_a_hold(app, auth):
    with app.app_context():
        post_id = due_post("Embargoed", at=datetime.now(UTC) + timedelta(seconds=2))
    admin, editor = auth.client("admin"), auth.client("editor")
    assert post_form(admin, "/admin/freeze/", {"scope": "publishing", "on_resume": "hold",
                                               "reason": "embargo"}).status_code == 303
    page = text(editor.get(f"/admin/posts/{post_id}"))
    assert "Held by the publishing freeze</strong> (embargo, by admin@example.com)" in page
    assert "Publishes " not in page
    with app.app_context():  # it comes due while frozen
        db.session.execute(sa.update(Post).where(Post.id == post_id).values(
            publish_at=datetime.now(UTC) - timedelta(seconds=5)))
        db.session.commit()
    resumed = post_form(admin, "/admin/freeze/publishing/resume", {})
    assert resumed.status_code == 303
    flashed = text(admin.get("/status/"))
    assert "1 post that came due meanwhile is a draft again, its time kept" in flashed
    assert "post(s)" not in flashed
    page = text(editor.get(f"/admin/posts/{post_id}"))
    assert "Held when publishing resumed." in page
    with app.app_context():
        kept = db.session.get(Post, post_id).publish_at
    field = page.split('id="f-publish_at"')[1].split(">")[0]
    assert f'value="{kept:%Y-%m-%dT%H:%M}' in field, "the held time is not offered again"


def test_resuming_says_which_posts_go_out_now_and_the_audit_log_names_them(app, auth):
    admin = auth.client("admin")
    assert post_form(admin, "/admin/freeze/", {"scope": "publishing", "on_resume": "publish",
                                               "reason": "incident"}).status_code == 303
    with app.app_context():  # came due while frozen
        post_id = due_post("Embargoed", at=datetime.now(UTC) - timedelta(seconds=5))
    assert post_form(admin, "/admin/freeze/publishing/resume", {}).status_code == 303
    flashed = text(admin.get("/status/"))
    assert ("Publishing resumed. 1 post that came due meanwhile goes out now: “Embargoed”."
            in flashed)
    with app.app_context():
        detail = db.session.scalar(sa.select(AuditEvent.detail).where(
            AuditEvent.action == "freeze.resume"))
    recorded = json.loads(detail)
    assert (recorded["reason"], recorded["released"]) == ("incident", [post_id])
    assert "held" not in recorded  # nothing held: no "held []"
    with app.app_context():  # the publish leader let it go
        db.session.execute(sa.update(Post).where(Post.id == post_id).values(status="published"))
        db.session.commit()
    assert post_form(admin, "/admin/freeze/", {"scope": "publishing", "on_resume": "publish",
                                               "reason": "again"}).status_code == 303
    assert post_form(admin, "/admin/freeze/publishing/resume", {}).status_code == 303
    assert "Publishing resumed. No post came due meanwhile." in text(admin.get("/status/"))


def test_frozen_timers_start_no_run_and_resume_follows_the_misfire_policy(app):
    with app.app_context():
        timer = create_timer({
            "name": "t", "action": "sitemap.rebuild", "kind": "every", "every": "10",
            "unit": "seconds", "start_at": T0.isoformat(), "timezone": "UTC",
            "misfire": "run_once", "grace_seconds": "60", "max_runtime_seconds": "300",
            "max_failures": "3"}, now=T0 - timedelta(seconds=1))
        freezes.freeze("timers", "database maintenance", "", "ops@example.com")
        plugin_tick.tick(T0 + timedelta(seconds=4))
        runs = sa.select(sa.func.count()).select_from(TimerRun).where(
            TimerRun.timer_id == timer.id)
        assert db.session.scalar(runs) == 0
        freezes.resume("timers", posts.hold_due)
        plugin_tick.tick(T0 + timedelta(minutes=5))  # a long freeze: 30 slots missed
        assert workers.drain(10)
        assert db.session.scalar(runs) == 1  # run_once: the missed slots run once


def test_everyone_sees_who_froze_what_when_and_why(app, auth):
    admin = auth.client("admin")
    answer = post_form(admin, "/admin/freeze/", {"scope": "publishing", "on_resume": "hold",
                                                 "reason": "Legal review <b>now</b>"})
    assert answer.status_code == 303
    viewer = auth.client("viewer")
    for page, said in (("/admin/", "Publishing paused</strong> by admin@example.com"),
                       ("/status/", "Publishing is paused by admin@example.com since")):
        shown = text(viewer.get(page))
        assert said in shown
        assert "Legal review &lt;b&gt;now&lt;/b&gt;" in shown
        assert "hold them as drafts for an editor" in shown
        assert "Resume…" not in shown  # the link is for admins
    assert "Resume…" in text(admin.get("/status/"))


def test_a_freeze_without_a_reason_is_refused_and_keeps_what_was_typed(app, auth):
    admin = auth.client("admin")
    refused = post_form(admin, "/admin/freeze/", {"scope": "publishing", "reason": " ",
                                                  "on_resume": "later"})
    assert refused.status_code == 422
    page = text(refused)
    assert 'id="e-reason"' in page and 'id="e-on_resume"' in page
    bad_scope = post_form(admin, "/admin/freeze/", {"scope": "everything", "reason": "x"})
    assert bad_scope.status_code == 422
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Freeze)) == 0


def test_freezing_twice_or_resuming_what_is_not_frozen_is_refused(app, auth):
    admin = auth.client("admin")
    form = {"scope": "timers", "reason": "maintenance"}
    assert post_form(admin, "/admin/freeze/", form).status_code == 303
    twice = post_form(admin, "/admin/freeze/", form)
    assert twice.status_code == 409 and "frozen already" in text(twice)
    assert post_form(admin, "/admin/freeze/timers/resume").status_code == 303
    again = post_form(admin, "/admin/freeze/timers/resume")
    assert again.status_code == 409 and "is not frozen" in text(again)
    assert post_form(admin, "/admin/freeze/nothing/resume").status_code == 409


@pytest.mark.parametrize("role", ["viewer", "editor"])
def test_only_admins_freeze_or_resume(app, auth, role):
    someone = auth.client(role)
    assert someone.get("/admin/freeze/").status_code == 403
    form = {"scope": "publishing", "reason": "mine", "on_resume": "publish"}
    assert post_form(someone, "/admin/freeze/", form).status_code == 403
    with app.app_context():
        freezes.freeze("publishing", "theirs", "publish", "admin@example.com")
    assert post_form(someone, "/admin/freeze/publishing/resume").status_code == 403
    with app.app_context():
        assert freezes.is_frozen("publishing")


@pytest.mark.slow
def test_a_freeze_stops_publishing_on_a_two_instance_fleet_and_resume_publishes(fleet):
    fleet.wait_settled()
    view = fleet.view
    web = WebSession(fleet.instances[0].url, fleet.ADMIN)
    csrf = csrf_from(web.get("/admin/freeze/"))
    web.post("/admin/freeze/", {"scope": "publishing", "reason": "incident", "on_resume":
                                "publish", "csrf_token": csrf})
    due = datetime.now(UTC) + timedelta(seconds=1)
    with psycopg.connect(fleet.url, autocommit=True) as conn:
        conn.execute("INSERT INTO posts (title, slug, body, status, publish_at, version, "
                     "created_at, updated_at) SELECT 'F' || i, 'f-' || i, '', 'scheduled', %s, "
                     "1, now(), now() FROM generate_series(1, 20) i", (due,))
        conn.execute("SELECT pg_notify('soloist_wake', 'publish')")
    published = "SELECT count(*) FROM posts WHERE left(slug, 2) = 'f-' AND status = 'published'"
    # past due, the leader has looked (NOTIFY, then its own recheck) and done nothing
    wait_for(lambda: datetime.now(UTC) > due + publish.FROZEN_RECHECK, 10, "the due time")
    assert view.query(published)[0][0] == 0
    leader = view.holder(PUBLISH_KEY)
    assert leader is not None  # the leader kept its key
    web.post("/admin/freeze/publishing/resume", {"csrf_token": csrf})
    wait_for(lambda: view.query(published)[0][0] == 20, 5, "every post published on resume")
    assert view.holder(PUBLISH_KEY) == leader
    per_post = view.query("SELECT count(*) FROM outbox_events o JOIN posts p ON p.id = o.post_id "
                          "WHERE left(p.slug, 2) = 'f-' AND o.topic = 'post.published' "
                          "GROUP BY o.post_id")
    assert len(per_post) == 20 and {count for (count,) in per_post} == {1}


def test_two_admins_resuming_at_once_resume_once_and_the_second_is_told(app, auth, pg_url):
    # the resume held the freeze row FOR UPDATE, then read the database clock, which ended
    # its transaction and dropped the lock: both resumed, and the second failed with a 500
    first, second = auth.client("admin"), auth.client(email="root@example.com", role="admin")
    forms = [(client, {"csrf_token": csrf_from(text(client.get("/admin/freeze/")))})
             for client in (first, second)]
    with app.app_context():
        due_post("Due")
        freezes.freeze("publishing", "incident", "hold", "ops@example.com")
    results = {}
    with psycopg.connect(pg_url) as blocker:  # hold the freeze so both resumes queue up
        blocker.execute("SELECT scope FROM freezes FOR UPDATE")

        def resume(index: int) -> None:
            client, data = forms[index]
            results[index] = client.post("/admin/freeze/publishing/resume",
                                         data=data).status_code

        threads = [threading.Thread(target=resume, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        with psycopg.connect(pg_url, autocommit=True) as observer:
            wait_for(lambda: observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'").fetchone()[0] >= 2, 20, "both resumes waiting")
        blocker.rollback()
    for thread in threads:
        thread.join(20)
    assert sorted(results.values()) == [303, 409]
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Freeze)) == 0
