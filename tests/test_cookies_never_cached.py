"""A signed-in viewer's session cookie never rides on a response a shared cache may keep."""

from datetime import UTC, datetime, timedelta

import pytest

from tests.harness.support import new_post, text
from webapp.extensions import db
from webapp.plugins import sitemap
from webapp.site import state as sitestate

LONG_AGO = datetime.now(UTC) - timedelta(days=3)
PUBLIC = ["/", "/?page=1", "/posts/hello", "/feed.xml", "/sitemap.xml", "/favicon.ico",
          "/static/favicon.svg", "/static/css/soloist.css"]


@pytest.fixture
def published(app):
    new_post(app, "Hello", slug="hello", status="published", published_at=LONG_AGO,
             updated_at=LONG_AGO)
    with app.app_context():
        sitestate.bump(LONG_AGO)
        sitemap.rebuild(datetime.now(UTC))
        db.session.commit()


def shared_cache_may_keep(response) -> bool:
    control = response.cache_control
    return bool(control.public or control.s_maxage is not None)


@pytest.mark.parametrize("url", PUBLIC)
def test_a_signed_in_viewer_gets_no_cookie_on_a_publicly_cacheable_answer(
        app, auth, published, url):
    client = auth.client("editor")
    first = client.get(url)
    assert first.status_code == 200, (url, text(first)[:200])
    answers = [first]
    etag, modified = first.headers.get("ETag"), first.headers.get("Last-Modified")
    if etag:
        answers.append(client.get(url, headers={"If-None-Match": etag}))
    if modified:
        answers.append(client.get(url, headers={"If-Modified-Since": modified}))
    for answer in answers:
        answer.close()  # a static file's handle
        if shared_cache_may_keep(answer):
            assert "Set-Cookie" not in answer.headers, (url, answer.status_code,
                                                        answer.headers["Cache-Control"])
    # the session still works afterwards
    assert client.get("/admin/posts/").status_code == 200


def test_the_feed_and_its_304_stay_public_for_an_editor_without_a_cookie(app, auth, published):
    client = auth.client("editor")
    page = client.get("/feed.xml")
    assert page.cache_control.public and "Set-Cookie" not in page.headers
    again = client.get("/feed.xml", headers={"If-None-Match": page.headers["ETag"]})
    assert again.status_code == 304 and "Set-Cookie" not in again.headers


def test_admin_pages_still_refresh_the_session_cookie(app, auth):
    client = auth.client("editor")
    page = client.get("/admin/posts/")
    assert page.status_code == 200
    assert "session=" in page.headers.get("Set-Cookie", "")
    assert not page.cache_control.public
