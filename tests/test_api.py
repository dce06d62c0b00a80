"""The JSON API: bearer tokens, the contract of every endpoint, and every error case."""

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, holding
from tests.harness.support import (
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
from webapp.models import ApiToken, OutboxEvent, Post, Timer, User, WebhookDelivery


def later(**delta) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat()


def make_post(api: Api, **fields) -> dict:
    body = {"title": "Hello", "body": "Some *text*"} | fields
    response = api("POST", "/api/posts", body=body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


# leaders ---------------------------------------------------------------------------------

def test_leaders_lists_every_key_with_its_holder_and_standbys(api, app, pg_url):
    with holding(pg_url, "soloist:web.1:11", PUBLISH_KEY) as conn, \
            holding(pg_url, "soloist:web.2:22"):
        record_term(app, PUBLISH_KEY, conn, term=3, heartbeat_age=1)
        leaders = api("GET", "/api/leaders", role="viewer").get_json()
    by_name = {k["name"]: k for k in leaders}
    assert set(by_name) == {"publish", "plugins"}
    publish = by_name["publish"]
    assert (publish["key"], publish["key_hex"]) == (PUBLISH_KEY, "0x9a37b7a1")
    holder = publish["holder"]
    assert (holder["instance"], holder["pid"], holder["application_name"], holder["term"]) == (
        "web.1", 11, "soloist:web.1:11", 3)
    assert 0.5 < holder["heartbeat_age_s"] < 30 and holder["since"].endswith("Z")
    assert [s["application_name"] for s in publish["standbys"]] == ["soloist:web.2:22"]
    assert by_name["plugins"]["holder"] is None
    assert by_name["plugins"]["key"] == PLUGINS_KEY
    assert len(by_name["plugins"]["standbys"]) == 2


# posts: the contract ---------------------------------------------------------------------

def test_create_a_draft_then_read_it_back(api):
    created = make_post(api, title="Hello, world")
    assert created["status"] == "draft" and created["slug"] == "hello-world"
    assert created["publish_at"] is None and created["published_at"] is None
    fetched = api("GET", f"/api/posts/{created['id']}", role="viewer").get_json()
    assert fetched == created
    assert fetched["created_at"].endswith("Z")


def test_create_scheduled_post_stores_utc_and_wakes_the_publish_leader(api, pg_url):
    with holding(pg_url, "listener") as listener:
        listener.execute("LISTEN soloist_wake")
        created = make_post(api, title="Soon", publish_at="2099-01-31T09:00:00+01:00",
                            unpublish_at="2099-02-01T00:00:00Z")
        notes = list(listener.notifies(timeout=5, stop_after=1))
    assert created["status"] == "scheduled"
    assert created["publish_at"] == "2099-01-31T08:00:00Z"
    assert created["unpublish_at"] == "2099-02-01T00:00:00Z"
    assert [(n.channel, n.payload) for n in notes] == [("soloist_wake", "publish")]


def test_list_posts_filters_by_status_and_pages(api, app):
    for i in range(3):
        make_post(api, title=f"Draft {i}")
    make_post(api, title="Later", publish_at=later(days=1))
    everything = api("GET", "/api/posts", role="viewer").get_json()
    assert [p["title"] for p in everything["posts"]] == ["Later", "Draft 2", "Draft 1",
                                                         "Draft 0"]
    assert everything["page"] == 1 and everything["has_next"] is False
    assert "body" not in everything["posts"][0]
    scheduled = api("GET", "/api/posts?status=scheduled", role="viewer").get_json()
    assert [p["title"] for p in scheduled["posts"]] == ["Later"]
    assert api("GET", "/api/posts?page=2", role="viewer").get_json()["posts"] == []


def test_list_posts_has_a_next_page_past_fifty(api, app):
    with app.app_context():
        db.session.add_all(Post(title=f"P{i}", slug=f"p-{i}", body="") for i in range(51))
        db.session.commit()
    first = api("GET", "/api/posts", role="viewer").get_json()
    second = api("GET", "/api/posts?page=2", role="viewer").get_json()
    assert len(first["posts"]) == 50 and first["has_next"]
    assert [p["slug"] for p in second["posts"]] == ["p-0"] and not second["has_next"]


def test_patch_changes_text_and_schedule(api):
    post = make_post(api)
    changed = api("PATCH", f"/api/posts/{post['id']}",
                  body={"title": "New title", "version": post["version"]}).get_json()
    assert changed["title"] == "New title" and changed["slug"] == post["slug"]
    assert changed["version"] > post["version"]
    scheduled = api("PATCH", f"/api/posts/{post['id']}",
                    body={"publish_at": "2099-05-01T12:00:00-04:00"}).get_json()
    assert scheduled["status"] == "scheduled"
    assert scheduled["publish_at"] == "2099-05-01T16:00:00Z"
    back = api("PATCH", f"/api/posts/{post['id']}", body={"publish_at": None}).get_json()
    assert back["status"] == "draft" and back["publish_at"] is None


def test_publish_now_publishes_with_one_outbox_row(api, app):
    post = make_post(api, publish_at=later(hours=1))
    published = api("POST", f"/api/posts/{post['id']}/publish").get_json()
    assert published["status"] == "published" and published["published_at"]
    assert published["url"].endswith(f"/posts/{post['slug']}")
    again = api("POST", f"/api/posts/{post['id']}/publish")
    assert again.status_code == 409 and again.get_json()["error"] == "Conflict"
    with app.app_context():
        topics = db.session.scalars(sa.select(OutboxEvent.topic)
                                    .where(OutboxEvent.post_id == post["id"])).all()
    assert topics == ["post.published"]


# posts: every error case -------------------------------------------------------------------

def error_of(response, status: int, field: str | None = None) -> dict:
    body = response.get_json()
    assert response.status_code == status, body
    assert set(body) >= {"error", "detail"}
    if field:
        assert body["field"] == field and field in body["detail"]
    return body


@pytest.mark.parametrize("raw", ['{"title": "x"', "not json", "[1, 2]", '"a string"', ""])
def test_malformed_json_is_400(api, app, raw):
    error_of(api("POST", "/api/posts", raw=raw), 400)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Post)) == 0


