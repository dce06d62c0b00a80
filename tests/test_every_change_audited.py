"""The audit log: every state-changing route and endpoint writes exactly one row, refusals none.

Each case below sets the world up directly (no request, so no audit row), signs a browser
in or takes a role's API token, then makes one request and finds one new audit row: the
right action, actor, address, way in (web or api, and which token) and target. A change
proved with a secret (a code, the current password) also logs that decision (auth.ok, the
authentication log: tests/test_authentication_log.py), which is not counted here.
"""

import contextlib
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyotp
import pytest
import sqlalchemy as sa

from tests.harness import media_files
from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, holding
from tests.harness.support import (
    TIMER,
    Api,
    AuthActions,
    add_user,
    new_post,
    post_form,
    record_term,
)
from webapp import media, timers
from webapp.accounts import sessions, totp
from webapp.accounts.tokens import create_token
from webapp.extensions import db
from webapp.models import (
    ApiToken,
    AuditEvent,
    OutboxEvent,
    Passkey,
    PostReview,
    ReleaseItem,
    ScheduledChange,
    User,
    WebhookDelivery,
    WebhookEndpoint,
    utcnow,
)
from webapp.ops import freezes
from webapp.plugins import registry
from webapp.posts import content_digest, create_link, release_preview, revisions
from webapp.posts.releases import ItemSpec, create_release

WEB_ADDRESS, API_ADDRESS = "198.51.100.7", "2001:db8::42"
FUTURE = "2031-01-15T09:30"
STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
NOT_A_CHANGE = {"posts.preview",  # renders Markdown, writes nothing
                # a ceremony's challenge (expiring, single-use): nobody's change yet
                "passkeys.registration_options", "passkeys.sign_in_options",
                "passkeys.step_up_options",
                "passkeys.step_up",  # proves the session again: the change it guards audits
                "passkeys.confirm",  # the same, by the step-up prompt, before adding one
                # an editor's own unsaved text, every few seconds: no change to anything
                # shared (the post, its history); the save that ends it is audited
                "autosaves.keep", "autosaves.keep_new", "autosaves.discard",
                "autosaves.discard_new", "api.put_autosave", "api.delete_autosave"}
# a real authenticator makes these: tests/test_passkeys_browser.py checks their audit rows
AUDITED_IN_CHROMIUM = {"passkeys.register", "passkeys.sign_in"}


@dataclass
class World:
    """What a case works with: the app, the signed-in browser or the API, ids it made."""

    app: object
    pg_url: str
    role: str
    client: object = None
    api: Api | None = None
    ids: dict = field(default_factory=dict)
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def user_id(self, email: str) -> int:
        with self.app.app_context():
            return db.session.scalar(sa.select(User.id).where(User.email == email))

    def post(self, status: str = "draft", **fields) -> int:
        if status == "scheduled":
            fields.setdefault("publish_at", utcnow().replace(year=2031))
        if status == "published":
            fields.setdefault("published_at", utcnow())
        self.ids["post"] = new_post(self.app, "Hello", status, **fields)
        return self.ids["post"]

    def timer(self, paused: bool = False) -> int:
        with self.app.app_context():
            timer = timers.create_timer(TIMER)
            if paused:
                timers.pause(timer)
            self.ids["timer"] = timer.id
        return self.ids["timer"]

    def other_user(self, **fields) -> int:
        self.ids["user"] = add_user(self.app, "other@example.com", "editor", **fields)
        return self.ids["user"]

    def session_of(self, email: str) -> int:
        with self.app.app_context():
            user = db.session.scalar(sa.select(User).where(User.email == email))
            sessions.start_session(user, "192.0.2.1", "another browser")
            return max(s.id for s in sessions.list_sessions(user))

    def token_of(self, email: str) -> int:
        with self.app.app_context():
            user = db.session.scalar(sa.select(User).where(User.email == email))
            create_token(user, "deploy script")
            return db.session.scalar(sa.select(sa.func.max(ApiToken.id)))

    def webhook(self, active: bool = True) -> int:
        with self.app.app_context():
            endpoint = WebhookEndpoint(url="http://127.0.0.1:9/hook", events=["post.published"],
                                       secret="s" * 32, active=active)
            db.session.add(endpoint)
            db.session.commit()
            self.ids["webhook"] = endpoint.id
        return self.ids["webhook"]

    def delivery(self) -> int:
        endpoint_id = self.webhook()
        with self.app.app_context():
            event = OutboxEvent(topic="post.published", payload={}, instance="t")
            db.session.add(event)
            db.session.flush()
            delivery = WebhookDelivery(delivery_id="d-1", endpoint_id=endpoint_id,
                                       event_id=event.id, topic="post.published", body="{}",
                                       status="failed", attempts=6)
            db.session.add(delivery)
            db.session.commit()
            return delivery.id

    def holder(self, name: str, *keys: int) -> None:
        conn = self.stack.enter_context(holding(self.pg_url, name, *keys))
        record_term(self.app, keys[0], conn, term=4, heartbeat_age=60)

    def form(self, url: str, data: dict | None = None):
        return post_form(self.client, url, data or {})

    def call(self, method: str, path: str, body=None):
        return self.api(method, path, role=self.role, body=body)


