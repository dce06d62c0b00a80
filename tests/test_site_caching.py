"""Public pages a CDN can keep: validators, 304s without rendering, and changes seen at once."""

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from flask import template_rendered

from tests.harness.support import LONG_AGO, make_app, new_post, text
from webapp import posts
from webapp.extensions import db
from webapp.scheduling import publish

ATOM = "{http://www.w3.org/2005/Atom}"
PAGES = ["/", "/posts/hello", "/feed.xml"]


def validators(client, url: str) -> tuple[str, str | None]:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.headers["ETag"], response.headers.get("Last-Modified")


def renders(app, client, url: str, **headers) -> tuple[int, bytes, list[str]]:
    """GET url; return the status, the body and the templates rendered meanwhile."""
    seen = []

    def record(_sender, template, **_extra):
        seen.append(template.name)

    with template_rendered.connected_to(record, app):
        response = client.get(url, headers=headers)
    return response.status_code, response.data, seen


@pytest.mark.parametrize("url", PAGES)
def test_public_pages_send_validators_and_may_be_kept_by_a_cdn(app, hello, url):
    response = app.test_client().get(url)
    assert response.headers["ETag"].startswith('W/"')
    assert response.headers["Last-Modified"]
    assert response.headers["Cache-Control"] == "public, max-age=60, stale-while-revalidate=300"
    assert "Set-Cookie" not in response.headers


@pytest.mark.parametrize("url", PAGES)
@pytest.mark.parametrize("cookie", [None, "session"], ids=["before-flask", "in-the-view"])
def test_a_matching_conditional_request_is_a_304_with_no_body_and_nothing_rendered(
        app, hello, url, cookie):
    client = app.test_client()
    if cookie:  # a stale sign-in cookie: the request goes through Flask, signed out
        client.set_cookie(app.config["SESSION_COOKIE_NAME"], "ended-long-ago")
    etag, modified = validators(client, url)
    for headers in ({"If-None-Match": etag}, {"If-Modified-Since": modified},
                    {"If-None-Match": f'W/"other", {etag}'}):
        status, body, rendered = renders(app, client, url, **headers)
        assert (status, body, rendered) == (304, b"", []), headers
    # "*" matches any page that exists: the view finds out (it renders), then says 304
    assert renders(app, client, url, **{"If-None-Match": "*"})[:2] == (304, b"")
    status, _, rendered = renders(app, client, url, **{"If-None-Match": 'W/"other"'})
    # a reader's 200 is the page the worker kept (webapp.site.pagecache); a cookie renders
    assert status == 200 and bool(rendered) == bool(cookie)
    # If-None-Match decides when sent: a stale ETag is not rescued by the date
    status, _, _ = renders(app, client, url, **{"If-None-Match": 'W/"other"',
                                                "If-Modified-Since": modified})
    assert status == 200


@pytest.mark.parametrize("cookie", [None, "session"], ids=["before-flask", "in-the-view"])
def test_a_304_carries_the_etag_and_cache_control_that_refresh_a_kept_copy(app, hello, cookie):
    client = app.test_client()
    if cookie:
        client.set_cookie(app.config["SESSION_COOKIE_NAME"], "ended-long-ago")
    etag, _ = validators(client, "/posts/hello")
    response = client.get("/posts/hello", headers={"If-None-Match": etag})
    assert response.status_code == 304
    assert response.headers["ETag"] == etag and "Cookie" in response.headers["Vary"]
    assert response.headers["Cache-Control"] == "public, max-age=60, stale-while-revalidate=300"
    assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")


def test_publishing_unpublishing_and_editing_change_the_validators_at_once(app, hello, pg_url):
    other = make_app(pg_url)  # another instance: its own process state, the same database
    reader = other.test_client()
    index, page = validators(reader, "/")[0], validators(reader, "/posts/hello")[0]
    post_id = new_post(app, "Second", slug="second", status="scheduled",
                       publish_at=LONG_AGO + timedelta(days=1))
    assert validators(reader, "/")[0] == index  # a scheduled post changes nothing public
    with app.app_context():
        publish.tick(datetime.now(UTC))  # the publish leader
    assert reader.get("/", headers={"If-None-Match": index}).status_code == 200
    index = validators(reader, "/")[0]
    assert validators(reader, "/posts/hello")[0] == page  # another post's page still matches
    with app.app_context():
        post = posts.get_post(hello)
        posts.update_post(hello, post.version, None, "Hello again", "hello", post.body)
    assert reader.get("/posts/hello", headers={"If-None-Match": page}).status_code == 200
    assert reader.get("/", headers={"If-None-Match": index}).status_code == 200
    index, page = validators(reader, "/")[0], validators(reader, "/posts/hello")[0]
    with app.app_context():
        posts.unpublish_post(hello)
    assert reader.get("/posts/hello", headers={"If-None-Match": page}).status_code == 404
    assert reader.get("/", headers={"If-None-Match": index}).status_code == 200
    index = validators(reader, "/")[0]
    with app.app_context():
        posts.publish_now(hello)
    assert reader.get("/posts/hello", headers={"If-None-Match": page}).status_code == 200
    assert reader.get("/", headers={"If-None-Match": index}).status_code == 200
    assert "Hello again" in text(reader.get("/")) and "Second" in text(reader.get("/"))
    with app.app_context():
        draft = posts.get_post(post_id)
        assert draft.status == "published"
    with other.app_context():
        db.engine.dispose()


