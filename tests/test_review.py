"""Review before publish: a contributor writes and submits, a reviewer approves (with a time,
or now) or sends it back with a note. A contributor's post never goes live without an
approval, whichever way in (form, API, schedule, calendar); each step is in the audit log
and reaches the webhooks with its payload."""

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.support import (
    Api,
    AuthActions,
    add_user,
    field_error,
    new_post,
    post_form,
    serve,
    sign_in_page,
    text,
)
from tests.test_webhook_urls import allowed_app  # noqa: F401 (the fixture)
from webapp.accounts.tokens import create_token
from webapp.extensions import db
from webapp.models import AuditEvent, OutboxEvent, Post, PostReview, ReleaseItem, User
from webapp.ops import alerts
from webapp.plugins.endpoints import create_webhook
from webapp.scheduling import plugin_tick, publish

LATER = "2031-01-15T09:30"


def state(app, post_id: int) -> tuple[str, str | None, int]:
    """Return the post's status, its review state and its version, as stored now."""
    with app.app_context():
        post = db.session.get(Post, post_id)
        review = db.session.get(PostReview, post_id)
        return post.status, review.state if review else None, post.version


def actions(app, post_id: int) -> list[str]:
    with app.app_context():
        return list(db.session.scalars(
            sa.select(AuditEvent.action).where(AuditEvent.target.like(f"post {post_id} %"))
            .order_by(AuditEvent.id)))


def topics(app) -> list[str]:
    with app.app_context():
        return list(db.session.scalars(sa.select(OutboxEvent.topic).order_by(OutboxEvent.id)))


def token(app, email: str, role: str) -> str:
    add_user(app, email, role)
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == email))
        return create_token(user, "tests")


def write(contributor, title: str = "Harbour lights") -> int:
    """Write a draft as the contributor through the New post form; return its id."""
    page = contributor.get("/admin/posts/new")
    assert page.status_code == 200 and 'name="publish_at"' not in text(page)
    made = post_form(contributor, "/admin/posts/new", {"title": title, "slug": "",
                                                       "body": "The *quay* at night."})
    assert made.status_code == 303, text(made)[:300]
    return int(made.location.rsplit("/", 1)[1])


@pytest.fixture
def people(app, auth):
    """Signed-in clients: a contributor, an editor, another editor and an admin."""
    return {role: auth.client(role.split("-")[0], email=f"web-{role}@example.com")
            for role in ("contributor", "editor", "editor-two", "admin")}


def test_a_contributors_post_cannot_go_live_by_form_api_schedule_or_calendar(app, people, api):
    contributor = people["contributor"]
    post_id = write(contributor)
    assert state(app, post_id) == ("draft", "draft", 1)
    # the panel offers Submit for review, never Schedule or Publish now
    page = text(contributor.get(f"/admin/posts/{post_id}"))
    assert "Submit for review" in page and "Publish now" not in page and 'id="schedule-form"' \
        not in page
    for path in ("schedule", "publish"):
        refused = post_form(contributor, f"/admin/posts/{post_id}/{path}", {
            "publish_at": LATER, "zone": "UTC", "version": 1})
        assert refused.status_code == 403
    moved = post_form(contributor, f"/admin/calendar/posts/{post_id}/move", {
        "day": "2031-01-15", "version": 1})
    assert moved.status_code in (403, 404)
    # the API: a contributor's token writes drafts, and only drafts
    bearer = token(app, "writer@example.com", "contributor")
    answer = api("POST", "/api/posts", body={"title": "By API", "publish_at":
                 "2031-01-15T09:30:00Z"}, role=None, token=bearer)
    assert answer.status_code == 403 and answer.json["error"] == "Review required"
    mine = api("POST", "/api/posts", body={"title": "By API"}, role=None, token=bearer).json
    assert mine["status"] == "draft"
    for body in ({"publish_at": "2031-01-15T09:30:00Z"}, {"title": "Live?", "version": 1,
                                                           "publish_at": "2031-01-15T09:30:00Z"}):
        answer = api("PATCH", f"/api/posts/{mine['id']}", body=body, role=None, token=bearer)
        assert answer.status_code == 403, answer.json
    assert api("POST", f"/api/posts/{mine['id']}/publish", role=None,
               token=bearer).status_code == 403
    # nor another's post: not even its text
    answer = api("PATCH", f"/api/posts/{post_id}", body={"title": "Mine now"}, role=None,
                 token=bearer)
    assert answer.status_code == 403 and "not one of yours" in answer.json["detail"]
    assert state(app, post_id) == ("draft", "draft", 1)
    assert api("GET", f"/api/posts/{mine['id']}", role="viewer").json["status"] == "draft"
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Post).where(
            Post.status != "draft")) == 0