@dataclass(frozen=True)
class Case:
    """One state-changing route: who uses it, how, and the audit row it must leave."""

    endpoint: str
    role: str
    send: Callable[[World], object]
    action: str
    target: str = ""  # part of the row's target
    status: int = 303

    @property
    def api(self) -> bool:
        return self.endpoint.startswith("api.")


def _edit(w: World):
    pid = w.post()
    return w.form(f"/admin/posts/{pid}", {
        "title": "Hello again", "slug": "hello", "body": "Some *text*.", "version": 1,
        "digest": content_digest("Hello", "hello", "Some *text*.")})


def _old_version(w: World) -> int:
    """A published post whose history holds an older text; return that version's id."""
    pid = w.post("published")
    with w.app.app_context():
        revisions.keep(pid, "Hello", "An older text.", "create", True)
        db.session.commit()
        return revisions.current_revision_id(pid)


def _restore(w: World, api: bool = False):
    rid = _old_version(w)
    if api:
        return w.call("POST", f"/api/posts/{w.ids['post']}/revisions/{rid}/restore",
                      {"version": 1})
    return w.form(f"/admin/posts/{w.ids['post']}/history/{rid}/restore", {"version": 1})


def _scheduled_change(w: World, cancel: bool = False, api: bool = False):
    pid = w.post("published")
    with w.app.app_context():
        change = ScheduledChange(post_id=pid, title="Hello", body="New.", base_version=1,
                                 apply_at=utcnow().replace(year=2031), base_digest="", author="")
        db.session.add(change)
        db.session.commit()
        change_id = change.id
    if api:
        return w.call("DELETE" if cancel else "PATCH", f"/api/posts/{pid}/change",
                      None if cancel else {"body": "Newer."})
    if cancel:
        return w.form(f"/admin/posts/{pid}/change/cancel")
    return w.form(f"/admin/posts/{pid}/change", {"title": "Hello", "body": "Newer.",
                                                 "apply_at": FUTURE, "zone": "UTC",
                                                 "change_id": change_id})


def _in_review(w: World) -> int:
    """A post another editor submitted for review; return its id."""
    pid = w.post()
    writer = add_user(w.app, "writer@example.com", "contributor")
    with w.app.app_context():
        db.session.add(PostReview(post_id=pid, state="in_review", author_id=writer,
                                  author="writer@example.com", submitted_at=utcnow()))
        db.session.commit()
    return pid


def _revoke_preview(w: World):
    pid = w.post()
    with w.app.app_context():
        link_id = create_link(pid, 1, None)[0].id
    return w.form(f"/admin/posts/{pid}/previews/{link_id}/revoke")


def _settings_password(w: World):
    return w.form("/settings", {"timezone": "UTC", "current_password": "correct horse battery",
                                "new_password": "a new long password",
                                "confirm_password": "a new long password"})


def _step_down(w: World):
    w.holder("soloist:a:1", PUBLISH_KEY)
    return w.form("/status/publish/step-down", {"holder": "soloist:a:1"})


def _evict(w: World):
    w.holder("soloist:stuck:9", PUBLISH_KEY, PLUGINS_KEY)
    return w.form("/status/publish/evict", {"holder": "soloist:stuck:9"})


