"""The audit log around the table: refusals leave no row, no secret is ever written, the
admin page and GET /api/audit filter by who, what and when, the command line is recorded,
and the retention can be neither cut short nor changed by editors."""

import json
import re
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tests.harness.cluster import PUBLISH_KEY, holding
from tests.harness.support import (
    TIMER,
    add_user,
    field_error,
    new_post,
    post_form,
    record_term,
    text,
)
from webapp import timers
from webapp.extensions import db
from webapp.models import AuditEvent, Timer, User
from webapp.ops import audit

WEB_ADDRESS = "198.51.100.7"


def _events(app) -> list[AuditEvent]:
    with app.app_context():
        return list(db.session.scalars(sa.select(AuditEvent).order_by(AuditEvent.id)))


def _changes(app) -> list[str]:
    """Return the recorded actions but sign-ins (the tests sign in before each change)."""
    return [e.action for e in _events(app) if e.action != "session.start"]


def _add(app, at: str, actor: str = "ed@example.com", action: str = "post.edit") -> int:
    with app.app_context():
        event = AuditEvent(at=datetime.fromisoformat(at), actor=actor, via="web",
                           address="192.0.2.1", action=action, target="post 1 “Hello”",
                           detail=json.dumps({"title": ["Hello", "Hi"]}))
        db.session.add(event)
        db.session.commit()
        return event.id


def _housekeeping_timer(app) -> int:
    with app.app_context():
        timers.ensure_default_timers(datetime.now(UTC))
        return db.session.scalar(sa.select(Timer.id).where(Timer.plugin == "housekeeping",
                                                            Timer.default_key == "trim"))


# Refused changes write nothing ----------------------------------------------------------

def _stale_edit(client, app):
    pid = new_post(app)
    return post_form(client, f"/admin/posts/{pid}", {"title": "Mine", "slug": "hello",
                                                     "body": "x", "version": 0, "digest": "old"})


def _last_admin_demoted(client, app):
    with app.app_context():
        admin = db.session.scalar(sa.select(User.id).where(User.role == "admin"))
    return post_form(client, f"/admin/users/{admin}/role", {"role": "editor"})


def _evict_moved(client, app):
    with holding(app.config["SQLALCHEMY_DATABASE_URI"].replace("+psycopg", ""),
                 "soloist:b:2", PUBLISH_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn)
        return post_form(client, "/status/publish/evict", {"holder": "soloist:a:1"})


REFUSALS = [
    ("editor", lambda c, a: post_form(c, "/admin/posts/new", {"title": "", "body": "x"}), 422),
    ("editor", _stale_edit, 409),
    ("editor", lambda c, a: post_form(c, "/admin/plugins/sitemap/disable"), 403),
    ("editor", lambda c, a: post_form(c, f"/admin/timers/{_housekeeping_timer(a)}/pause"), 403),
    ("editor", lambda c, a: post_form(c, "/admin/timers/new", {**TIMER, "every": "0"}), 422),
    ("admin", _last_admin_demoted, 409),
    ("admin", lambda c, a: post_form(c, "/admin/users/", {"email": "admin@example.com",
                                                          "role": "viewer"}), 422),
    ("admin", lambda c, a: post_form(c, "/admin/webhooks/", {
        "url": "ftp://x", "events": "post.published", "secret": "s" * 32}), 422),
    ("admin", _evict_moved, 303),
    ("admin", lambda c, a: post_form(c, "/status/publish/step-down", {"holder": "x"}), 303),
    ("viewer", lambda c, a: post_form(c, f"/admin/posts/{new_post(a)}/publish"), 403),
]


@pytest.mark.parametrize(("role", "send", "status"), REFUSALS,
                         ids=[f"{r}-{n}" for n, (r, _s, _c) in enumerate(REFUSALS)])
def test_a_refused_change_leaves_no_audit_row(app, auth, role, send, status):
    client = auth.client(role)
    response = send(client, app)
    assert response.status_code == status
    assert _changes(app) == []


