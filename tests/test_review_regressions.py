"""Regressions found by an outside review: hostile input answers 4xx, never 500 or a wrong 404."""

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from flask_login import current_user

from tests.cluster import PUBLISH_KEY, holding
from tests.support import (
    TIMER,
    Api,
    AuthActions,
    count,
    field_error,
    post_form,
    record_term,
    text,
)
from webapp.extensions import db
from webapp.models import (
    LeaderEvent,
    LeaderState,
    LoginFailure,
    Post,
    Timer,
    User,
    WebhookEndpoint,
)
from webapp.plugins.timers import ensure_default_timers

# timers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("changes", "field", "message"), [
    ({"every": "99999999999999999999"}, "every", "at most 3660 days"),
    ({"every": "2147483647", "unit": "days"}, "every", "at most 3660 days"),
    ({"every": "2147483648", "unit": "seconds"}, "every", "at most 3660 days"),
    ({"grace_seconds": "2147483648"}, "grace_seconds", "must be at most"),
    ({"max_failures": "99999999999"}, "max_failures", "must be at most"),
    ({"kind": "once", "run_at": "9999-12-31T23:59", "timezone": "America/Los_Angeles"},
     "run_at", "out of range"),
    ({"kind": "once", "run_at": "0001-01-01T00:00", "timezone": "Asia/Tokyo"},
     "run_at", "out of range"),
    ({"start_at": "0001-01-01T00:00", "timezone": "America/New_York"}, "start_at",
     "out of range"),
    ({"name": ""}, "name", "Give the timer a name."),
])
def test_a_timer_with_huge_numbers_or_far_off_dates_is_refused_next_to_the_field(
        app, client, auth, changes: dict, field: str, message: str):
    auth.login("editor")
    response = post_form(client, "/admin/timers/new", {**TIMER, **changes})
    assert response.status_code == 422
    assert message in field_error(text(response), field)
    assert count(app, Timer) == 0


@pytest.mark.parametrize(("every", "unit", "zone", "start"), [
    (1, "days", "UTC", datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
    (5, "minutes", "Pacific/Kiritimati", datetime(9999, 12, 31, 9, 59, tzinfo=UTC)),
])
def test_a_timer_whose_slots_run_past_year_9999_still_shows_its_pages(
        app, client, auth, every: int, unit: str, zone: str, start: datetime):
    auth.login("editor")
    with app.app_context():  # stored before the form refused such times
        timer = Timer(name="Edge", plugin="housekeeping", action="trim", params={},
                      kind="every", every=every, unit=unit, timezone=zone, start_at=start,
                      next_run_at=start)
        db.session.add(timer)
        db.session.commit()
        timer_id = timer.id
    response = client.get(f"/admin/timers/{timer_id}")
    assert response.status_code == 200
    assert start.strftime("%Y-%m-%d %H:%M") in text(response)
    assert client.get("/admin/timers/").status_code == 200


def test_a_plugins_own_timer_keeps_its_action(app, client, auth):
    auth.login("editor")
    with app.app_context():
        ensure_default_timers(datetime.now(UTC))
        timer_id = db.session.scalar(sa.select(Timer.id).where(
            Timer.plugin == "webhooks", Timer.default_key == "deliver"))
    response = post_form(client, f"/admin/timers/{timer_id}/edit",
                         {**TIMER, "name": "Webhooks: deliver", "action": "sitemap.rebuild"})
    assert response.status_code == 422
    assert "action stays webhooks.deliver" in field_error(text(response), "action")
    with app.app_context():
        timer = db.session.get(Timer, timer_id)
        assert (timer.plugin, timer.action) == ("webhooks", "deliver")


# NUL characters and lone surrogates ---------------------------------------------------


def test_a_nul_character_in_a_form_or_search_is_refused_with_a_message(app, client, auth):
    auth.login("editor")
    response = post_form(client, "/admin/posts/new", {"title": "Hi\x00", "slug": "", "body": ""})
    assert response.status_code == 400
    assert "NUL character" in text(response)
    assert count(app, Post) == 0
    assert client.get("/admin/posts/?q=%00").status_code == 400
    anonymous = app.test_client()
    response = post_form(anonymous, "/login", {"email": "a\x00@b.c", "password": "x"})
    assert response.status_code == 400 and "NUL character" in text(response)


@pytest.mark.parametrize("raw", ['{"title": "Hi\\u0000"}', '{"title": "Hi\\ud800"}'])
def test_the_api_refuses_text_no_database_can_store_naming_the_field(app, api, raw: str):
    response = api("POST", "/api/posts", raw=raw)
    assert response.status_code == 422
    assert response.get_json()["field"] == "title"
    assert count(app, Post) == 0


def test_the_api_refuses_a_nul_in_a_webhook_description(app, api):
    response = api("POST", "/api/webhooks", role="admin", body={
        "url": "https://93.184.216.34/hook", "events": ["post.published"],
        "secret": "s" * 20, "description": "a\x00b"})
    assert response.status_code == 422
    assert response.get_json()["field"] == "description"
    assert count(app, WebhookEndpoint) == 0


# times at the end of the calendar ------------------------------------------------------


@pytest.mark.parametrize("moment", ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00",
                                    "9999-12-31T23:30:00Z"])