def _resume_publishing(w: World):
    with w.app.app_context():
        freezes.freeze("publishing", "incident", "publish", "admin@example.com")
    return w.form("/admin/freeze/publishing/resume")


def _two_factor(w: World, on: bool = True) -> str:
    """Set two-factor up for the signed-in editor without the pages (no audit row); return
    the secret. on: also switched on (the enrolment's code is now's step)."""
    with w.app.test_request_context():
        user = db.session.scalar(sa.select(User).where(User.email == "editor@example.com"))
        secret = totp.start(user)
        if on:
            assert totp.confirm(user, pyotp.TOTP(secret).now())
    return secret


def _next_code(secret: str) -> str:
    return pyotp.TOTP(secret).at(time.time() + 30)


def _sign_in_with_a_code(w: World):
    secret = _two_factor(w)
    w.client = w.app.test_client()
    first = AuthActions(w.client).login("editor", address=WEB_ADDRESS)
    assert first.status_code == 303
    return post_form(w.client, "/login/code", {"code": _next_code(secret)},
                     environ_base={"REMOTE_ADDR": WEB_ADDRESS})


def _remove_passkey(w: World):
    with w.app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "editor@example.com"))
        key = Passkey(user_id=user.id, credential_id=b"cred", public_key=b"key", name="Phone")
        db.session.add(key)
        db.session.commit()
        key_id = key.id
    return w.form(f"/settings/passkeys/{key_id}/remove")


def _media(w: World, used: bool = False) -> int:
    """Store an image without a request (no audit row); used: a post shows it."""
    with w.app.app_context():
        row, _added = media.upload(media_files.jpeg(), "gull.jpg", "A gull", 10_000_000, None)
        if used:
            w.post(body=media.markdown_for(row.sha256, row.ext, row.alt))
        return row.id


def _upload_media(w: World, api: bool = False):
    form = {"file": (io.BytesIO(media_files.jpeg()), "gull.jpg"), "alt": "A gull"}
    if api:
        return w.api.client.post("/api/media", data=form, content_type="multipart/form-data",
                                 headers={"Authorization": f"Bearer {w.api.tokens[w.role]}"})
    return post_form(w.client, "/admin/media/", form, content_type="multipart/form-data")


def _release(w: World, items: int = 0) -> int:
    """Make a release "Launch" without a request (no audit row), with items drafts in it."""
    specs = [ItemSpec("publish", new_post(w.app, f"Draft {n}")) for n in range(items)]
    with w.app.app_context():
        w.ids["release"] = create_release("Launch", datetime(2031, 1, 15, tzinfo=UTC), specs).id
    return w.ids["release"]


def _release_item(w: World) -> str:
    release = _release(w, items=1)
    with w.app.app_context():
        item = db.session.scalar(sa.select(ReleaseItem.id))
    return f"/admin/releases/{release}/items/{item}/remove"


def _revoke_release_preview(w: World):
    release = _release(w)
    with w.app.app_context():
        release_preview.create_preview(release, 7)
    return w.form(f"/admin/releases/{release}/preview/revoke")


def _sign_in(w: World):
    w.client = w.app.test_client()
    return AuthActions(w.client).login("editor", address=WEB_ADDRESS)