@pytest.mark.parametrize(("body", "field"), [
    ({"body": "no title"}, "title"),
    ({"title": ""}, "title"),
    ({"title": 42}, "title"),
    ({"title": "x" * 201}, "title"),
    ({"title": "x", "body": ["list"]}, "body"),
    ({"title": "x", "slug": "Not A Slug!"}, "slug"),
    ({"title": "x", "publish_at": "tomorrow"}, "publish_at"),
    ({"title": "x", "publish_at": "2099-01-01T09:00:00"}, "publish_at"),
    ({"title": "x", "publish_at": "2001-01-01T09:00:00Z"}, "publish_at"),
    ({"title": "x", "publish_at": 1234567890}, "publish_at"),
    ({"title": "x", "publish_at": "2099-01-02T00:00:00Z",
      "unpublish_at": "2099-01-01T00:00:00Z"}, "unpublish_at"),
    ({"title": "x", "unpublish_at": "2099-01-01T00:00:00Z"}, "unpublish_at"),
    ({"title": "x", "colour": "red"}, "colour"),
])
def test_a_bad_field_is_422_naming_it_and_changes_nothing(api, app, body, field):
    error_of(api("POST", "/api/posts", body=body), 422, field)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Post)) == 0


def test_a_slug_in_use_is_422_naming_the_slug(api):
    make_post(api, slug="taken")
    error_of(api("POST", "/api/posts", body={"title": "Other", "slug": "taken"}), 422, "slug")
    other = make_post(api, title="Other")
    error_of(api("PATCH", f"/api/posts/{other['id']}", body={"slug": "taken"}), 422, "slug")


def test_patch_errors_name_the_field_and_change_nothing(api):
    post = make_post(api)
    path = f"/api/posts/{post['id']}"
    error_of(api("PATCH", path, body={"title": None}), 422, "title")
    error_of(api("PATCH", path, body={"publish_at": "2000-01-01T00:00:00Z"}), 422, "publish_at")
    error_of(api("PATCH", path, body={"unpublish_at": later(days=1)}), 422, "unpublish_at")
    error_of(api("PATCH", path, body={"version": "one"}), 422, "version")
    error_of(api("PATCH", path, body={"version": post["version"] + 5, "title": "x"}), 409)
    error_of(api("PATCH", path, raw="{"), 400)
    assert api("GET", path).get_json() == post