def test_editing_a_draft_leaves_the_public_validators_alone(app, hello):
    client = app.test_client()
    before = [validators(client, url)[0] for url in PAGES]
    draft = new_post(app, "Draft", slug="draft", body="x")
    with app.app_context():
        posts.update_post(draft, 1, None, "Draft 2", "draft", "y")
    assert [validators(client, url)[0] for url in PAGES] == before


def test_editing_a_published_post_through_the_api_changes_its_page_at_once(app, hello, api):
    client = app.test_client()
    page = validators(client, "/posts/hello")[0]
    with app.app_context():
        version = posts.get_post(hello).version
    answer = api("PATCH", f"/api/posts/{hello}", body={"title": "Renamed", "version": version})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    response = client.get("/posts/hello", headers={"If-None-Match": page})
    assert response.status_code == 200 and "Renamed" in text(response)


def test_a_signed_in_viewers_public_page_is_private_and_never_a_304(app, hello, auth):
    etag = validators(app.test_client(), "/posts/hello")[0]
    editor = auth.client("editor")
    for url in ("/", "/posts/hello"):
        response = editor.get(url, headers={"If-None-Match": etag})
        assert response.status_code == 200
        assert response.headers["Cache-Control"] == "private, no-cache"
        assert "ETag" not in response.headers and "Last-Modified" not in response.headers
        assert "editor@example.com" in text(response)
        assert "Cookie" in response.headers["Vary"]
    assert "Edit</a>" in text(editor.get("/posts/hello"))
    # after signing out, the anonymous page is not the one the browser kept
    assert app.test_client().get("/posts/hello").headers["ETag"] == etag


def test_a_page_changed_within_the_last_seconds_has_no_last_modified_yet(app):
    new_post(app, "Fresh", slug="fresh", status="published", published_at=datetime.now(UTC))
    response = app.test_client().get("/posts/fresh")
    assert "Last-Modified" not in response.headers and response.headers["ETag"]


def test_cache_lifetimes_come_from_the_settings(app, hello):
    app.config.update(SITE_MAX_AGE_SECONDS=0, SITE_STALE_SECONDS=0)
    assert app.test_client().get("/").headers["Cache-Control"] == "public, no-cache"
    app.config.update(SITE_MAX_AGE_SECONDS=600, SITE_STALE_SECONDS=0)
    assert app.test_client().get("/").headers["Cache-Control"] == "public, max-age=600"


def test_unknown_posts_and_pages_are_404_and_not_kept(app, hello):
    client = app.test_client()
    for url in ("/posts/nope", "/?page=2"):
        response = client.get(url)
        assert response.status_code == 404
        assert "ETag" not in response.headers
        assert response.headers["Cache-Control"] == "no-cache"


def test_on_sqlite_publishing_changes_the_validators_and_a_match_is_a_304(sqlite_app):
    post_id = new_post(sqlite_app, "Hi", slug="hi", status="draft")
    client = sqlite_app.test_client()
    empty = validators(client, "/")[0]
    with sqlite_app.app_context():
        posts.publish_now(post_id)
    etag = validators(client, "/")[0]
    assert etag != empty
    assert client.get("/", headers={"If-None-Match": etag}).status_code == 304
    page = validators(client, "/posts/hi")[0]
    assert client.get("/posts/hi", headers={"If-None-Match": page}).status_code == 304
    with sqlite_app.app_context():
        posts.unpublish_post(post_id)
    assert client.get("/", headers={"If-None-Match": etag}).status_code == 200


def test_the_feeds_updated_moves_forward_when_a_post_is_unpublished(app, hello):
    second = new_post(app, "Second", slug="second", status="draft")
    with app.app_context():
        posts.publish_now(second)
    client = app.test_client()
    before = ET.fromstring(client.get("/feed.xml").data).findtext(f"{ATOM}updated")
    with app.app_context():
        posts.unpublish_post(second)
    after = ET.fromstring(client.get("/feed.xml").data).findtext(f"{ATOM}updated")
    assert datetime.fromisoformat(after) > datetime.fromisoformat(before)


@pytest.mark.parametrize("cookie", [None, "session"], ids=["before-flask", "in-the-view"])
@pytest.mark.parametrize("headers", [
    {"If-None-Match": "*"}, {"If-Modified-Since": "Fri, 01 Jan 9000 00:00:00 GMT"},
], ids=["star", "year-9000"])
def test_a_page_that_does_not_exist_is_a_404_whatever_the_conditional_headers(
        app, hello, cookie, headers):
    """It answered 304 public: RFC 9110 makes If-None-Match: * false with no current page."""
    client = app.test_client()
    if cookie:
        client.set_cookie(app.config["SESSION_COOKIE_NAME"], "ended-long-ago")
    for url in ("/?page=49999", "/posts/no-such-post"):
        response = client.get(url, headers=headers)
        assert response.status_code == 404, (url, headers)
        assert "public" not in response.headers.get("Cache-Control", "")
    # a date later than now is no copy's date: the page is sent whole
    assert client.get("/", headers={"If-Modified-Since": "Fri, 01 Jan 9000 00:00:00 GMT"}
                      ).status_code == 200
