"""Releases through the JSON API: the forms' one way in, refusals naming the field, all or
nothing, and a release that went is read-only with what it did."""

from datetime import UTC, datetime, timedelta

from tests.harness.support import new_post
from webapp.scheduling import publish

AT = "2031-06-01T11:00:00+02:00"


def test_a_release_is_made_listed_shown_edited_and_goes_with_what_it_did(app, api):
    drafts = [new_post(app, f"Draft {n}") for n in range(3)]
    live = new_post(app, "Prices", status="published", body="40 euros",
                    published_at=datetime.now(UTC) - timedelta(days=1))
    made = api("POST", "/api/releases", body={"name": "Launch", "release_at": AT, "items": [
        {"kind": "publish", "post_id": drafts[0]},
        {"kind": "change", "post_id": live, "title": "Prices", "body": "30 euros"}]})
    assert made.status_code == 201, made.get_json()
    release = made.get_json()
    assert release["release_at"] == "2031-06-01T09:00:00Z" and len(release["items"]) == 2
    assert made.headers["Location"].endswith(f"/api/releases/{release['id']}")
    listed = api("GET", "/api/releases", role="viewer").get_json()
    assert [r["name"] for r in listed["releases"]] == ["Launch"]
    edited = api("PATCH", f"/api/releases/{release['id']}", body={
        "version": release["version"], "items": [{"kind": "publish", "post_id": i}
                                                 for i in drafts]})
    assert edited.status_code == 200 and len(edited.get_json()["items"]) == 3
    stale = api("PATCH", f"/api/releases/{release['id']}", body={
        "version": release["version"], "name": "Again"})
    assert stale.status_code == 409
    with app.app_context():
        publish.tick(datetime(2031, 6, 1, 9, 0, tzinfo=UTC))
    gone = api("GET", f"/api/releases/{release['id']}", role="viewer").get_json()
    assert gone["status"] == "published" and sorted(gone["result"]["published"]) == drafts
    assert api("POST", f"/api/releases/{release['id']}/cancel").status_code == 409
    assert api("PATCH", f"/api/releases/{release['id']}", body={"name": "X"}).status_code == 409


def test_refusals_name_the_field_and_write_nothing(app, api):
    draft = new_post(app, "Draft")
    for body, field in (
            ({"name": "L"}, "release_at"),
            ({"name": "", "release_at": AT}, "name"),
            ({"name": "L", "release_at": "2020-01-01T00:00:00Z"}, "release_at"),
            ({"name": "L", "release_at": AT, "items": [{"kind": "dance"}]}, "items"),
            ({"name": "L", "release_at": AT, "items": [{"kind": "publish", "post_id": "1"}]},
             "items"),
            ({"name": "L", "release_at": AT, "items": [
                {"kind": "publish", "post_id": draft}, {"kind": "unpublish", "post_id": draft}]},
             "items"),
            ({"name": "L", "release_at": AT, "colour": "red"}, "colour")):
        refused = api("POST", "/api/releases", body=body)
        assert refused.status_code == 422, (body, refused.get_json())
        assert refused.get_json()["field"] == field
    assert api("GET", "/api/releases", role="viewer").get_json()["releases"] == []
    assert api("GET", "/api/releases/99999", role="viewer").status_code == 404
    assert api("POST", "/api/releases", role="viewer",
               body={"name": "L", "release_at": AT}).status_code == 403


def test_a_cancelled_release_never_goes(app, api):
    draft = new_post(app, "Draft")
    made = api("POST", "/api/releases", body={"name": "L", "release_at": AT, "items": [
        {"kind": "publish", "post_id": draft}]}).get_json()
    cancelled = api("POST", f"/api/releases/{made['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.get_json()["status"] == "cancelled"
    with app.app_context():
        publish.tick(datetime(2031, 6, 2, tzinfo=UTC))
    assert api("GET", f"/api/posts/{draft}", role="viewer").get_json()["status"] == "draft"


def test_a_null_version_is_refused_not_taken_for_none(app, api):
    made = api("POST", "/api/releases", body={"name": "L", "release_at": AT}).get_json()
    for method, path in (("POST", f"/api/releases/{made['id']}/cancel"),
                         ("PATCH", f"/api/releases/{made['id']}")):
        refused = api(method, path, body={"version": None})
        assert refused.status_code == 422 and refused.get_json()["field"] == "version"
    assert api("GET", f"/api/releases/{made['id']}", role="viewer").get_json()[
        "status"] == "scheduled"
