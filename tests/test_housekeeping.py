"""Housekeeping: history past its retention goes, in short batches; unfinished work stays."""

import time
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from tests.harness.editor_forms import typed
from tests.harness.support import add_user, new_post, post_form, text
from webapp.extensions import db
from webapp.models import (
    AuditEvent,
    CachePurge,
    HookDelivery,
    LeaderEvent,
    LoginFailure,
    OutboxEvent,
    Post,
    PostAutosave,
    PreviewLink,
    RateLimitHit,
    TimerRun,
    User,
    UserSession,
    WebhookDelivery,
    WebhookEndpoint,
    utcnow,
)
from webapp.plugins import housekeeping
from webapp.plugins.base import RunContext
from webapp.timers import create_timer

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)
OLD, RECENT = T0 - timedelta(days=40), T0 - timedelta(days=1)
RECENT_DAY = timedelta(days=1)


class History:
    """Outbox events and their deliveries, written the way fan-out and senders leave them."""

    def __init__(self) -> None:
        self.endpoint = WebhookEndpoint(url="http://93.184.215.14/", events=["post.published"],
                                        secret="x" * 20, description="")
        db.session.add(self.endpoint)
        db.session.flush()

    def event(self, processed_at: datetime | None, created_at: datetime = OLD) -> int:
        event = OutboxEvent(topic="post.published", payload={"slug": "s"},
                            created_at=created_at, processed_at=processed_at)
        db.session.add(event)
        db.session.flush()
        return event.id

    def hook(self, event_id: int, status: str, at: datetime = OLD,
             plugin: str = "sitemap") -> None:
        db.session.add(HookDelivery(plugin=plugin, hook="on_publish", event_id=event_id,
                                    status=status, next_attempt_at=at, created_at=at,
                                    claimed_at=at if status == "running" else None))

    def webhook(self, event_id: int, status: str, at: datetime = OLD) -> None:
        db.session.add(WebhookDelivery(delivery_id=f"d{event_id}-{status}",
                                       endpoint_id=self.endpoint.id, event_id=event_id,
                                       topic="post.published", body="{}", status=status,
                                       next_attempt_at=at, created_at=at))


def surviving_events() -> set[int]:
    return set(db.session.scalars(sa.select(OutboxEvent.id)))


def test_old_processed_events_go_with_their_finished_deliveries_unfinished_work_stays(any_app):
    with any_app.app_context():
        history = History()
        processed = OLD + timedelta(seconds=1)
        finished = history.event(processed)
        history.hook(finished, "done")
        history.webhook(finished, "delivered")
        failed = history.event(processed)
        history.hook(failed, "failed")
        history.webhook(failed, "failed")
        # five events fanned out together share processed_at: more than one batch of ties
        bare = [history.event(processed) for _ in range(5)]
        recent = history.event(RECENT, created_at=RECENT)
        history.hook(recent, "done", RECENT)
        unprocessed = history.event(None)  # not fanned out yet, however old
        waiting = {}
        for kind, status in (("hook", "pending"), ("hook", "running"),
                             ("webhook", "pending"), ("webhook", "sending")):
            waiting[status, kind] = history.event(processed)
            history.hook(waiting[status, kind], "done", plugin="other")  # finished there
            getattr(history, kind)(waiting[status, kind], status)
        db.session.commit()

        counts = housekeeping.trim(T0, batch=2)

        assert surviving_events() == {recent, unprocessed, *waiting.values()}
        assert counts["outbox events"] == 2 + len(bare)
        # the unfinished deliveries are all there, still pointing at their events
        assert set(db.session.execute(sa.select(HookDelivery.status, HookDelivery.event_id)
                                      .where(HookDelivery.status.in_(("pending", "running"))))
                   ) == {("pending", waiting["pending", "hook"]),
                         ("running", waiting["running", "hook"])}
        assert set(db.session.execute(sa.select(WebhookDelivery.status, WebhookDelivery.event_id))
                   ) == {("pending", waiting["pending", "webhook"]),
                         ("sending", waiting["sending", "webhook"])}
        assert db.session.scalar(sa.select(HookDelivery.status).where(
            HookDelivery.event_id == recent)) == "done"  # younger than its retention


def test_an_event_stays_while_a_delivery_younger_than_its_retention_refers_to_it(app):
    with app.app_context():
        history = History()
        event = history.event(OLD)
        history.webhook(event, "delivered", RECENT)  # e.g. an endpoint that caught up late
        db.session.commit()
        assert housekeeping.trim(T0)["outbox events"] == 0
        assert surviving_events() == {event}
        assert housekeeping.trim(T0 + timedelta(days=30))["outbox events"] == 1
        assert surviving_events() == set()


def test_trimming_commits_batch_by_batch_and_stops_when_its_time_is_up(app):
    with app.app_context():
        history = History()
        for n in range(7):
            history.event(OLD + timedelta(minutes=n))
        db.session.commit()

        def outbox_rows_others_see() -> int:
            with db.engine.connect() as other:  # another connection: committed rows only
                return other.scalar(sa.select(sa.func.count()).select_from(OutboxEvent))

        # a stand-in for the clock: the run may go on while more than 3 rows are left
        first = housekeeping.trim(T0, batch=2, more=lambda: outbox_rows_others_see() > 3)
        assert first["outbox events"] == 4 and outbox_rows_others_see() == 3
        assert housekeeping.trim(T0, batch=2)["outbox events"] == 3
        assert outbox_rows_others_see() == 0


def run_context(app, seconds_left: float) -> RunContext:
    return RunContext(app=app, run_id=1, timer_id=1, scheduled_for=T0, started_at=T0,
                      holder="pytest", deadline=time.monotonic() + seconds_left)