@pytest.mark.parametrize(("role", "method", "path", "body", "status"), [
    ("editor", "POST", "/api/posts", {"body": "no title"}, 422),
    ("editor", "PATCH", "/api/posts/{pid}", {"title": "x", "version": 7}, 409),
    ("editor", "PATCH", "/api/posts/{pid}", {"publish_at": "2001-01-01T00:00:00Z"}, 422),
    ("viewer", "POST", "/api/posts/{pid}/publish", None, 403),
    ("admin", "POST", "/api/webhooks", {"url": "ftp://x", "events": ["post.published"]}, 422),
])
def test_a_refused_api_call_leaves_no_audit_row(app, api, role, method, path, body, status):
    pid = new_post(app)
    response = api(method, path.format(pid=pid), role=role, body=body)
    assert response.status_code == status
    assert _events(app) == []


def test_a_recorded_change_that_rolls_back_leaves_no_row(app):
    with app.test_request_context("/", environ_base={"REMOTE_ADDR": WEB_ADDRESS}):
        assert audit.record("post.edit", "post 1") is not None  # anonymous, but a request
        db.session.rollback()
    assert _events(app) == []


def test_work_outside_a_request_or_command_is_not_a_persons_change(app):
    with app.app_context():
        assert audit.record("plugin.disable", "plugin sitemap") is None
        db.session.commit()
    assert _events(app) == []


# No secret is ever written ----------------------------------------------------------------

def test_no_secret_reaches_the_audit_log(app, auth, api):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True
    client = auth.client("admin", email="boss@example.com")
    secret = "whsec_" + "A" * 40
    post_form(client, "/admin/webhooks/", {"url": "http://127.0.0.1:9/a", "secret": secret,
                                           "events": "post.published"})
    made = api("POST", "/api/webhooks", role="admin",
               body={"url": "http://127.0.0.1:9/b", "events": ["post.published"]})
    invited = text(post_form(client, "/admin/users/", {"email": "new@example.com",
                                                       "role": "viewer"}))
    uid = add_user(app, "other@example.com")
    reset = text(post_form(client, f"/admin/users/{uid}/reset-password"))
    token_page = text(post_form(client, "/settings/tokens", {"label": "ci", "days": "30"}))
    secrets = [secret, made.get_json()["secret"], *_one_time(invited), *_one_time(reset),
               re.search(r"sol_[\w-]{20,}", token_page).group(0)]
    post_form(client, "/settings", {"timezone": "UTC", "current_password": "correct horse "
                                    "battery", "new_password": "brand new password",
                                    "confirm_password": "brand new password"})
    secrets.append("brand new password")
    logged = " ".join(f"{e.target} {e.detail}" for e in _events(app))
    assert {"webhook.create", "user.invite", "user.reset_password", "token.create",
            "user.password"} <= {e.action for e in _events(app)}
    assert [s for s in secrets if s in logged] == []


def _one_time(page: str) -> list[str]:
    return re.findall(r'class="one-time-password"[^>]*>([^<]+)<', page)


def test_a_detail_naming_a_secret_is_refused_before_it_is_written(app):
    with app.test_request_context("/"), pytest.raises(ValueError, match="secrets"):
        audit.record("webhook.create", "webhook 1", {"secret": "x"})


# The admin page -------------------------------------------------------------------------

def test_admin_page_lists_changes_newest_first_with_who_what_and_from_where(app, auth):
    client = auth.client("admin")
    post_form(client, "/admin/posts/new", {"title": "Launch", "body": "x"},
              environ_base={"REMOTE_ADDR": WEB_ADDRESS})
    post_form(client, "/admin/posts/1/publish", environ_base={"REMOTE_ADDR": WEB_ADDRESS})
    page = text(client.get("/admin/audit/"))
    assert page.index("post.publish") < page.index("post.create")
    assert "admin@example.com" in page and WEB_ADDRESS in page and "post 1 “Launch”" in page
    assert 'href="/admin/audit/"' in text(client.get("/admin/"))  # in the navigation


