"""A refused API request writes nothing and names the field it refuses."""

from datetime import UTC, datetime, timedelta

import pytest

from tests.harness.support import Api, new_post
from webapp import posts


def later(**delta) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat()


def refusal(response, status: int, field: str) -> dict:
    body = response.get_json()
    assert response.status_code == status, body
    assert body["field"] == field and field in body["fields"], body
    return body


@pytest.mark.parametrize("status", ["draft", "unpublished"])
def test_an_unpublish_time_without_a_publish_time_changes_nothing(api: Api, app, status):
    post_id = new_post(app, "Keep me", status=status)
    path = f"/api/posts/{post_id}"
    before = api("GET", path).get_json()
    response = api("PATCH", path, body={"title": "Changed", "unpublish_at": "2031-01-01T00:00:00Z"})
    body = refusal(response, 422, "unpublish_at")
    assert "publish" in body["detail"]
    assert api("GET", path).get_json() == before


def test_an_unpublish_time_before_the_kept_publish_time_changes_nothing(api: Api):
    post = api("POST", "/api/posts", body={"title": "Soon", "publish_at": later(days=30)})
    post = post.get_json()
    path = f"/api/posts/{post['id']}"
    response = api("PATCH", path, body={"title": "Changed", "unpublish_at": later(days=1)})
    refusal(response, 422, "unpublish_at")
    assert api("GET", path).get_json() == post


def test_a_cleared_publish_time_with_an_unpublish_time_is_refused(api: Api):
    post = api("POST", "/api/posts", body={"title": "Soon", "publish_at": later(days=1)}).get_json()
    path = f"/api/posts/{post['id']}"
    response = api("PATCH", path, body={"publish_at": None, "unpublish_at": later(days=2)})
    refusal(response, 422, "unpublish_at")
    assert api("GET", path).get_json() == post


def test_clearing_the_unpublish_time_of_an_unpublished_post_does_not_schedule_it(api: Api, app):
    post_id = new_post(app, "Down", status="unpublished")
    response = api("PATCH", f"/api/posts/{post_id}", body={"unpublish_at": None})
    assert response.status_code == 200
    assert response.get_json()["status"] == "unpublished"


def test_a_change_refused_under_the_row_lock_writes_no_text(app):
    post_id = new_post(app, "Before", status="draft")
    with app.app_context():
        with pytest.raises(posts.PostError) as refused:
            posts.change_post(post_id, 1, posts.TypedText("After", "", "", 1),
                              {"unpublish_at": datetime.now(UTC) + timedelta(days=1)})
        assert set(refused.value.errors) == {"unpublish_at"}
        posts.publish_now(post_id)  # the publish leader, between an editor's read and write
        with pytest.raises(posts.StalePost):
            posts.change_post(post_id, 1, posts.TypedText("After", "", "", 1), {})
        post = posts.get_post(post_id)
        assert (post.title, post.status, post.version) == ("Before", "published", 2)


def test_text_and_schedule_sent_together_are_one_change(api: Api):
    post = api("POST", "/api/posts", body={"title": "Both"}).get_json()
    changed = api("PATCH", f"/api/posts/{post['id']}",
                  body={"title": "Both, later", "publish_at": later(days=2)}).get_json()
    assert (changed["title"], changed["status"]) == ("Both, later", "scheduled")
    assert changed["version"] == post["version"] + 1


def test_invalid_utf8_in_a_json_body_is_refused_not_stored(api: Api, app):
    raw = b'{"title": "caf\xe9 \xff"}'
    response = api.client.post("/api/posts", data=raw, content_type="application/json",
                               headers={"Authorization": f"Bearer {api.tokens['editor']}"})
    refusal(response, 400, "request_body")
    assert "UTF-8" in response.get_json()["detail"]
    assert api("GET", "/api/posts", role="viewer").get_json()["posts"] == []


def test_invalid_utf8_in_a_patch_changes_nothing(api: Api, app):
    post_id = new_post(app, "Plain")
    path = f"/api/posts/{post_id}"
    before = api("GET", path).get_json()
    response = api.client.patch(path, data=b'{"body": "\xc3\x28"}', content_type="application/json",
                                headers={"Authorization": f"Bearer {api.tokens['editor']}"})
    refusal(response, 400, "request_body")
    assert api("GET", path).get_json() == before


@pytest.mark.parametrize("raw", ["[1, 2]", "not json", ""])
def test_a_body_that_is_not_a_json_object_names_the_request_body(api: Api, raw):
    refusal(api("POST", "/api/posts", raw=raw), 400, "request_body")


@pytest.mark.parametrize("field", ["body", "slug"])
def test_null_for_a_text_field_is_refused_naming_it(api: Api, app, field):
    refusal(api("POST", "/api/posts", body={"title": "x", field: None}), 422, field)
    post_id = new_post(app, "Has text")
    refusal(api("PATCH", f"/api/posts/{post_id}", body={field: None}), 422, field)


def test_an_empty_status_filter_is_refused(api: Api):
    refusal(api("GET", "/api/posts?status=", role="viewer"), 422, "status")


def test_a_method_the_api_does_not_allow_says_which_it_does(api: Api):
    response = api("DELETE", "/api/posts")
    assert response.status_code == 405
    assert set(response.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


@pytest.mark.parametrize("method", ["PATCH", "POST"])
def test_an_id_too_large_for_any_route_is_404_not_405(api: Api, method):
    path = "/api/posts/99999999999999999999" + ("/publish" if method == "POST" else "")
    response = api(method, path, body={"title": "x"})
    assert response.status_code == 404, response.get_json()
    assert api("GET", "/api/posts/99999999999999999999").status_code == 404