def test_the_trim_run_says_what_it_deleted_and_when_it_stopped_at_its_time_limit(app):
    with app.app_context():
        history = History()
        history.event(OLD)
        db.session.commit()
        out_of_time = housekeeping.trim_action(run_context(app, 0), outbox_days=30)
        assert "0 outbox events" in out_of_time and "stopped at the time limit" in out_of_time
        result = housekeeping.trim_action(run_context(app, 300), outbox_days=30)
        assert "1 outbox events" in result and "time limit" not in result
        assert surviving_events() == set()


def test_old_failed_sign_ins_go_and_recent_ones_still_slow_the_account(app, auth):
    add_user(app, "ada@example.com")
    with app.app_context():
        now = utcnow()
        db.session.add_all(LoginFailure(email="ada@example.com", address="10.0.0.9",
                                        at=now - timedelta(days=2)) for _ in range(50))
        db.session.add_all(LoginFailure(email="ada@example.com", address="10.0.0.9",
                                        at=now - timedelta(seconds=5)) for _ in range(10))
        db.session.commit()
        assert housekeeping.trim(now, batch=20)["login failures"] == 50
    response = auth.login(email="ada@example.com")
    assert response.status_code == 429 and "Too many failed sign-ins" in text(response)


def test_each_kind_of_history_goes_past_its_own_retention(app):
    with app.app_context():
        new = RECENT
        timer = create_timer({"name": "x", "action": "sitemap.rebuild", "kind": "cron",
                              "cron": "0 * * * *"}, now=T0)
        history = History()
        for when, status in ((OLD, "succeeded"), (new, "succeeded"),
                             (OLD - timedelta(hours=1), "running")):
            db.session.add(TimerRun(timer_id=timer.id, scheduled_for=when, status=status,
                                    finished_at=when if status != "running" else None))
        for n, when in enumerate((OLD, new)):
            db.session.add(WebhookDelivery(delivery_id=f"d{n}", endpoint_id=history.endpoint.id,
                                           topic="post.published", body="{}",
                                           status="delivered", created_at=when))
        db.session.add_all([LeaderEvent(key=1, kind="acquired", at=T0 - timedelta(days=100)),
                            LeaderEvent(key=1, kind="acquired", at=new)])
        user = User(email="ada@example.com", password_hash="x")
        db.session.add(user)
        db.session.flush()
        db.session.add_all(UserSession(user_id=user.id, secret_hash=f"{n}", ended_at=ended)
                           for n, ended in enumerate((T0 - timedelta(days=91), new, None)))
        db.session.add_all(AuditEvent(at=at, actor="ada@example.com", via="web",
                                      action="post.edit")
                           for at in (T0 - timedelta(days=366), T0 - timedelta(days=364)))
        post = Post(title="Draft", slug="draft", body="", status="draft", version=1)
        db.session.add(post)
        db.session.flush()
        db.session.add_all(PreviewLink(post_id=post.id, token_hash=f"{n}", expires_at=at)
                           for n, at in enumerate((T0 - timedelta(days=8), new, T0 + RECENT_DAY)))
        db.session.add_all([  # a purge done a month ago goes; one waiting is kept however old
            CachePurge(purger="varnish+http://x", topic="post.published", keys="home",
                       status=status, created_at=T0 - timedelta(days=31))
            for status in ("done", "pending")])
        db.session.add_all(RateLimitHit(kind="api_token", address="192.0.2.1", at=at)
                           for at in (T0 - timedelta(days=2), T0 - timedelta(minutes=1)))
        db.session.commit()
        counts = housekeeping.trim(T0)
        assert counts == {"hook deliveries": 0, "webhook deliveries": 1, "outbox events": 0,
                          "timer runs": 1, "leadership events": 1, "login failures": 0,
                          "ended sessions": 1, "audit events": 1, "preview links": 1,
                          "post revisions": 0, "cache purges": 1, "rate limit hits": 1,
                          "autosaves": 0}
        # a link that ended yesterday is kept a week (the live one too)
        assert db.session.scalar(sa.select(sa.func.count(PreviewLink.id))) == 2
        assert db.session.scalar(sa.select(sa.func.count(AuditEvent.id))) == 1
        assert db.session.scalar(sa.select(sa.func.count(UserSession.id))) == 2
        assert db.session.scalar(sa.select(sa.func.count(TimerRun.id))) == 2
        assert db.session.scalar(sa.select(sa.func.count(WebhookDelivery.id))) == 1
        assert db.session.scalar(sa.select(sa.func.count(LeaderEvent.id))) == 1


def test_unsaved_text_left_for_a_month_goes_and_a_recent_one_is_still_offered(app, editor):
    post_id = new_post(app, body="saved")
    for body in ("typed last month", "typed yesterday"):
        assert post_form(editor, f"/admin/posts/{post_id}/autosave",
                         typed(body)).status_code == 200
        with app.app_context():  # as if typed 31 days (then 1 day) before T0
            db.session.execute(sa.update(PostAutosave).values(saved_at=T0 - timedelta(
                days=31 if body.endswith("month") else 1)))
            db.session.commit()
            if body.endswith("month"):
                assert housekeeping.trim(T0)["autosaves"] == 1
                assert "were kept" not in text(editor.get(f"/admin/posts/{post_id}"))
    with app.app_context():
        assert housekeeping.trim(T0)["autosaves"] == 0  # yesterday's stays 30 days
        later = T0 + timedelta(hours=1)  # a day and an hour after: past the timer's setting
        assert housekeeping.trim(later, autosaves_days=1)["autosaves"] == 1
    assert "typed yesterday" not in text(editor.get(f"/admin/posts/{post_id}"))
