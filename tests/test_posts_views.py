"""The editors' post pages: write, preview, schedule in a time zone, publish, unpublish.

Bad input gets a message next to its field, keeps what was typed and changes nothing.
"""

import re
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.support import AuthActions, add_user, field_error, new_post, post_form, text
from webapp.db import WAKE_CHANNEL
from webapp.extensions import db
from webapp.models import OutboxEvent, Post, User, WebhookEndpoint
from webapp.posts import MAX_BODY_BYTES
from webapp.scheduling import publish
from webapp.timefmt import human


def load(app, post_id: int) -> Post:
    """Return a post as stored now (detached, all columns loaded)."""
    with app.app_context():
        post = db.session.get(Post, post_id)
        db.session.expunge(post)
        return post


def count_posts(app) -> int:
    with app.app_context():
        return db.session.scalar(sa.select(sa.func.count()).select_from(Post))


def outbox(app) -> list[tuple[str, int]]:
    with app.app_context():
        return [tuple(r) for r in db.session.execute(
            sa.select(OutboxEvent.topic, OutboxEvent.post_id).order_by(OutboxEvent.id))]


def set_zone(app, email: str, zone: str) -> None:
    with app.app_context():
        db.session.execute(sa.update(User).where(User.email == email).values(timezone=zone))
        db.session.commit()


def local_input(moment: datetime, zone: str) -> str:
    """Return what a datetime-local picker in zone sends for moment."""
    from zoneinfo import ZoneInfo

    return moment.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M:%S")


# Writing ---------------------------------------------------------------------------------