def test_page_filters_by_who_what_and_days_in_the_viewers_zone(app, auth):
    # 2026-03-10 10:59 UTC is 23:59 on the 10th in Auckland (NZDT, UTC+13); 11:01 is the 11th
    late = _add(app, "2026-03-10T10:59:00+00:00", "ed@example.com", "post.publish")
    early = _add(app, "2026-03-10T11:01:00+00:00", "ada@example.com", "timer.pause")
    other = _add(app, "2026-03-12T09:00:00+00:00", "ada@example.com", "post.edit")
    client = auth.client("admin", timezone="Pacific/Auckland")
    sign_in = {e.id for e in _events(app) if e.action == "session.start"}

    def shown(**query) -> set[int]:
        response = client.get("/admin/audit/", query_string=query)
        assert response.status_code == 200
        return {int(n) for n in re.findall(r'id="audit-(\d+)"', text(response))} - sign_in

    assert shown() == {late, early, other}
    assert shown(actor="ADA@") == {early, other}
    assert shown(action="post.") == shown(action="post") == {late, other}
    assert shown(action="timer.pause") == {early}
    assert shown(**{"from": "2026-03-11", "to": "2026-03-11"}) == {early}
    assert shown(**{"to": "2026-03-10"}) == {late}


@pytest.mark.parametrize(("query", "field"), [
    ({"from": "2026-13-40"}, "from"),
    ({"to": "yesterday"}, "to"),
    ({"from": "2026-03-12", "to": "2026-03-10"}, "to"),
    ({"action": "DROP TABLE"}, "action"),
])
def test_page_refuses_bad_filters_with_422_keeping_what_was_typed(auth, query, field):
    client = auth.client("admin")
    response = client.get("/admin/audit/", query_string=query)
    assert response.status_code == 422
    page = text(response)
    assert field_error(page, field)
    for value in query.values():
        assert f'value="{value}"' in page


def test_page_pages_back_through_older_changes(app, auth):
    ids = [_add(app, f"2026-03-10T10:{n:02d}:00+00:00") for n in range(55)]
    client = auth.client("admin")
    first = text(client.get("/admin/audit/"))
    older = re.search(r'href="(/admin/audit/\?before=\d+)"', first).group(1)
    second = text(client.get(older))
    assert len(re.findall(r'id="audit-\d+"', first)) == 50  # the sign-in is the newest
    assert {int(n) for n in re.findall(r'id="audit-(\d+)"', second)} == set(ids[:6])


@pytest.mark.parametrize("role", ["viewer", "editor"])
def test_only_admins_read_the_audit_log(app, auth, api, role):
    assert auth.client(role, email=f"{role}2@example.com").get("/admin/audit/").status_code == 403
    assert api("GET", "/api/audit", role=role).status_code == 403


# GET /api/audit -------------------------------------------------------------------------

def test_api_lists_events_with_filters_and_a_cursor(app, api):
    old = _add(app, "2026-03-10T10:00:00+00:00", "ada@example.com", "post.publish")
    mid = _add(app, "2026-03-11T10:00:00+00:00", "ada@example.com", "post.edit")
    new = _add(app, "2026-03-12T10:00:00+00:00", "ed@example.com", "timer.run")
    body = api("GET", "/api/audit?limit=2", role="admin").get_json()
    assert [e["id"] for e in body["events"]] == [new, mid] and body["next_before"] == mid
    event = body["events"][1]
    assert (event["at"], event["actor"], event["action"], event["target"], event["detail"]) == (
        "2026-03-11T10:00:00Z", "ada@example.com", "post.edit", "post 1 “Hello”",
        {"title": ["Hello", "Hi"]})
    rest = api("GET", f"/api/audit?limit=2&before={mid}", role="admin").get_json()
    assert ([e["id"] for e in rest["events"]], rest["next_before"]) == ([old], None)
    query = "actor=ada&action=post.&from=2026-03-10T13:00:00%2B02:00&to=2026-03-12T00:00:00Z"
    assert [e["id"] for e in api("GET", f"/api/audit?{query}", role="admin")
            .get_json()["events"]] == [mid]