def test_bad_list_arguments_are_422(api):
    error_of(api("GET", "/api/posts?status=lost", role="viewer"), 422, "status")
    error_of(api("GET", "/api/posts?page=0", role="viewer"), 422, "page")
    error_of(api("GET", "/api/posts?page=abc", role="viewer"), 422, "page")


def test_unknown_ids_and_paths_are_404_json(api):
    error_of(api("GET", "/api/posts/999"), 404)
    error_of(api("PATCH", "/api/posts/999", body={"title": "x"}), 404)
    error_of(api("POST", "/api/posts/999/publish"), 404)
    error_of(api("GET", "/api/nothing-here"), 404)
    error_of(api("DELETE", "/api/leaders"), 405)


# authentication and authorisation ----------------------------------------------------------

def test_no_token_is_401_with_a_bearer_challenge(api):
    response = api("GET", "/api/leaders", role=None)
    error_of(response, 401)
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    error_of(api("GET", "/api/leaders", token="sol_not-a-real-token"), 401)
    error_of(api("GET", "/api/leaders", role=None, raw=None), 401)


def test_a_signed_in_browser_session_does_not_authenticate_the_api(api, app):
    AuthActions(api.client).login("admin")
    assert api.client.get("/status/").status_code == 200  # the session works for pages
    error_of(api("POST", "/api/posts", role=None, body={"title": "CSRF me"}), 401)
    error_of(api("GET", "/api/leaders", role=None), 401)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Post)) == 0


def test_the_api_needs_no_csrf_token_with_a_bearer_token(api, app):
    assert app.config.get("WTF_CSRF_ENABLED", True)  # CSRF is on for the web forms
    assert api("POST", "/api/posts", body={"title": "By token"}).status_code == 201


def test_tokens_are_stored_only_as_a_hash_and_follow_their_user(api, app):
    token = api.tokens["editor"]
    with app.app_context():
        stored = db.session.scalars(sa.select(ApiToken.token_hash)).all()
        assert token not in stored
        assert hashlib.sha256(token.encode()).hexdigest() in stored
        db.session.execute(sa.update(User).where(User.role == "editor").values(role="viewer"))
        db.session.commit()
    error_of(api("POST", "/api/posts", body={"title": "x"}), 403)  # demoted: at once
    with app.app_context():
        db.session.execute(sa.update(User).where(User.email == "editor@example.com")
                           .values(active=False))
        db.session.commit()
    error_of(api("GET", "/api/leaders"), 401)


ENDPOINTS = [
    # method, path, body, the lowest role allowed
    ("GET", "/api/leaders", None, "viewer"),
    ("GET", "/api/posts", None, "viewer"),
    ("GET", "/api/posts/{id}", None, "viewer"),
    ("POST", "/api/posts", {"title": "Role test"}, "editor"),
    ("PATCH", "/api/posts/{id}", {"body": "changed"}, "editor"),
    ("POST", "/api/posts/{id}/publish", None, "editor"),
    ("GET", "/api/posts/{id}/revisions", None, "viewer"),
    ("POST", "/api/posts/{id}/change", {"body": "x", "apply_at": "2031-01-01T00:00:00Z"},
     "editor"),
    ("GET", "/api/webhooks", None, "admin"),
    ("POST", "/api/webhooks", {"url": "http://127.0.0.1:9/hook", "events": ["post.published"],
                               "secret": "s" * 24}, "admin"),
    ("GET", "/api/webhooks/{webhook}/deliveries", None, "admin"),
    ("GET", "/api/timers", None, "editor"),
    ("POST", "/api/timers/{timer}/run", None, "editor"),
]
RANK = {"viewer": 1, "editor": 2, "admin": 3}


@pytest.mark.parametrize(("method", "path", "body", "lowest"), ENDPOINTS)
def test_each_endpoint_refuses_anonymous_and_lower_roles(api, app, method, path, body, lowest):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True
    post = make_post(api, title="Target")
    path = path.format(id=post["id"], webhook=1, timer=1)
    error_of(api(method, path, role=None, body=body), 401)
    for role in ("viewer", "editor", "admin"):
        response = api(method, path, role=role, body=body)
        if RANK[role] < RANK[lowest]:
            error_of(response, 403)
        else:
            assert response.status_code not in (401, 403), (role, response.get_json())