def test_the_api_refuses_a_publish_time_at_the_end_of_the_calendar(app, api, moment: str):
    response = api("POST", "/api/posts", body={"title": "Far", "publish_at": moment})
    assert response.status_code == 422
    assert response.get_json()["field"] == "publish_at"
    assert count(app, Post) == 0


def test_a_post_stored_near_year_9999_does_not_break_the_pages_east_of_utc(app, client, auth):
    auth.login("editor", email="paris@example.com", timezone="Europe/Paris")
    with app.app_context():
        post = Post(title="Far", slug="far", body="", status="scheduled", version=1,
                    publish_at=datetime(9999, 12, 31, 23, 30, tzinfo=UTC))
        db.session.add(post)
        db.session.commit()
        post_id = post.id
    assert client.get("/admin/posts/").status_code == 200
    assert client.get(f"/admin/posts/{post_id}").status_code == 200


# ids beyond any column, failed flushes, logged parameters --------------------------------


def test_ids_beyond_64_bits_are_404_on_sqlite_too(sqlite_app):
    huge = "99999999999999999999"
    client = sqlite_app.test_client()
    AuthActions(client).login("admin", email="web-admin@example.com")
    assert client.get(f"/admin/timers/{huge}").status_code == 404
    assert post_form(client, f"/admin/webhooks/{huge}/delete").status_code == 404
    assert post_form(client, f"/admin/webhooks/deliveries/{huge}/redeliver").status_code == 404
    api = Api(sqlite_app)
    assert api("GET", f"/api/webhooks/{huge}/deliveries", role="admin").status_code == 404
    assert api("POST", f"/api/timers/{huge}/run").status_code == 404


def test_an_unexpected_error_after_a_failed_flush_still_shows_the_error_page(app, client, auth):
    @app.get("/review-failed-flush")
    def failed_flush():
        db.session.commit()  # expires the signed-in user, as views that commit do
        db.session.add(User(email=current_user.email, role="viewer", active=True))
        db.session.flush()  # a duplicate email: the session now needs a rollback

    auth.login("editor")
    response = client.get("/review-failed-flush")
    assert response.status_code == 500
    assert "Something went wrong on our side" in text(response)
    assert "editor@example.com" in text(response)  # the page still knows who is signed in


def test_a_database_error_does_not_carry_the_statements_values_into_the_log(app):
    with app.app_context(), pytest.raises(sa.exc.DBAPIError) as caught:
        db.session.execute(sa.text("SELECT CAST(:secret AS text), 1 / 0"),
                           {"secret": "whsec-do-not-log"})
    assert "whsec-do-not-log" not in str(caught.value)


def test_an_oversized_body_is_reported_with_its_size_rounded_up(client, auth):
    auth.login("editor")
    response = post_form(client, "/admin/posts/new",
                         {"title": "Big", "slug": "", "body": "x" * 200_001})
    assert response.status_code == 422
    assert "The body is 201 kB; the limit is 200 kB" in field_error(text(response), "body")


# HEAD runs a GET view: it must never take the POST branch (no CSRF check guards it) ------


@pytest.mark.parametrize("action", ["step-down", "evict"])
def test_a_head_request_never_steps_down_or_evicts_a_leader(app, client, auth, pg_url, action: str):
    auth.login("admin")
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn, term=3)
        response = client.head(f"/status/publish/{action}")
        assert response.status_code == 200
        assert conn.execute("SELECT 1").fetchone() == (1,)  # not terminated
    with app.app_context():
        assert not db.session.get(LeaderState, PUBLISH_KEY).step_down_requested
        assert db.session.scalar(sa.select(sa.func.count(LeaderEvent.id))) == 0


def test_a_head_request_on_the_sign_in_page_is_not_a_failed_sign_in(app, client):
    assert client.head("/login").status_code == 200
    assert count(app, LoginFailure) == 0


def test_head_requests_on_edit_forms_answer_like_get(app, client, auth):
    auth.login("editor")
    with app.app_context():
        post = Post(title="Kept", slug="kept", body="", status="draft", version=1)
        db.session.add(post)
        db.session.commit()
        post_id = post.id
    assert client.head(f"/admin/posts/{post_id}").status_code == 200
    assert client.head("/admin/timers/new").status_code == 200


@pytest.mark.parametrize("page", ["²", "①"])
def test_the_api_refuses_a_page_of_unicode_digits(api, page: str):
    response = api("GET", f"/api/posts?page={page}", role="viewer")
    assert response.status_code == 422
    assert response.get_json()["field"] == "page"


def test_a_lock_session_named_with_unicode_digits_is_not_taken_for_ours():
    from webapp.status import parse_identity

    assert parse_identity("soloist:web:²") == ("", None)
    assert parse_identity("soloist:web:42") == ("web", 42)


def test_json_nested_too_deeply_is_refused_not_a_crash(app, api, auth):
    response = api("POST", "/api/posts", raw="[" * 100_000 + "]" * 100_000)
    assert response.status_code == 400
    response = api("POST", "/api/posts", raw='{"title": ' + "[" * 900 + "]" * 900 + "}")
    assert response.status_code == 422 and response.get_json()["field"] == "title"
    editor = auth.client("editor", email="timer-editor@example.com")
    response = post_form(editor, "/admin/timers/new", {**TIMER, "params": "[" * 100_000})
    assert response.status_code == 422
    assert "JSON object" in field_error(text(response), "params")
    assert count(app, Post) == 0 and count(app, Timer) == 0