def test_submitted_then_approved_with_a_time_the_leader_publishes_it(app, people):
    contributor, editor = people["contributor"], people["editor"]
    post_id = write(contributor)
    done = post_form(contributor, f"/admin/posts/{post_id}/submit", {"version": 1})
    assert done.status_code == 303
    assert state(app, post_id) == ("draft", "in_review", 2)
    # the list shows it, and filters to it
    listed = text(editor.get("/admin/posts/?review=in_review"))
    assert "Harbour lights" in listed and ">In review</span>" in listed
    assert "Harbour lights" not in text(editor.get("/admin/posts/?review=changes_requested"))
    # an editor may not go round the review: Publish now is refused while it waits
    assert post_form(editor, f"/admin/posts/{post_id}/publish").status_code == 403
    panel = text(editor.get(f"/admin/posts/{post_id}"))
    assert "Approve and schedule" in panel and "Send back" in panel
    at = datetime.now(UTC) + timedelta(hours=2)
    approved = post_form(editor, f"/admin/posts/{post_id}/approve", {
        "version": 2, "zone": "UTC", "publish_at": at.strftime("%Y-%m-%dT%H:%M:%S")})
    assert approved.status_code == 303, text(approved)[:500]
    assert state(app, post_id) == ("scheduled", "approved", 3)
    with app.app_context():
        publish.tick(at + timedelta(seconds=1))
    assert state(app, post_id)[0] == "published"
    assert actions(app, post_id) == ["post.create", "post.submit", "post.approve"]
    assert topics(app) == ["post.submitted", "post.approved", "post.published"]


def test_sent_back_with_a_note_the_contributor_reads_it_and_submits_again(app, people):
    contributor, editor = people["contributor"], people["editor"]
    post_id = write(contributor)
    post_form(contributor, f"/admin/posts/{post_id}/submit", {"version": 1})
    empty = post_form(editor, f"/admin/posts/{post_id}/return", {"version": 2, "note": "  "})
    assert empty.status_code == 422 and field_error(text(empty), "note")
    assert state(app, post_id) == ("draft", "in_review", 2)
    note = "Name the harbour, & say <when> the lights go on."
    back = post_form(editor, f"/admin/posts/{post_id}/return", {"version": 2, "note": note})
    assert back.status_code == 303
    assert state(app, post_id) == ("draft", "changes_requested", 3)
    page = text(contributor.get(f"/admin/posts/{post_id}"))
    assert "Name the harbour, &amp; say &lt;when&gt; the lights go on." in page
    assert "Submit for review" in page
    assert "Harbour lights" in text(contributor.get("/admin/posts/?review=changes_requested"))
    # the contributor edits (their own draft) and submits again, text typed beside the button
    again = post_form(contributor, f"/admin/posts/{post_id}/submit", {
        "version": 3, "text_version": 3, "digest": "", "title": "Harbour lights at dusk",
        "slug": "harbour-lights", "body": "At dusk."})
    assert again.status_code == 303, text(again)[:400]
    status, review, _ = state(app, post_id)
    assert (status, review) == ("draft", "in_review")
    assert actions(app, post_id) == ["post.create", "post.submit", "post.return", "post.edit",
                                     "post.submit"]


def test_require_review_holds_an_editors_post_for_another_reviewer(app, people):
    editor, other, admin = people["editor"], people["editor-two"], people["admin"]
    turned = post_form(admin, "/admin/site/review", {"require_review": "1"})
    assert turned.status_code == 303
    assert 'name="require_review" value="1" checked' in text(admin.get("/admin/site/"))
    post_id = new_post(app, "Tide tables")
    refused = post_form(editor, f"/admin/posts/{post_id}/publish")
    assert refused.status_code == 403 and "Require review" in text(refused)
    refused = post_form(editor, f"/admin/posts/{post_id}/schedule", {
        "publish_at": LATER, "zone": "UTC", "version": 1})
    assert refused.status_code == 403 and state(app, post_id) == ("draft", None, 1)
    assert post_form(editor, f"/admin/posts/{post_id}/submit", {"version": 1}).status_code \
        == 303
    page = text(editor.get(f"/admin/posts/{post_id}"))
    assert "Approve and schedule" not in page and "Another editor or an admin approves" in page
    own = post_form(editor, f"/admin/posts/{post_id}/approve", {"version": 2, "now": "1",
                                                                "zone": "UTC"})
    assert own.status_code == 422 and "Another reviewer" in text(own)
    assert state(app, post_id) == ("draft", "in_review", 2)
    assert post_form(other, f"/admin/posts/{post_id}/approve", {
        "version": 2, "now": "1", "zone": "UTC"}).status_code == 303
    assert state(app, post_id) == ("published", "approved", 3)
    live = text(editor.get(f"/admin/posts/{post_id}"))  # taking it down stays theirs
    assert "Unpublish now" in live and "Save unpublish time" in live
    # an admin's own post goes out as before
    theirs = new_post(app, "Admin's note", slug="admins-note")
    assert post_form(admin, f"/admin/posts/{theirs}/publish").status_code == 303
    assert state(app, theirs)[0] == "published"
    post_form(admin, "/admin/site/review", {})
    assert post_form(editor, f"/admin/posts/{new_post(app, 'Free', slug='free')}/publish"
                     ).status_code == 303