CASES = [
    # posts, by an editor
    Case("posts.new", "editor", lambda w: w.form("/admin/posts/new", {
        "title": "Hello", "slug": "", "body": "Hi"}), "post.create", "post 1 “Hello”"),
    Case("posts.edit", "editor", _edit, "post.edit", "“Hello again”"),
    Case("posts.schedule", "editor", lambda w: w.form(f"/admin/posts/{w.post()}/schedule", {
        "publish_at": FUTURE, "zone": "UTC", "version": 1}), "post.schedule", "“Hello”"),
    Case("posts.unpublish_time", "editor", lambda w: w.form(
        f"/admin/posts/{w.post('published')}/unpublish-time",
        {"unpublish_at": FUTURE, "zone": "UTC", "version": 1}), "post.unpublish_time"),
    Case("posts.unschedule", "editor", lambda w: w.form(
        f"/admin/posts/{w.post('scheduled')}/unschedule"), "post.unschedule", "post "),
    Case("posts.publish", "editor", lambda w: w.form(f"/admin/posts/{w.post()}/publish"),
         "post.publish", "“Hello”"),
    Case("posts.unpublish", "editor", lambda w: w.form(
        f"/admin/posts/{w.post('published')}/unpublish"), "post.unpublish", "“Hello”"),
    # review
    Case("posts.submit", "editor", lambda w: w.form(f"/admin/posts/{w.post()}/submit", {
        "version": 1}), "post.submit", "“Hello”"),
    Case("posts.approve", "editor", lambda w: w.form(f"/admin/posts/{_in_review(w)}/approve", {
        "publish_at": FUTURE, "zone": "UTC", "version": 1}), "post.approve", "“Hello”"),
    Case("posts.approve", "editor", lambda w: w.form(f"/admin/posts/{_in_review(w)}/approve", {
        "now": "1", "zone": "UTC", "version": 1}), "post.approve", "“Hello”"),
    Case("posts.send_back", "editor", lambda w: w.form(f"/admin/posts/{_in_review(w)}/return", {
        "note": "Shorter, please.", "version": 1}), "post.return", "“Hello”"),
    Case("revisions.restore", "editor", _restore, "post.restore", "“Hello”"),
    Case("revisions.change", "editor", lambda w: w.form(
        f"/admin/posts/{w.post('published')}/change", {
            "title": "Hello", "body": "New.", "apply_at": FUTURE, "zone": "UTC"}),
         "post.change_schedule", "“Hello”"),
    Case("revisions.change", "editor", _scheduled_change, "post.change_edit"),
    Case("revisions.cancel_change", "editor", lambda w: _scheduled_change(w, cancel=True),
         "post.change_cancel", "“Hello”"),
    Case("releases.create", "editor", lambda w: w.form("/admin/releases/", {
        "name": "Launch", "release_at": FUTURE, "zone": "UTC"}), "release.create", "“Launch”"),
    Case("releases.save", "editor", lambda w: w.form(f"/admin/releases/{_release(w)}", {
        "name": "Launch 2", "release_at": FUTURE, "zone": "UTC"}), "release.edit", "“Launch 2”"),
    Case("releases.add", "editor", lambda w: w.form(f"/admin/releases/{_release(w)}/items", {
        "kind": "publish", "post_id": w.post()}), "release.add", "“Launch”"),
    Case("releases.remove", "editor", lambda w: w.form(_release_item(w)), "release.remove",
         "“Launch”"),
    Case("releases.cancel", "editor", lambda w: w.form(f"/admin/releases/{_release(w)}/cancel"),
         "release.cancel", "“Launch”"),
    Case("releases.preview", "editor", lambda w: w.form(
        f"/admin/releases/{_release(w)}/preview", {"days": "7"}), "release.preview", "“Launch”",
         status=201),
    Case("releases.revoke_preview", "editor", _revoke_release_preview,
         "release.preview_revoke", "“Launch”"),
    Case("previews.create", "editor", lambda w: w.form(
        f"/admin/posts/{w.post()}/previews", {"days": "7"}), "preview.create", "“Hello”",
         status=201),
    Case("previews.revoke", "editor", _revoke_preview, "preview.revoke", "“Hello”"),
    Case("calendar.move", "editor", lambda w: w.form(
        f"/admin/calendar/posts/{w.post('scheduled')}/move", {
            "date": "2031-02-01", "time": "09:00", "zone": "UTC", "version": 1}),
         "post.schedule", "“Hello”"),
    # timers, by an editor
    Case("timers.create", "editor", lambda w: w.form("/admin/timers/new", TIMER),
         "timer.create", "“Review timer”"),
    Case("timers.edit", "editor", lambda w: w.form(f"/admin/timers/{w.timer()}/edit", {
        **TIMER, "every": "10"}), "timer.edit", "“Review timer”"),
    Case("timers.run_now", "editor", lambda w: w.form(f"/admin/timers/{w.timer()}/run"),
         "timer.run", "timer 1"),
    Case("timers.pause", "editor", lambda w: w.form(f"/admin/timers/{w.timer()}/pause"),
         "timer.pause", "timer 1"),
    Case("timers.resume", "editor", lambda w: w.form(f"/admin/timers/{w.timer(True)}/resume"),
         "timer.resume", "timer 1"),
    Case("timers.delete", "editor", lambda w: w.form(f"/admin/timers/{w.timer()}/delete"),
         "timer.delete", "timer 1"),
    # plugins, webhooks, users, leadership, freezes: admins
    Case("plugins.switch", "admin", lambda w: w.form("/admin/plugins/sitemap/disable"),
         "plugin.disable", "plugin sitemap"),
    Case("webhooks.create", "admin", lambda w: w.form("/admin/webhooks/", {
        "url": "http://127.0.0.1:9/hook", "events": "post.published", "secret": "s" * 32}),
         "webhook.create", "http://127.0.0.1:9/hook"),
    Case("webhooks.switch", "admin", lambda w: w.form(f"/admin/webhooks/{w.webhook()}/disable"),
         "webhook.disable", "webhook 1"),
    Case("webhooks.delete", "admin", lambda w: w.form(f"/admin/webhooks/{w.webhook()}/delete"),
         "webhook.delete", "webhook 1"),
    Case("webhooks.send_test", "admin", lambda w: w.form(f"/admin/webhooks/{w.webhook()}/test"),
         "webhook.test", "webhook 1"),
    Case("webhooks.redeliver", "admin", lambda w: w.form(
        f"/admin/webhooks/deliveries/{w.delivery()}/redeliver"), "webhook.redeliver",
         "delivery 1"),
    Case("users.create", "admin", lambda w: w.form("/admin/users/", {
        "email": "new@example.com", "role": "viewer"}), "user.invite", "new@example.com", 201),
    Case("users.role", "admin", lambda w: w.form(f"/admin/users/{w.other_user()}/role", {
        "role": "viewer"}), "user.role", "other@example.com"),
    Case("users.deactivate", "admin", lambda w: w.form(
        f"/admin/users/{w.other_user()}/deactivate"), "user.deactivate", "other@example.com"),
    Case("users.activate", "admin", lambda w: w.form(
        f"/admin/users/{w.other_user(active=False)}/activate"), "user.activate",
         "other@example.com"),
    Case("users.reset", "admin", lambda w: w.form(
        f"/admin/users/{w.other_user()}/reset-password"), "user.reset_password",
         "other@example.com", 200),
    Case("users.end_session", "admin", lambda w: w.form(
        f"/admin/users/{w.other_user()}/sessions/{w.session_of('other@example.com')}/end"),
         "session.end", "other@example.com"),
    Case("users.revoke_token", "admin", lambda w: w.form(
        f"/admin/users/{w.other_user()}/tokens/{w.token_of('other@example.com')}/revoke"),
         "token.revoke", "other@example.com"),
    Case("users.everywhere", "admin", lambda w: w.form(
        f"/admin/users/{w.other_user()}/sign-out-everywhere"), "user.sign_out_everywhere",
         "other@example.com"),
    Case("users.two_factor_policy", "admin", lambda w: w.form(
        "/admin/users/two-factor-policy", {"two_factor_required": "admins"}),
         "account.two_factor_policy", "two-factor policy"),
    Case("users.reset_two_factor", "admin", lambda w: w.form(
        f"/admin/users/{w.other_user()}/two-factor/reset"), "user.two_factor_reset",
         "other@example.com"),
    Case("status.act", "admin", _step_down, "leader.step_down", "publish key"),
    Case("status.act", "admin", _evict, "leader.evict", "publish key"),
    Case("freezes.create", "admin", lambda w: w.form("/admin/freeze/", {
        "scope": "publishing", "reason": "incident", "on_resume": "publish"}), "freeze.start",
         "publishing"),
    Case("freezes.resume", "admin", _resume_publishing, "freeze.resume", "publishing"),
    # media, by an editor
    Case("media.upload", "editor", _upload_media, "media.upload", "“gull.jpg”"),
    Case("media.delete", "editor", lambda w: w.form(f"/admin/media/{_media(w)}/delete"),
         "media.delete", "media 1"),
    Case("site_settings.save", "admin", lambda w: w.form("/admin/site/", {
        "name": "Harbour News", "description": "From the quay"}), "site.settings", "site"),
    Case("site_settings.review", "admin", lambda w: w.form("/admin/site/review", {
        "require_review": "1"}), "site.review", "site"),
    # one's own account
    Case("auth.login", "editor", _sign_in, "session.start", "editor@example.com", 302),
    Case("auth.second_factor", "editor", _sign_in_with_a_code, "session.start",
         "editor@example.com", 302),
    Case("passkeys.remove", "editor", _remove_passkey, "user.passkey_remove",
         "editor@example.com"),
    Case("two_factor.start", "editor", lambda w: w.form("/settings/two-factor/start"),
         "user.two_factor_setup", "editor@example.com"),
    Case("two_factor.confirm", "editor", lambda w: w.form("/settings/two-factor/confirm", {
        "code": pyotp.TOTP(_two_factor(w, on=False)).now()}), "user.two_factor_on",
         "editor@example.com", 200),
    Case("two_factor.recovery_codes", "editor", lambda w: w.form(
        "/settings/two-factor/recovery-codes", {"code": _next_code(_two_factor(w))}),
         "user.recovery_codes", "editor@example.com", 200),
    Case("two_factor.off", "editor", lambda w: w.form("/settings/two-factor/off", {
        "code": _next_code(_two_factor(w))}), "user.two_factor_off", "editor@example.com"),
    Case("auth.logout", "editor", lambda w: w.form("/logout"), "session.end",
         "editor@example.com"),
    Case("auth.settings", "editor", lambda w: w.form("/settings", {"timezone": "Europe/Paris"}),
         "user.settings", "editor@example.com"),
    Case("auth.settings", "editor", _settings_password, "user.password", "editor@example.com"),
    Case("auth.create_api_token", "editor", lambda w: w.form("/settings/tokens", {
        "label": "deploy script", "days": "30"}), "token.create", "“deploy script”", 201),
    Case("auth.revoke_api_token", "editor", lambda w: w.form(
        f"/settings/tokens/{w.token_of('editor@example.com')}/revoke"), "token.revoke",
         "editor@example.com"),
    Case("auth.end_own_session", "editor", lambda w: w.form(
        f"/settings/sessions/{w.session_of('editor@example.com')}/end"), "session.end",
         "editor@example.com"),
    # the JSON API
    Case("api.create_post", "editor", lambda w: w.call("POST", "/api/posts", {
        "title": "Hello", "body": "Hi"}), "post.create", "“Hello”", 201),
    Case("api.update_post", "editor", lambda w: w.call("PATCH", f"/api/posts/{w.post()}", {
        "title": "Hello again"}), "post.edit", "“Hello again”", 200),
    Case("api.update_post", "editor", lambda w: w.call("PATCH", f"/api/posts/{w.post()}", {
        "publish_at": "2031-01-15T09:30:00Z"}), "post.schedule", "“Hello”", 200),
    Case("api.publish_post", "editor", lambda w: w.call(
        "POST", f"/api/posts/{w.post()}/publish"), "post.publish", "“Hello”", 200),
    Case("api.submit_post", "editor", lambda w: w.call(
        "POST", f"/api/posts/{w.post()}/submit"), "post.submit", "“Hello”", 200),
    Case("api.approve_post", "editor", lambda w: w.call(
        "POST", f"/api/posts/{_in_review(w)}/approve"), "post.approve", "“Hello”", 200),
    Case("api.return_post", "editor", lambda w: w.call(
        "POST", f"/api/posts/{_in_review(w)}/return", {"note": "No."}), "post.return",
         "“Hello”", 200),
    Case("api.restore_revision", "editor", lambda w: _restore(w, api=True), "post.restore",
         "“Hello”", 200),
    Case("api.create_change", "editor", lambda w: w.call(
        "POST", f"/api/posts/{w.post('published')}/change", {
            "body": "New.", "apply_at": "2031-01-15T09:30:00Z"}), "post.change_schedule",
         "“Hello”", 201),
    Case("api.update_change", "editor", lambda w: _scheduled_change(w, api=True),
         "post.change_edit", status=200),
    Case("api.cancel_change", "editor", lambda w: _scheduled_change(w, cancel=True, api=True),
         "post.change_cancel", "“Hello”", 200),
    Case("api.create_webhook", "admin", lambda w: w.call("POST", "/api/webhooks", {
        "url": "http://127.0.0.1:9/hook", "events": ["post.published"]}), "webhook.create",
         "webhook 1", 201),
    Case("api.upload_media", "editor", lambda w: _upload_media(w, api=True), "media.upload",
         "“gull.jpg”", 201),
    Case("api.delete_media", "editor", lambda w: w.call("DELETE", f"/api/media/{_media(w)}"),
         "media.delete", "“gull.jpg”", 200),
    Case("api.run_timer", "editor", lambda w: w.call("POST", f"/api/timers/{w.timer()}/run"),
         "timer.run", "“Review timer”", 202),
    Case("api.create_release", "editor", lambda w: w.call("POST", "/api/releases", {
        "name": "Launch", "release_at": "2031-01-15T09:30:00Z"}), "release.create", "“Launch”",
         201),
    Case("api.update_release", "editor", lambda w: w.call(
        "PATCH", f"/api/releases/{_release(w)}", {"name": "Launch 2"}), "release.edit",
         "“Launch 2”", 200),
    Case("api.cancel_release", "editor", lambda w: w.call(
        "POST", f"/api/releases/{_release(w)}/cancel"), "release.cancel", "“Launch”", 200),
]