# webhooks and timers ---------------------------------------------------------------------

def test_webhooks_are_created_listed_without_their_secret_and_show_deliveries(api, app):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True
    secret = "a-very-secret-signing-key"
    body = {"url": "http://127.0.0.1:9/hook", "events": ["post.published"], "secret": secret}
    response = api("POST", "/api/webhooks", role="admin", body=body)
    assert response.status_code == 201 and secret not in response.get_data(as_text=True)
    hook = response.get_json()
    assert (hook["url"], hook["events"], hook["active"]) == (body["url"], body["events"], True)
    listed = api("GET", "/api/webhooks", role="admin")
    assert listed.get_json()["webhooks"] == [hook]
    assert secret not in listed.get_data(as_text=True)
    with app.app_context():
        db.session.add(WebhookDelivery(delivery_id="d-1", endpoint_id=hook["id"],
                                       topic="post.published", body="{}", status="pending"))
        db.session.commit()
    deliveries = api("GET", f"/api/webhooks/{hook['id']}/deliveries", role="admin").get_json()
    assert [(d["delivery_id"], d["status"]) for d in deliveries["deliveries"]] == [
        ("d-1", "pending")]
    error_of(api("GET", "/api/webhooks/999/deliveries", role="admin"), 404)


@pytest.mark.parametrize(("body", "field"), [
    ({"events": ["post.published"], "secret": "s" * 20}, "url"),
    ({"url": "ftp://127.0.0.1/x", "events": ["post.published"], "secret": "s" * 20}, "url"),
    ({"url": "http://127.0.0.1:9/", "events": "post.published", "secret": "s" * 20}, "events"),
    ({"url": "http://127.0.0.1:9/", "events": ["post.exploded"], "secret": "s" * 20}, "events"),
    ({"url": "http://127.0.0.1:9/", "events": ["post.published"], "secret": "short"}, "secret"),
    ({"url": "http://127.0.0.1:9/", "events": ["post.published"], "secret": ""}, "secret"),
    ({"url": "http://127.0.0.1:9/", "events": ["post.published"], "secret": "whsec_abc*def+ghi-jk"},
     "secret"),
])
def test_a_bad_webhook_field_is_422_naming_it(api, app, body, field):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True
    error_of(api("POST", "/api/webhooks", role="admin", body=body), 422, field)
    assert api("GET", "/api/webhooks", role="admin").get_json()["webhooks"] == []


def test_timers_are_listed_and_run_now_wakes_the_plugin_leader(api, app, pg_url):
    with app.app_context():
        timer = Timer(name="Say hi", plugin="sitemap", action="rebuild", kind="every", every=1,
                      unit="hours", params={}, next_run_at=datetime.now(UTC) + timedelta(hours=1))
        db.session.add(timer)
        db.session.commit()
        timer_id = timer.id
    listed = api("GET", "/api/timers").get_json()["timers"]
    assert [(t["id"], t["name"], t["last_run"]) for t in listed] == [(timer_id, "Say hi", None)]
    with holding(pg_url, "listener") as listener:
        listener.execute("LISTEN soloist_wake")
        response = api("POST", f"/api/timers/{timer_id}/run")
        notes = list(listener.notifies(timeout=5, stop_after=1))
    assert response.status_code == 202
    assert response.get_json()["run"]["status"] == "queued"
    assert [(n.channel, n.payload) for n in notes] == [("soloist_wake", "plugins")]
    error_of(api("POST", "/api/timers/999/run"), 404)


# the ends of the calendar, odd digits, deep nesting ---------------------------------------


@pytest.mark.parametrize("moment", ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00",
                                    "9999-12-31T23:30:00Z"])
def test_the_api_refuses_a_publish_time_at_the_end_of_the_calendar(app, api, moment: str):
    response = api("POST", "/api/posts", body={"title": "Far", "publish_at": moment})
    assert response.status_code == 422
    assert response.get_json()["field"] == "publish_at"
    assert count(app, Post) == 0


@pytest.mark.parametrize("page", ["²", "①"])
def test_the_api_refuses_a_page_of_unicode_digits(api, page: str):
    response = api("GET", f"/api/posts?page={page}", role="viewer")
    assert response.status_code == 422
    assert response.get_json()["field"] == "page"


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