def test_the_review_api_submits_lists_returns_and_approves(app, api):
    bearer = token(app, "writer@example.com", "contributor")
    mine = api("POST", "/api/posts", body={"title": "Ferry times"}, role=None,
               token=bearer).json
    submitted = api("POST", f"/api/posts/{mine['id']}/submit", body={"version": 1}, role=None,
                    token=bearer)
    assert submitted.status_code == 200
    assert submitted.json["state"] == "in_review" and submitted.json["author"] == \
        "writer@example.com"
    assert api("GET", "/api/reviews", role=None, token=bearer).status_code == 403
    [waiting] = api("GET", "/api/reviews").json["reviews"]
    assert waiting["post"]["title"] == "Ferry times" and waiting["post"]["version"] == 2
    no_note = api("POST", f"/api/posts/{mine['id']}/return", body={"version": 2})
    assert no_note.status_code == 422 and no_note.json["field"] == "note"
    back = api("POST", f"/api/posts/{mine['id']}/return", body={"version": 2, "note": "Fix"})
    assert back.json["state"] == "changes_requested" and back.json["note"] == "Fix"
    assert api("GET", "/api/reviews").json["reviews"] == []
    again = api("POST", f"/api/posts/{mine['id']}/submit", role=None, token=bearer)
    assert again.json["state"] == "in_review"
    stale = api("POST", f"/api/posts/{mine['id']}/approve", body={"version": 2})
    assert stale.status_code == 409
    done = api("POST", f"/api/posts/{mine['id']}/approve", body={
        "version": 4, "publish_at": "2031-01-15T09:30:00Z"})
    assert done.status_code == 200, done.json
    assert (done.json["status"], done.json["publish_at"]) == ("scheduled", "2031-01-15T09:30:00Z")
    assert actions(app, mine["id"]) == ["post.create", "post.submit", "post.return",
                                        "post.submit", "post.approve"]
    # publishing a post that waits for review approves it
    other = api("POST", "/api/posts", body={"title": "Tide"}, role=None, token=bearer).json
    api("POST", f"/api/posts/{other['id']}/submit", role=None, token=bearer)
    published = api("POST", f"/api/posts/{other['id']}/publish")
    assert published.status_code == 200 and published.json["status"] == "published"
    assert state(app, other["id"])[1] == "approved"
    assert actions(app, other["id"])[-1] == "post.approve"


def test_each_step_reaches_a_webhook_with_its_payload(allowed_app, receiver):  # noqa: F811
    hook_app = allowed_app
    create_webhook(receiver.url, ["post.submitted", "post.returned", "post.approved"],
                   "s3cret-for-the-receiver-only")
    db.session.commit()
    api = Api(hook_app)
    bearer = token(hook_app, "writer@example.com", "contributor")
    post_id = api("POST", "/api/posts", body={"title": "Lighthouse"}, role=None,
                  token=bearer).json["id"]
    api("POST", f"/api/posts/{post_id}/submit", role=None, token=bearer)
    api("POST", f"/api/posts/{post_id}/return", body={"note": "A photo, please."})
    api("POST", f"/api/posts/{post_id}/submit", role=None, token=bearer)
    api("POST", f"/api/posts/{post_id}/approve", body={"publish_at": "2031-01-15T09:30:00Z"})
    plugin_tick.tick(datetime.now(UTC), "web.1")
    wait_for(lambda: len(receiver.received()) == 4, 10, "four review webhooks")
    sent = sorted((json.loads(r.body) for r in receiver.received()),
                  key=lambda body: body["data"]["version"])
    assert [body["event"] for body in sent] == ["post.submitted", "post.returned",
                                                "post.submitted", "post.approved"]
    assert {body["data"]["post_id"] for body in sent} == {post_id}
    assert sent[0]["data"]["by"] == "writer@example.com"
    assert sent[0]["data"]["title"] == "Lighthouse" and sent[0]["data"]["slug"] == "lighthouse"
    assert (sent[1]["data"]["note"], sent[1]["data"]["by"]) == ("A photo, please.",
                                                                "editor@example.com")
    assert sent[3]["data"]["publish_at"] == "2031-01-15T09:30:00+00:00"
    assert len({body["event_id"] for body in sent}) == 4
    # a Slack endpoint reads the same steps in words
    assert alerts.text("post.returned", sent[1]["data"]) == (
        "[Soloist] Sent back by editor@example.com: “Lighthouse”: A photo, please.")