def test_an_editor_writes_a_draft_and_lands_on_its_page(app, editor):
    response = post_form(editor, "/admin/posts/new", {"title": "Première fois", "slug": "",
                                                      "body": "# Hi\n\nThere."})
    assert response.status_code == 303
    post = load(app, 1)
    assert (post.title, post.slug, post.status, post.version) == (
        "Première fois", "premiere-fois", "draft", 1)
    page = text(editor.get(response.location))
    assert "Draft “Première fois” saved." in page and "<h1>Hi</h1>" in page  # preview


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"title": "   "}, "title", "Give the post a title."),
    ({"title": "x" * 201}, "title", "under 200 characters"),
    ({"slug": "Not A Slug!"}, "slug", "lower-case letters"),
    ({"title": "日本語"}, "slug", "Type a slug"),
    ({"body": "é" * (MAX_BODY_BYTES // 2 + 1)}, "body", "the limit is 200 kB"),
])
def test_bad_fields_are_refused_next_to_the_field_and_nothing_is_saved(app, editor, fields,
                                                                        field, message):
    typed = {"title": "A title", "slug": "", "body": "Kept *body*", **fields}
    response = post_form(editor, "/admin/posts/new", typed)
    assert response.status_code == 422
    page = text(response)
    assert f'id="e-{field}"' in page and message in page
    if len(typed["body"]) < 1000:
        assert "Kept *body*" in page
    assert count_posts(app) == 0


def test_a_new_post_with_a_past_time_is_offered_only_what_its_form_has(app, editor):
    typed = local_input(datetime.now(UTC) - timedelta(hours=2), "Europe/Paris")
    response = post_form(editor, "/admin/posts/new", {
        "title": "Late", "slug": "", "body": "Kept", "publish_at": typed, "zone": "Europe/Paris"})
    assert response.status_code == 422
    page = text(response)
    assert ("That time has already passed. Pick a later time, or leave it empty to save a "
            "draft." in page)
    assert "publish now" not in page.lower() and "/publish" not in page  # New post has none
    assert f'value="{typed}"' in page and "Kept" in page and count_posts(app) == 0
    drafted = post_form(editor, "/admin/posts/new", {  # the offered choice
        "title": "Late", "slug": "", "body": "Kept", "publish_at": "", "zone": "Europe/Paris"})
    assert drafted.status_code == 303 and count_posts(app) == 1


def test_a_new_post_form_sent_again_opens_the_post_it_made_keeping_text_typed_since(
        app, editor):
    form = {"title": "Once", "slug": "", "body": "First words.", "once": "tok-1"}
    made = post_form(editor, "/admin/posts/new", form)
    again = post_form(editor, "/admin/posts/new", form)
    assert again.status_code == 303 and again.headers["Location"] == made.headers["Location"]
    assert "“Once” was saved already" in text(editor.get(again.headers["Location"]))
    changed = post_form(editor, "/admin/posts/new", {**form, "body": "Words typed after Back."})
    page = text(changed)
    assert changed.status_code == 409 and "You saved this post already" in page
    assert "Words typed after Back." in page and count_posts(app) == 1
    assert post_form(editor, "/admin/posts/new", {**form, "once": "tok-2"}).status_code == 422


def test_a_duplicate_slug_is_refused_linking_the_post_that_has_it_and_keeps_the_text(
        app, editor):
    first = new_post(app, "Hello <b>", slug="hello")
    response = post_form(editor, "/admin/posts/new", {"title": "Hello <b>", "slug": "hello",
                                                      "body": "my second take"})
    assert response.status_code == 422
    assert (f"“Hello &lt;b&gt;” uses this slug already — <a href=\"/admin/posts/{first}\">"
            "open it</a>, or pick another.") in text(response)
    assert "my second take" in text(response) and count_posts(app) == 1


def test_a_request_far_over_the_limit_gets_a_friendly_413_not_a_500(app, editor):
    response = post_form(editor, "/admin/posts/new", {"title": "Big", "body": "x" * 3_000_000})
    assert response.status_code == 413 and "too large" in text(response)


def test_editing_saves_the_text_and_moves_the_version_on(app, editor):
    post_id = new_post(app)
    page = text(editor.get(f"/admin/posts/{post_id}"))
    digest = page.split('name="digest" value="')[1].split('"')[0]
    response = post_form(editor, f"/admin/posts/{post_id}", {
        "title": "Hello again", "slug": "hello", "body": "new", "version": "1", "digest": digest})
    assert response.status_code == 303
    post = load(app, post_id)
    assert (post.title, post.body, post.version) == ("Hello again", "new", 2)


def edit_form(client, post_id: int) -> dict:
    """Return the hidden fields of the post's edit form as the page has them now."""
    page = text(client.get(f"/admin/posts/{post_id}"))
    return {name: page.split(f'name="{name}" value="')[1].split('"')[0]
            for name in ("version", "digest")}


def test_a_stale_form_is_refused_with_a_message_and_the_typed_text_kept(app, auth, editor):
    post_id = new_post(app, body="original")
    other = auth.client("editor", email="other@example.com")
    mine, theirs = edit_form(editor, post_id), edit_form(other, post_id)
    saved = post_form(other, f"/admin/posts/{post_id}", {
        "title": "Hello", "slug": "hello", "body": "their change", **theirs})
    assert saved.status_code == 303
    refused = post_form(editor, f"/admin/posts/{post_id}", {
        "title": "Hello", "slug": "hello", "body": "my change", **mine})
    assert refused.status_code == 409
    assert "other@example.com changed this post" in text(refused) and "my change" in text(refused)
    assert load(app, post_id).body == "their change"
    forced = text(refused).split('name="force_version" value="')[1].split('"')[0]
    replaced = post_form(editor, f"/admin/posts/{post_id}", {
        "title": "Hello", "slug": "hello", "body": "my change", **mine, "force_version": forced})
    assert replaced.status_code == 303 and load(app, post_id).body == "my change"


def test_a_form_opened_before_the_leader_published_the_post_still_saves(app, editor):
    post_id = new_post(app, "Hello", status="scheduled",
                       publish_at=datetime.now(UTC) - timedelta(seconds=1))
    opened = edit_form(editor, post_id)
    with app.app_context():
        publish.tick(datetime.now(UTC))
    assert load(app, post_id).status == "published" and load(app, post_id).version == 2
    saved = post_form(editor, f"/admin/posts/{post_id}", {
        "title": "Hello", "slug": "hello", "body": "typo fixed", **opened})
    assert saved.status_code == 303 and load(app, post_id).body == "typo fixed"


def test_the_preview_renders_markdown_and_leaves_script_inert(app, editor):
    response = post_form(editor, "/admin/posts/preview", {
        "body": "**bold** <script>alert(1)</script> [x](javascript:alert(1)) "
                "<img src=x onerror=alert(1)>"})
    html = text(response)
    assert response.status_code == 200 and "<strong>bold</strong>" in html
    assert "<script>" not in html and "<img" not in html and 'href="javascript' not in html


# Scheduling -------------------------------------------------------------------------------


def schedule(client, post_id: int, publish_at: str, zone: str, unpublish_at: str = "",
             version: int = 1):
    return post_form(client, f"/admin/posts/{post_id}/schedule", {
        "publish_at": publish_at, "unpublish_at": unpublish_at, "zone": zone,
        "version": str(version)})


def test_a_time_typed_in_tokyo_is_stored_in_utc_and_shown_back_in_tokyo(app, editor):
    set_zone(app, "editor@example.com", "Asia/Tokyo")
    post_id = new_post(app)
    when = (datetime.now(UTC) + timedelta(hours=2)).replace(second=30, microsecond=0)
    response = schedule(editor, post_id, local_input(when, "Asia/Tokyo"), "Asia/Tokyo")
    assert response.status_code == 303
    post = load(app, post_id)
    assert (post.status, post.publish_at, post.version) == ("scheduled", when, 2)
    page = text(editor.get(response.location))
    assert human(when, "Asia/Tokyo") in page  # "Wed 2 Dec, 03:02:30 Tokyo time"
    assert "Tokyo time" in human(when, "Asia/Tokyo")
    assert "in 1 h 59 min" in page or "in 2 h" in page


def test_scheduling_wakes_the_publish_leader_when_it_commits(app, editor, pg_url):
    post_id = new_post(app)
    with psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {WAKE_CHANNEL}")
        at = local_input(datetime.now(UTC) + timedelta(minutes=5), "UTC")
        assert schedule(editor, post_id, at, "UTC").status_code == 303
        notified = wait_for(lambda: list(listener.notifies(timeout=0.2, stop_after=1)), 10,
                            "a NOTIFY on the wake channel")
    assert notified[0].payload == "publish"


def test_a_time_in_the_past_is_refused_with_the_choice_to_publish_now(app, editor):
    post_id = new_post(app)
    typed = local_input(datetime.now(UTC) - timedelta(minutes=5), "Europe/Paris")
    response = schedule(editor, post_id, typed, "Europe/Paris")
    assert response.status_code == 422
    page = text(response)
    assert 'id="e-publish_at"' in page and "already passed" in page
    assert f'value="{typed}"' in page and 'value="Europe/Paris"' in page
    assert f'formaction="/admin/posts/{post_id}/publish"' in page
    assert load(app, post_id).status == "draft"
    published = post_form(editor, f"/admin/posts/{post_id}/publish")  # the offered choice
    assert published.status_code == 303 and load(app, post_id).status == "published"


@pytest.mark.parametrize(("publish_at", "zone", "field", "message"), [
    ("2030-01-01T10:00", "Mars/Olympus_Mons", "zone", "not a time zone I know"),
    ("next tuesday", "UTC", "publish_at", "is not a date and time"),
    ("2030-02-30T10:00", "UTC", "publish_at", "not a real date"),
    ("", "UTC", "publish_at", "Enter a date and time"),
    ("2030-03-31T02:30", "Europe/Paris", "publish_at", "does not exist in Europe/Paris"),
])
def test_bad_times_and_zones_are_refused_next_to_the_field_and_kept(app, editor, publish_at,
                                                                   zone, field, message):
    post_id = new_post(app)
    response = schedule(editor, post_id, publish_at, zone, unpublish_at="2030-12-01T00:00")
    assert response.status_code == 422
    page = text(response)
    assert f'id="e-{field}"' in page and message in page
    assert 'value="2030-12-01T00:00"' in page and f'value="{zone}"' in page
    post = load(app, post_id)
    assert (post.status, post.publish_at, post.version) == ("draft", None, 1)


def test_time_pickers_offer_minutes_and_a_time_with_seconds_is_still_taken(app, editor):
    """No seconds in the pickers (finding 8); a time to the second (as the API takes) is
    still read and shown back with its seconds."""
    post_id = new_post(app)
    pickers = [re.search(r'<input id="f-publish_at"[^>]*>', text(editor.get(path))).group(0)
               for path in ("/admin/posts/new", f"/admin/posts/{post_id}")]
    assert all("step=" not in picker for picker in pickers), pickers
    assert schedule(editor, post_id, "2030-01-01T10:00:30", "UTC").status_code == 303
    assert load(app, post_id).publish_at == datetime(2030, 1, 1, 10, 0, 30, tzinfo=UTC)
    assert 'value="2030-01-01T10:00:30"' in text(editor.get(f"/admin/posts/{post_id}"))


def test_an_unpublish_time_before_the_publish_time_is_refused(app, editor):
    post_id = new_post(app)
    response = schedule(editor, post_id, "2030-01-02T10:00", "UTC", "2030-01-01T10:00")
    assert response.status_code == 422 and 'id="e-unpublish_at"' in text(response)
    assert load(app, post_id).status == "draft"


def test_a_schedule_form_from_before_someone_elses_change_is_refused(app, editor):
    post_id = new_post(app)
    with app.app_context():
        db.session.execute(sa.update(Post).values(version=2, title="Changed"))
        db.session.commit()
    response = schedule(editor, post_id, "2030-01-01T10:00", "UTC", version=1)
    assert response.status_code == 409 and "Someone else changed this post" in text(response)
    assert load(app, post_id).status == "draft"


def test_unscheduling_takes_the_post_back_to_draft(app, editor):
    post_id = new_post(app, status="scheduled", publish_at=datetime(2030, 1, 1, tzinfo=UTC))
    assert post_form(editor, f"/admin/posts/{post_id}/unschedule").status_code == 303
    post = load(app, post_id)
    assert (post.status, post.publish_at) == ("draft", None)


def test_unscheduling_a_post_the_leader_already_published_says_so(app, editor):
    post_id = new_post(app, status="published", published_at=datetime.now(UTC))
    response = post_form(editor, f"/admin/posts/{post_id}/unschedule")
    page = text(editor.get(response.location))
    assert "This post is published now, so it cannot be unscheduled" in page
    assert load(app, post_id).status == "published"


def test_publish_now_and_unpublish_write_outbox_rows_with_the_change(app, editor):
    post_id = new_post(app, "Hello", status="scheduled",
                       publish_at=datetime(2030, 1, 1, tzinfo=UTC))
    anonymous = app.test_client()
    assert anonymous.get("/posts/hello").status_code == 404
    post_form(editor, f"/admin/posts/{post_id}/publish")
    assert load(app, post_id).status == "published"
    assert anonymous.get("/posts/hello").status_code == 200
    post_form(editor, f"/admin/posts/{post_id}/unpublish")
    assert load(app, post_id).status == "unpublished"
    assert anonymous.get("/posts/hello").status_code == 404
    assert outbox(app) == [("post.published", post_id), ("post.unpublished", post_id)]
    again = post_form(editor, f"/admin/posts/{post_id}/unpublish")
    assert "cannot be unpublished" in text(editor.get(again.location))
    assert len(outbox(app)) == 2


def test_an_unpublish_time_on_a_published_post_is_honoured_by_the_leader(app, editor):
    post_id = new_post(app, status="published", published_at=datetime.now(UTC))
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    response = post_form(editor, f"/admin/posts/{post_id}/unpublish-time", {
        "unpublish_at": local_input(at, "America/Los_Angeles"), "zone": "America/Los_Angeles",
        "version": "1"})
    assert response.status_code == 303 and load(app, post_id).unpublish_at == at
    with app.app_context():
        publish.tick(at + timedelta(seconds=1))
    assert load(app, post_id).status == "unpublished"


def test_the_panel_answers_204_until_the_post_changes(app, editor):
    post_id = new_post(app, status="scheduled", publish_at=datetime.now(UTC))
    assert editor.get(f"/admin/posts/{post_id}/panel?version=1").status_code == 204
    with app.app_context():
        publish.tick(datetime.now(UTC))
    changed = editor.get(f"/admin/posts/{post_id}/panel?version=1")
    assert changed.status_code == 200 and 'class="badge published"' in text(changed)


def test_the_schedule_hint_says_when_a_typed_time_is(app, editor):
    at = local_input(datetime.now(UTC) + timedelta(minutes=12, seconds=30), "Asia/Tokyo")
    hint = text(editor.get("/admin/posts/when", query_string={"publish_at": at,
                                                                "zone": "Asia/Tokyo"}))
    assert "UTC" in hint and "in 12 min" in hint
    bad = text(editor.get("/admin/posts/when", query_string={"publish_at": at, "zone": "Nope"}))
    assert "not a time zone I know" in bad


# The list ----------------------------------------------------------------------------------


def add_many(app, count: int, status: str = "draft", prefix: str = "post") -> None:
    with app.app_context():
        now = datetime.now(UTC)
        db.session.execute(sa.insert(Post), [
            {"title": f"{prefix} {i}", "slug": f"{prefix}-{i}", "body": "", "status": status,
             "version": 1, "created_at": now, "updated_at": now} for i in range(count)])
        db.session.commit()


def titles(page: str) -> list[str]:
    return [chunk.split("</a>")[0].split(">")[-1]
            for chunk in page.split('<tr id="post-')[1:]]


def test_the_list_filters_by_status_and_searches_titles(app, editor):
    add_many(app, 3, "draft", "apple")
    add_many(app, 2, "published", "banana")
    new_post(app, "100% sure_thing", slug="sure")
    page = text(editor.get("/admin/posts/?status=published"))
    assert titles(page) == ["banana 1", "banana 0"]
    assert "Published <span class=\"count\">2</span>" in page
    assert titles(text(editor.get("/admin/posts/?q=APPLE 2"))) == ["apple 2"]
    assert titles(text(editor.get("/admin/posts/?q=100%25"))) == ["100% sure_thing"]
    assert titles(text(editor.get("/admin/posts/?q=e_t"))) == ["100% sure_thing"]
    assert titles(text(editor.get("/admin/posts/?q=_"))) == ["100% sure_thing"]
    assert "No posts match" in text(editor.get("/admin/posts/?q=cherry"))
    assert titles(text(editor.get("/admin/posts/?status=bogus&before=x"))) != []
    for odd in ("before=99999999999999999999999", "after=-99999999999999999999999"):
        assert editor.get(f"/admin/posts/?{odd}").status_code == 200


def test_the_list_pages_through_newest_first_both_ways(app, editor):
    add_many(app, 60)
    first = text(editor.get("/admin/posts/"))
    assert titles(first)[0] == "post 59" and len(titles(first)) == 25
    older = first.split('href="/admin/posts/?before=')[1].split('"')[0]
    second = text(editor.get(f"/admin/posts/?before={older}"))
    assert titles(second)[0] == "post 34"
    last = text(editor.get("/admin/posts/?before=" + second.split("?before=")[1].split('"')[0]))
    assert titles(last) == [f"post {i}" for i in range(9, -1, -1)] and "Older" not in last
    newer = last.split('href="/admin/posts/?after=')[1].split('"')[0]
    assert titles(text(editor.get(f"/admin/posts/?after={newer}")))[0] == "post 34"


def test_the_list_polls_only_while_a_post_on_it_is_scheduled(app, editor):
    post_id = new_post(app, status="scheduled", publish_at=datetime.now(UTC))
    assert 'hx-trigger="every 3s"' in text(editor.get("/admin/posts/"))
    with app.app_context():
        publish.tick(datetime.now(UTC))
    rows = text(editor.get("/admin/posts/rows"))
    assert f'<tr id="post-{post_id}">' in rows and 'badge published' in rows
    assert "hx-trigger" not in rows


# XSS ------------------------------------------------------------------------------------------

XSS_TITLE = '<script>alert("t")</script><img src=x onerror=alert(1)>'


def test_a_hostile_title_and_body_are_inert_on_every_page(app, auth, editor):
    post_id = new_post(app, XSS_TITLE, slug="xss", status="published",
                       published_at=datetime.now(UTC),
                       body='<script>alert("b")</script>[x](javascript:alert(1)) "><svg onload=x>')
    viewer = auth.client("viewer")
    pages = [editor.get("/admin/posts/"), editor.get(f"/admin/posts/{post_id}"),
             viewer.get("/admin/"), app.test_client().get("/"),
             app.test_client().get("/posts/xss"), app.test_client().get("/feed.xml")]
    for response in pages:
        html = text(response)
        assert response.status_code == 200
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "<svg" not in html and 'href="javascript' not in html
    assert "&lt;script&gt;alert(&#34;t&#34;)&lt;/script&gt;" in text(pages[0])


def test_the_flash_after_saving_escapes_the_title(app, editor):
    response = post_form(editor, "/admin/posts/new", {"title": XSS_TITLE, "slug": "t"})
    assert "<script>" not in text(editor.get(response.location))


def test_another_editor_sees_the_post(app, auth, editor):
    add_user(app, "second@example.com")
    post_form(editor, "/admin/posts/new", {"title": "Shared"})
    second = auth.client(email="second@example.com")
    assert "Shared" in text(second.get("/admin/posts/"))


def test_a_later_page_with_a_scheduled_post_polls_that_same_page(app, editor):
    new_post(app, "Soon", status="scheduled", publish_at=datetime.now(UTC) + timedelta(hours=1))
    add_many(app, 30)
    page = text(editor.get("/admin/posts/?before=7"))
    assert 'hx-get="/admin/posts/rows?before=7"' in page and "Soon" in page


def test_status_counts_stop_at_the_cap_and_the_tabs_say_so(app, editor):
    from webapp.posts import status_counts
    from webapp.views.posts import _tab_counts

    add_many(app, 5)
    new_post(app, "One", status="published", published_at=datetime.now(UTC))
    with app.app_context():
        counts = status_counts(cap=3)
    assert counts == {"draft": 4, "scheduled": 0, "published": 1, "unpublished": 0}
    labels = _tab_counts(counts, cap=3)
    assert (labels["draft"], labels["published"], labels[""]) == ("3+", "1", "4+")
    assert 'Draft <span class="count">5</span>' in text(editor.get("/admin/posts/"))


def test_writing_scheduling_publishing_and_listing_work_on_sqlite_too(sqlite_app):
    client = sqlite_app.test_client()
    AuthActions(client).login("editor")
    created = post_form(client, "/admin/posts/new", {"title": "On SQLite", "body": "*hi*"})
    assert created.status_code == 303
    at = local_input(datetime.now(UTC) + timedelta(hours=1), "Asia/Tokyo")
    assert schedule(client, 1, at, "Asia/Tokyo").status_code == 303
    assert 'badge scheduled' in text(client.get("/admin/posts/?q=sqlite&status=scheduled"))
    assert "On SQLite" in text(client.get("/admin/"))
    assert post_form(client, "/admin/posts/1/publish").status_code == 303
    assert "<em>hi</em>" in text(sqlite_app.test_client().get("/posts/on-sqlite"))
    assert outbox(sqlite_app) == [("post.published", 1)]
    assert 'Published <span class="count">1</span>' in text(client.get("/admin/posts/"))


# The dashboard ----------------------------------------------------------------------------


def section(page: str, element_id: str) -> str:
    """Return the HTML from the element with element_id to the next section."""
    return page.split(f'id="{element_id}"')[1].split("<section")[0]


def test_the_dashboard_shows_what_is_next_recent_and_late_posts(app, auth):
    now = datetime.now(UTC)
    new_post(app, "In an hour", status="scheduled", publish_at=now + timedelta(hours=1))
    new_post(app, "Next week", status="scheduled", publish_at=now + timedelta(days=6))
    new_post(app, "Overdue", status="scheduled", publish_at=now - timedelta(minutes=5))
    new_post(app, "Out already", status="published", published_at=now - timedelta(hours=3))
    viewer = auth.client("viewer")
    page = text(viewer.get("/admin/"))
    upcoming, recent, late = (section(page, i) for i in ("upcoming", "recent", "late"))
    # next up is next up, however far: a week ahead is not "nothing scheduled"
    assert upcoming.index("In an hour") < upcoming.index("Next week")
    assert "Overdue" in late and "Overdue" not in upcoming and "5 min ago" in late
    assert "Out already" in recent and "3 h ago" in recent
    assert "/admin/posts/" not in page  # a viewer gets titles, not edit links
    assert "/admin/posts/1" in text(auth.client("editor").get("/admin/"))


def set_leader(app, heartbeat_age: float | None) -> None:
    from webapp.leadership.keys import PUBLISH
    from webapp.models import LeaderState

    with app.app_context():
        beat = None if heartbeat_age is None else datetime.now(UTC) - timedelta(
            seconds=heartbeat_age)
        db.session.merge(LeaderState(key=PUBLISH.value, term=3, holder="soloist:web.1:42",
                                     holder_pid=42, heartbeat_at=beat, last_result=""))
        db.session.commit()


def test_the_dashboard_sums_up_the_publish_leader_and_links_to_the_status_page(app, auth):
    admin = auth.client("admin")
    summary = lambda: section(text(admin.get("/admin/live")), "leader-summary")  # noqa: E731
    assert "No publish leader has been elected yet" in summary()
    set_leader(app, 0.5)
    assert "Publish leader: <span class=\"mono\">soloist:web.1:42</span>, term 3" in summary()
    set_leader(app, 60)
    assert "has not checked in for 60 s" in summary()
    set_leader(app, None)
    assert "No publish leader right now" in summary()
    if "status.index" in app.view_functions:
        assert 'href="/status/"' in summary()


def test_editors_read_the_publish_leader_in_words_and_a_freeze_instead_of_late(app, auth):
    editor = auth.client("editor")
    summary = lambda: section(text(editor.get("/admin/live")), "leader-summary")  # noqa: E731
    set_leader(app, 0.5)
    assert "Publishing is running: scheduled posts go out on time." in summary()
    assert "soloist:web.1:42" not in summary() and "term" not in summary()
    set_leader(app, 60)
    assert "Publishing is not running right now" in summary()
    new_post(app, "Waiting", status="scheduled",
             publish_at=datetime.now(UTC) - timedelta(minutes=5))
    assert "Late: 1 post" in text(editor.get("/admin/"))
    assert post_form(auth.client("admin"), "/admin/freeze/", {
        "scope": "publishing", "reason": "legal review", "on_resume": "hold"}).status_code == 303
    page = text(editor.get("/admin/"))
    assert "Late:" not in page and "Held by the freeze: 1 post past its publish time" in page
    # the freeze said once, in sentences: not in the summary, the banner and the list again
    assert "leader-summary" not in editor.get("/admin/live").text
    assert page.count("legal review") == 1 and page.count("On resume") == 1
    words = " ".join(re.sub(r"<[^>]+>", "", page).split())
    assert "Publishing paused by admin" in words and "legal review. On resume, posts" in words


# Edges -----------------------------------------------------------------------------------


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


def test_an_oversized_body_is_reported_with_its_size_rounded_up(client, auth):
    auth.login("editor")
    response = post_form(client, "/admin/posts/new",
                         {"title": "Big", "slug": "", "body": "x" * 200_001})
    assert response.status_code == 422
    assert "The body is 201 kB; the limit is 200 kB" in field_error(text(response), "body")


def test_text_typed_beside_a_schedule_is_saved_with_it_or_refused_whole(app, editor):
    from webapp.posts import content_digest

    post_id = new_post(app, "Draft", body="old body")
    at = local_input(datetime.now(UTC) + timedelta(days=1), "UTC")
    typed = {"publish_at": at, "unpublish_at": "", "zone": "UTC", "version": "1",
             "title": "Draft, edited", "slug": "draft", "body": "new body",
             "text_version": "1", "digest": content_digest("Draft", "draft", "old body")}
    # a time that cannot be used saves nothing, the text included, and shows what was typed
    bad = post_form(editor, f"/admin/posts/{post_id}/schedule", {**typed, "publish_at": "soon"})
    assert bad.status_code == 422 and "new body" in text(bad)
    with app.app_context():
        assert db.session.get(Post, post_id).body == "old body"
    saved = post_form(editor, f"/admin/posts/{post_id}/schedule", typed)
    assert saved.status_code == 303
    with app.app_context():
        post = db.session.get(Post, post_id)
        assert (post.status, post.title, post.body) == ("scheduled", "Draft, edited", "new body")
    # someone else's newer text is refused as Save refuses it: nothing changes, text kept
    other = {**typed, "body": "a third body", "version": str(post.version)}
    with app.app_context():
        db.session.execute(sa.update(Post).where(Post.id == post_id).values(
            body="their body", version=Post.version + 1))
        db.session.commit()
    refused = post_form(editor, f"/admin/posts/{post_id}/unpublish-time", other)
    assert refused.status_code == 409 and "Someone else changed this post" in text(refused)
    assert "a third body" in text(refused)
    with app.app_context():
        assert db.session.get(Post, post_id).body == "their body"


def typed_beside(app, post_id: int, **form) -> dict:
    """Return a panel form as soloist.js sends it from the page as it is now: the panel's
    version, and the text typed over the post's text at that version."""
    from webapp.posts import content_digest

    post = load(app, post_id)
    return {"version": str(post.version), "text_version": str(post.version),
            "digest": content_digest(post.title, post.slug, post.body),
            "title": post.title, "slug": post.slug, **form}


def test_text_typed_beside_a_reschedule_does_not_go_live_when_the_leader_published_it(app,
                                                                                   editor):
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    post_id = new_post(app, "Launch", body="Reviewed body.", status="scheduled", publish_at=at)
    later = local_input(at + timedelta(hours=1), "UTC")
    form = typed_beside(app, post_id, body="Unreviewed body.", publish_at=later,
                        unpublish_at="", zone="UTC")
    with app.app_context():  # the post goes out while the editor is still typing
        publish.tick(at + timedelta(seconds=1))
    refused = post_form(editor, f"/admin/posts/{post_id}/schedule", form)
    assert refused.status_code == 409 and "Someone else changed this post" in text(refused)
    assert "Unreviewed body." in text(refused)  # kept in the form, to look at again
    readers = app.test_client().get("/posts/launch")
    assert "Reviewed body." in text(readers) and "Unreviewed" not in text(readers)
    assert outbox(app) == [("post.published", post_id)]  # no post.updated went out


def test_publishing_with_typed_text_during_a_freeze_saves_neither(app, editor):
    from webapp.ops import freezes

    post_id = new_post(app, "Draft", body="Old body.")
    with app.app_context():
        freezes.freeze("publishing", "incident", "hold", "ops@example.com")
    form = typed_beside(app, post_id, body="New body, typed beside Publish now.")
    refused = post_form(editor, f"/admin/posts/{post_id}/publish", form)
    assert refused.status_code == 409 and "New body, typed beside Publish now." in text(refused)
    post = load(app, post_id)
    assert (post.status, post.body, post.version) == ("draft", "Old body.", 1)


def test_a_new_post_can_be_scheduled_as_it_is_saved_wherever_it_is_started(app, editor):
    page = text(editor.get("/admin/posts/new"))
    assert 'id="f-publish_at"' in page and "leave it empty to save a draft" in page
    at = local_input(datetime.now(UTC) + timedelta(days=3), "UTC")
    created = post_form(editor, "/admin/posts/new", {"title": "Straight in", "body": "x",
                                                     "publish_at": at, "zone": "UTC"})
    assert created.status_code == 303
    with app.app_context():
        assert db.session.scalar(sa.select(Post.status).where(Post.title == "Straight in")) \
            == "scheduled"


def test_a_new_install_shows_its_admin_first_steps_until_they_are_done(app, auth):
    admin = auth.client("admin")
    steps = section(text(admin.get("/admin/")), "first-steps")
    for step in ("Name your site", "Invite an editor", "Add a webhook", "status page"):
        assert step in steps
    assert "first-steps" not in text(auth.client("editor").get("/admin/"))  # admins only
    assert post_form(admin, "/admin/site/", {"name": "The Daily", "description": ""}) \
        .status_code == 303
    with app.app_context():
        db.session.add(WebhookEndpoint(url="https://hooks.example.com/x", secret="s" * 32,
                                       events=["post.published"]))
        db.session.commit()
    # the editor signed in above is the invited someone: all done, the list goes
    assert 'id="first-steps"' not in text(admin.get("/admin/"))


def test_the_list_poll_brings_the_tab_counts_with_the_rows(app, editor):
    new_post(app, "Soon", status="scheduled", publish_at=datetime.now(UTC) + timedelta(hours=1))
    assert 'Scheduled <span class="count">1</span>' in text(editor.get("/admin/posts/"))
    with app.app_context():  # the publish leader publishes it elsewhere
        db.session.execute(sa.update(Post).values(status="published",
                                                  published_at=datetime.now(UTC)))
        db.session.commit()
    polled = text(editor.get("/admin/posts/rows"))
    tabs = polled.split('id="status-tabs"')[1].split("</nav>")[0]
    assert 'hx-swap-oob="true"' in tabs
    assert 'Scheduled <span class="count">0</span>' in tabs
    assert 'Published <span class="count">1</span>' in tabs


def test_a_time_the_clocks_skip_is_refused_once_with_a_button_for_one_that_works(app, editor):
    set_zone(app, "editor@example.com", "Europe/Paris")
    post_id = new_post(app, "Spring")
    year = datetime.now(UTC).year + 1
    last = datetime(year, 3, 31)
    sunday = last - timedelta(days=(last.weekday() + 1) % 7)  # the last Sunday of March
    refused = schedule(editor, post_id, f"{sunday:%Y-%m-%d}T02:30", "Europe/Paris")
    assert refused.status_code == 422
    panel = text(refused).split('id="panel"')[1]
    assert panel.count("does not exist in Europe/Paris") == 1
    assert f'data-value="{sunday:%Y-%m-%d}T03:30">Use 03:30 instead</button>' in panel
    # the hint is not loaded over the refusal (it said the same again)
    form = panel.split('id="schedule-form"')[1].split(">")[0]
    assert 'hx-trigger="input delay:400ms"' in form