@pytest.mark.parametrize(("query", "field"), [
    ("limit=0", "limit"), ("limit=201", "limit"), ("before=x", "before"),
    ("before=999", "before"), ("from=monday", "from"), ("to=2026-03-10T00:00:00", "to"),
    ("action=post.*", "action"), ("who=ada", "who"), ("actor=a%00b", "actor"),
    ("from=2026-03-12T00:00:00Z&to=2026-03-10T00:00:00Z", "to"),
])
def test_api_refuses_bad_filters_naming_the_field(api, query, field):
    response = api("GET", f"/api/audit?{query}", role="admin")
    assert response.status_code == 422
    assert response.get_json()["field"] == field


# The command line, deleted users, retention ---------------------------------------------

def test_commands_are_recorded_as_made_from_the_shell(app, runner):
    with app.app_context():  # as `flask` gives every command
        runner.invoke(args=["create-user", "ops@example.com", "--role", "viewer",
                            "--password", "long enough password"])
        token = runner.invoke(args=["create-token", "ops@example.com"]).output.split()[-1]
        runner.invoke(args=["revoke-tokens", "ops@example.com"])
    events = _events(app)
    assert [(e.action, e.via) for e in events] == [
        ("user.create", "cli"), ("token.create", "cli"), ("token.revoke", "cli")]
    assert all(e.actor.endswith("(shell)") and e.actor_id is None for e in events)
    assert all(token not in e.detail for e in events)


def test_the_actor_is_kept_when_the_user_goes(app, auth):
    client = auth.client("editor", email="gone@example.com")
    post_form(client, "/admin/posts/new", {"title": "Hello", "body": "x"})
    with app.app_context():
        db.session.execute(sa.delete(User).where(User.email == "gone@example.com"))
        db.session.commit()
    event = [e for e in _events(app) if e.action == "post.create"][0]
    assert (event.actor, event.actor_id) == ("gone@example.com", None)


def _retention_form(audit_days: int) -> dict:
    return {**TIMER, "name": "Housekeeping: trim history", "action": "housekeeping.trim",
            "params": json.dumps({"audit_days": audit_days})}


def test_editors_cannot_change_the_audit_retention(app, auth):
    timer_id = _housekeeping_timer(app)
    client = auth.client("editor")
    response = post_form(client, f"/admin/timers/{timer_id}/edit", _retention_form(400))
    assert response.status_code == 403
    assert _changes(app) == []


def test_nobody_keeps_the_audit_log_under_thirty_days(app, auth):
    timer_id = _housekeeping_timer(app)
    client = auth.client("admin")
    response = post_form(client, f"/admin/timers/{timer_id}/edit", _retention_form(10))
    assert response.status_code == 422
    assert "audit_days must be at least 30" in field_error(text(response), "params").lower()
    assert _changes(app) == []
    response = post_form(client, f"/admin/timers/{timer_id}/edit", _retention_form(400))
    assert response.status_code == 303
    [event] = [e for e in _events(app) if e.action == "timer.edit"]
    before, after = json.loads(event.detail)["params"]
    assert (before.get("audit_days"), after["audit_days"]) == (None, 400)


def test_the_page_says_sizes_and_times_as_people_write_them(app, auth):
    """"body: 1 character", and a moment in a detail in the viewer's zone like the When
    column, never a raw ISO stamp (issue 37, finding 8)."""
    with app.app_context():
        db.session.add(AuditEvent(
            at=datetime(2026, 12, 3, 23, 5, tzinfo=UTC), actor="ed@example.com", via="web",
            address="192.0.2.1", action="post.schedule", target="post 1 “Hello”",
            detail=json.dumps({"body": [audit.text_size("xy"), audit.text_size("x")],
                               "publish_at": [None, "2026-12-03T23:04:30.677213+00:00"]})))
        db.session.commit()
    page = text(auth.client("admin", timezone="Europe/Paris").get("/admin/audit/"))
    cell = page.split('class="audit-detail">')[1].split("</td>")[0]
    assert re.findall(r"<div>(.*?)</div>", re.sub(r"</?span[^>]*>", "", cell)) == [
        "body: 2 characters → 1 character", "publish_at: — → Fri 4 Dec, 00:04:30 Paris time"]