def test_in_chromium_a_contributor_submits_and_an_editor_approves(browser, app):
    from playwright.sync_api import expect

    add_user(app, "writer@example.com", "contributor")
    add_user(app, "editor@example.com", "editor")
    with serve(app) as url:
        writer_context = browser.new_context(base_url=url)
        editor_context = browser.new_context(base_url=url)
        try:
            writer, editor = writer_context.new_page(), editor_context.new_page()
            sign_in_page(writer, "writer@example.com")
            writer.goto("/admin/posts/new")
            assert writer.locator("#f-publish_at").count() == 0  # the reviewer picks the time
            writer.fill("#f-title", "Night ferry")
            writer.fill("#f-body", "Leaves at ten.")
            writer.click("#content-form button.primary")
            writer.wait_for_url("**/admin/posts/*")
            writer.fill("#f-body", "Leaves at ten, from pier 2.")  # typed, not saved
            writer.click("text=Submit for review")
            expect(writer.locator("#review-state")).to_have_text("In review")
            expect(writer.locator("#f-body")).to_have_value("Leaves at ten, from pier 2.")

            sign_in_page(editor, "editor@example.com")
            editor.goto("/admin/posts/?review=in_review")
            editor.click("text=Night ferry")
            editor.on("dialog", lambda dialog: dialog.accept())
            editor.click("text=Approve and publish now")
            expect(editor.locator("#post-status")).to_have_text("published")
            # the writer's open page follows on its own (the panel asks every 2 s)
            expect(writer.locator("#post-status")).to_have_text("published", timeout=6000)
            expect(writer.locator("#review-state")).to_have_text("Approved")
        finally:
            writer_context.close()
            editor_context.close()


def test_a_post_an_editor_publishes_themselves_leaves_the_review_tabs(app, people):
    contributor, editor = people["contributor"], people["editor"]
    post_id = write(contributor)
    post_form(contributor, f"/admin/posts/{post_id}/submit", {"version": 1})
    post_form(editor, f"/admin/posts/{post_id}/return", {"version": 2, "note": "Shorter."})
    assert "Changes requested <span class=\"count\">1</span>" in text(editor.get("/admin/posts/"))
    assert post_form(editor, f"/admin/posts/{post_id}/publish").status_code == 303
    listed = text(editor.get("/admin/posts/"))
    assert "Changes requested <span class=\"count\">0</span>" in listed
    assert "Shorter." not in text(contributor.get(f"/admin/posts/{post_id}"))


def test_review_works_on_sqlite_too(sqlite_app):
    auth = AuthActions(sqlite_app.test_client())
    contributor, editor = auth.client("contributor"), auth.client("editor")
    post_id = write(contributor)
    assert post_form(contributor, f"/admin/posts/{post_id}/submit", {"version": 1}
                     ).status_code == 303
    assert post_form(editor, f"/admin/posts/{post_id}/approve", {
        "version": 2, "now": "1", "zone": "UTC"}).status_code == 303
    assert state(sqlite_app, post_id) == ("published", "approved", 3)
    admin = auth.client("admin")
    assert post_form(admin, "/admin/site/review", {"require_review": "1"}).status_code == 303
    assert post_form(editor, f"/admin/posts/{new_post(sqlite_app, 'Tide')}/publish"
                     ).status_code == 403


def test_a_release_takes_no_post_live_round_the_review(app, people):
    """A release is one more way live: a post waiting for review cannot ride one, and with
    "Require review" on an editor's release publishes nothing of theirs unapproved."""
    contributor, editor, admin = people["contributor"], people["editor"], people["admin"]
    post_id = write(contributor)
    post_form(contributor, f"/admin/posts/{post_id}/submit", {"version": 1})
    made = post_form(editor, "/admin/releases/", {"name": "Launch", "zone": "UTC",
                                                   "release_at": LATER})
    assert made.status_code == 303
    url = made.headers["Location"]
    refused = post_form(editor, f"{url}/items", {"kind": "publish", "post_id": post_id,
                                                 "version": 1})
    assert refused.status_code == 422 and "waiting for review" in text(refused)
    assert post_form(admin, "/admin/site/review", {"require_review": "1"}).status_code == 303
    draft = new_post(app, "Tide tables")
    refused = post_form(editor, f"{url}/items", {"kind": "publish", "post_id": draft,
                                                 "version": 1})
    assert refused.status_code == 422 and "Require review" in text(refused)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(ReleaseItem)) == 0