def _case_id(case: Case) -> str:
    return case.action if case.endpoint != "status.act" else case.endpoint + "-" + case.action


def _last_id(app) -> int:
    with app.app_context():
        return db.session.scalar(sa.select(sa.func.coalesce(sa.func.max(AuditEvent.id), 0)))


def _rows_after(app, mark: int) -> list[AuditEvent]:
    with app.app_context():
        return list(db.session.scalars(
            sa.select(AuditEvent).where(AuditEvent.id > mark).order_by(AuditEvent.id)))


@pytest.fixture
def world(app, pg_url):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True
    with app.app_context():
        registry.set_enabled("sitemap", True)  # no request: not a person's change
    made = World(app, pg_url, "editor")
    with made.stack:
        yield made


def _ready(world: World, case: Case) -> None:
    """Sign the case's role in (a browser, or the API's tokens)."""
    world.role = case.role
    if case.api:
        world.api = Api(world.app)
        world.api.client.environ_base["REMOTE_ADDR"] = API_ADDRESS
    elif case.endpoint != "auth.login":
        world.client = world.app.test_client()
        response = AuthActions(world.client).login(case.role, address=WEB_ADDRESS)
        assert response.status_code == 302
        world.client.environ_base["REMOTE_ADDR"] = WEB_ADDRESS


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_each_state_changing_request_writes_one_audit_row(world, case):
    _ready(world, case)
    mark = _last_id(world.app)
    response = case.send(world)
    assert response.status_code == case.status, response.get_data(as_text=True)[:300]
    rows = [r for r in _rows_after(world.app, mark) if not r.action.startswith("auth.")
            and (r.action != "session.start"
                 or case.endpoint in ("auth.login", "auth.second_factor"))]
    assert [r.action for r in rows] == [case.action]
    row = rows[0]
    assert case.target in row.target
    assert row.actor == f"{case.role}@example.com"
    assert row.actor_id == world.user_id(row.actor)
    if case.api:
        with world.app.app_context():
            token = db.session.scalar(sa.select(ApiToken.id).where(
                ApiToken.user_id == row.actor_id))
        assert (row.via, row.address, row.token_id) == ("api", API_ADDRESS, token)
    else:
        assert (row.via, row.address, row.token_id) == ("web", WEB_ADDRESS, None)


def test_the_table_names_every_state_changing_route_and_endpoint(app):
    changing = {rule.endpoint for rule in app.url_map.iter_rules()
                if rule.methods & STATE_CHANGING and rule.endpoint != "static"}
    missing = changing - NOT_A_CHANGE - AUDITED_IN_CHROMIUM - {case.endpoint for case in CASES}
    assert not missing, f"add an audited case to CASES for {sorted(missing)}"
