"""The API for a post's history and its scheduled change: what the pages do, by token.

A script lists a post's versions, reads one, restores it (a new version, refused when the
post moved on); it schedules new text for a live post, edits it, cancels it; and the
publish leader swaps the change in at its time as it does one made on the page.
"""

from datetime import UTC, datetime, timedelta

from tests.test_api import error_of, make_post

LATER = "2031-06-01T08:00:00+02:00"  # 06:00 UTC


def versions(api, post_id: int) -> list[dict]:
    return api("GET", f"/api/posts/{post_id}/revisions", role="viewer").get_json()["revisions"]


def test_list_show_and_restore_a_version_as_the_history_page_does(api):
    post = make_post(api, title="First title", body="First body.")
    api("PATCH", f"/api/posts/{post['id']}", body={"title": "Second", "body": "Second body."})
    listed = versions(api, post["id"])
    assert [(v["title"], v["reason"], v["current"]) for v in listed] == [
        ("Second", "edit", True), ("First title", "create", False)]
    assert "body" not in listed[0] and listed[0]["author"] == "editor@example.com"
    first = listed[1]["id"]
    shown = api("GET", f"/api/posts/{post['id']}/revisions/{first}", role="viewer").get_json()
    assert shown["body"] == "First body." and shown["current"] is False
    stale = api("POST", f"/api/posts/{post['id']}/revisions/{first}/restore",
                body={"version": post["version"]})
    error_of(stale, 409)  # decided on version 1; the post is at 2: nothing written
    restored = api("POST", f"/api/posts/{post['id']}/revisions/{first}/restore",
                   body={"version": post["version"] + 1})
    assert restored.status_code == 200, restored.get_json()
    assert restored.get_json()["title"] == "First title"
    assert restored.get_json()["slug"] == post["slug"]  # the slug stays
    top = versions(api, post["id"])[0]
    assert (top["reason"], top["restored_from"], top["current"]) == ("restore", first, True)
    again = api("POST", f"/api/posts/{post['id']}/revisions/{first}/restore")
    assert "already has this text" in error_of(again, 409)["detail"]


def test_unknown_versions_and_bad_cursors_are_named_and_a_viewer_cannot_restore(api):
    post = make_post(api)
    error_of(api("GET", f"/api/posts/{post['id']}/revisions/999999", role="viewer"), 404)
    error_of(api("GET", "/api/posts/999999/revisions", role="viewer"), 404)
    error_of(api("GET", f"/api/posts/{post['id']}/revisions?before=x", role="viewer"), 422,
             "before")
    first = versions(api, post["id"])[0]["id"]
    error_of(api("POST", f"/api/posts/{post['id']}/revisions/{first}/restore",
                 role="viewer"), 403)
    error_of(api("POST", f"/api/posts/{post['id']}/revisions/{first}/restore",
                 body={"version": "2"}), 422, "version")


def live_post(api) -> dict:
    post = make_post(api, title="Harbour hours", body="Open 9 to 5.")
    published = api("POST", f"/api/posts/{post['id']}/publish")
    assert published.status_code == 200, published.get_json()
    return published.get_json()


def test_schedule_edit_and_cancel_a_change_to_a_live_post(api):
    post = live_post(api)
    path = f"/api/posts/{post['id']}/change"
    assert api("GET", path, role="viewer").get_json() is None
    made = api("POST", path, body={"body": "Open 8 to 8.", "apply_at": LATER})
    assert made.status_code == 201, made.get_json()
    change = made.get_json()
    assert made.headers["Location"].endswith(path)
    assert (change["title"], change["body"], change["apply_at"]) == (
        "Harbour hours", "Open 8 to 8.", "2031-06-01T06:00:00Z")
    assert change["outdated"] is False and change["base_version"] == post["version"]
    error_of(api("POST", path, body={"body": "Twice", "apply_at": LATER}), 409)
    edited = api("PATCH", path, body={"apply_at": "2031-06-02T08:00:00Z"}).get_json()
    assert edited["id"] == change["id"] and edited["body"] == "Open 8 to 8."
    assert edited["apply_at"] == "2031-06-02T08:00:00Z"
    assert api("GET", path, role="viewer").get_json() == edited
    cancelled = api("DELETE", path)
    assert cancelled.status_code == 200 and cancelled.get_json()["body"] == "Open 9 to 5."
    assert api("GET", path, role="viewer").get_json() is None
    error_of(api("DELETE", path), 409)


def test_a_change_made_by_the_api_goes_live_at_its_time_through_the_leader(api, app):
    post = live_post(api)
    soon = datetime.now(UTC) + timedelta(hours=1)
    made = api("POST", f"/api/posts/{post['id']}/change",
               body={"title": "Harbour hours (summer)", "apply_at": soon.isoformat()})
    assert made.status_code == 201, made.get_json()
    with app.app_context():
        from webapp import posts
        assert [p for p, _ in posts.apply_due_changes(soon + timedelta(seconds=1), 10)] == [
            post["id"]]
    now = api("GET", f"/api/posts/{post['id']}", role="viewer").get_json()
    assert now["title"] == "Harbour hours (summer)" and now["body"] == "Open 9 to 5."
    assert versions(api, post["id"])[0]["reason"] == "change"


def test_a_change_that_cannot_be_scheduled_names_the_field_and_writes_nothing(api):
    post = live_post(api)
    path = f"/api/posts/{post['id']}/change"
    error_of(api("POST", path, body={"body": "New"}), 422, "apply_at")
    error_of(api("POST", path, body={"body": "New", "apply_at": "2020-01-01T00:00:00Z"}),
             422, "apply_at")
    error_of(api("POST", path, body={"title": "  ", "apply_at": LATER}), 422, "title")
    error_of(api("POST", path, body={"apply_at": LATER}), 422, "body")  # the live text
    error_of(api("POST", path, body={"colour": "red"}), 422, "colour")
    error_of(api("PATCH", path, body={"body": "x"}), 409)  # no change to edit
    assert api("GET", path, role="viewer").get_json() is None  # nothing was written
    draft = make_post(api, title="Draft")
    error_of(api("POST", f"/api/posts/{draft['id']}/change",
                 body={"body": "x", "apply_at": LATER}), 409)
