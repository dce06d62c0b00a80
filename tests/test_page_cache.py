"""A reader's page kept in the worker's memory: sent again without rendering, never past a change.

webapp.site.pagecache keeps each public page's last 200 under the ETag it was sent with and
sends it again when the one-row version read gives that ETag; renders are counted with
Flask's template_rendered signal, against the real PostgreSQL.
"""

import gzip
import re
from datetime import UTC, datetime, timedelta

import pytest
from flask import template_rendered

from tests.harness.cluster import wait_for
from tests.harness.support import LONG_AGO, make_app, new_post, text
from webapp import posts
from webapp.extensions import db
from webapp.scheduling import publish
from webapp.site.pagecache import Page, Pages

PAGES = ["/", "/?page=1", "/posts/hello", "/feed.xml"]


def renders(app, client, url: str, method: str = "GET", **headers):
    """Ask for url; return the response and the templates rendered meanwhile."""
    seen = []

    def record(_sender, template, **_extra):
        seen.append(template.name)

    with template_rendered.connected_to(record, app):
        response = client.open(url, method=method, headers=headers)
    return response, seen


@pytest.mark.parametrize("url", PAGES)
def test_a_pages_second_reader_gets_the_same_page_without_a_render(app, hello, url):
    client = app.test_client()
    first, rendered = renders(app, client, url)
    assert first.status_code == 200 and rendered
    second, rendered = renders(app, client, url)
    assert second.status_code == 200 and rendered == []
    assert second.data == first.data
    for name in ("ETag", "Cache-Control", "Surrogate-Key", "Cache-Tag", "Vary", "Content-Type",
                 "Content-Security-Policy", "Last-Modified", "Content-Length"):
        assert second.headers.get(name) == first.headers.get(name), name


def test_a_page_kept_once_is_sent_gzipped_or_not_as_each_reader_asks(app, hello):
    client = app.test_client()
    zipped, rendered = renders(app, client, "/posts/hello", **{"Accept-Encoding": "gzip"})
    assert zipped.headers["Content-Encoding"] == "gzip" and rendered
    plain, rendered = renders(app, client, "/posts/hello")
    assert "Content-Encoding" not in plain.headers and rendered == []
    assert gzip.decompress(zipped.data) == plain.data
    again, rendered = renders(app, client, "/posts/hello", **{"Accept-Encoding": "gzip, br"})
    assert again.headers["Content-Encoding"] == "gzip" and rendered == []
    assert again.data == zipped.data and again.headers["ETag"] == zipped.headers["ETag"]


def test_a_change_through_another_instance_is_rendered_at_the_next_request(app, hello, pg_url):
    client = app.test_client()
    for url in ("/", "/posts/hello", "/feed.xml"):
        assert renders(app, client, url)[1] and renders(app, client, url)[1] == []
    other = make_app(pg_url)  # another worker: its own memory, the same database
    with other.app_context():
        post = posts.get_post(hello)
        posts.update_post(hello, post.version, None, "Hello again", "hello", post.body)
    for url in ("/", "/posts/hello", "/feed.xml"):
        response, rendered = renders(app, client, url)
        assert rendered and "Hello again" in text(response), url
    scheduled = new_post(other, "Second", slug="second", status="scheduled",
                         publish_at=LONG_AGO + timedelta(days=1))
    with other.app_context():
        publish.tick(datetime.now(UTC))  # the publish leader, elsewhere
        assert posts.get_post(scheduled).status == "published"
    response, rendered = renders(app, client, "/")
    assert rendered and "Second" in text(response)
    with other.app_context():
        posts.unpublish_post(hello)  # a takedown
        db.engine.dispose()
    assert renders(app, client, "/posts/hello")[0].status_code == 404
    assert "Hello again" not in text(renders(app, client, "/")[0])


def test_signed_in_viewers_are_never_sent_a_kept_page_nor_leave_theirs(app, hello, auth):
    editor = auth.client("editor")
    response, rendered = renders(app, editor, "/posts/hello")
    assert rendered and "editor@example.com" in text(response)
    reader = app.test_client()
    response, rendered = renders(app, reader, "/posts/hello")
    assert rendered and "editor@example.com" not in text(response)  # nothing was kept
    assert renders(app, reader, "/posts/hello")[1] == []  # the reader's is
    response, rendered = renders(app, editor, "/posts/hello")
    assert rendered and response.headers["Cache-Control"] == "private, no-cache"
    assert "Edit</a>" in text(response)


def test_head_is_answered_from_the_kept_page_without_a_body(app, hello):
    client = app.test_client()
    get, _ = renders(app, client, "/posts/hello")
    head, rendered = renders(app, client, "/posts/hello", method="HEAD")
    assert head.status_code == 200 and head.data == b"" and rendered == []
    assert head.headers["Content-Length"] == str(len(get.data))
    assert head.headers["ETag"] == get.headers["ETag"]


def test_a_kept_pages_lifetime_is_counted_down_to_its_takedown(app):
    new_post(app, "Brief", slug="brief", status="published", published_at=LONG_AGO,
             updated_at=LONG_AGO, unpublish_at=datetime.now(UTC) + timedelta(seconds=30))
    client = app.test_client()

    def max_age() -> int:
        response, _ = renders(app, client, "/posts/brief")
        return int(re.search(r"max-age=(\d+)", response.headers["Cache-Control"])[1])

    first = max_age()
    assert first <= 30
    wait_for(lambda: max_age() < first, 5, "the kept page's lifetime to shrink", interval=0.2)
    assert renders(app, client, "/posts/brief")[1] == []


def test_with_no_memory_set_aside_every_page_is_rendered(app, hello):
    app.config["SITE_PAGE_CACHE_MB"] = 0
    client = app.test_client()
    assert renders(app, client, "/posts/hello")[1]
    assert renders(app, client, "/posts/hello")[1]


def page(etag: str, size: int) -> Page:
    return Page(etag, (), b"x" * size)


def test_past_its_count_the_least_recently_used_page_goes_first():
    pages = Pages(max_pages=2, max_bytes=10_000)
    pages.put(("a",), page("1", 10))
    pages.put(("b",), page("1", 10))
    assert pages.get(("a",), "1")  # a is now the most recently used
    pages.put(("c",), page("1", 10))
    assert pages.get(("b",), "1") is None and pages.get(("a",), "1") and pages.get(("c",), "1")


def test_past_its_bytes_the_oldest_pages_go_and_a_page_too_big_is_not_kept():
    pages = Pages(max_pages=100, max_bytes=1_000)
    for name in "abcd":
        pages.put((name,), page("1", 300))
    assert [n for n in "abcd" if pages.get((n,), "1")] == ["b", "c", "d"]
    pages.put(("huge",), page("1", 2_000))
    assert pages.get(("huge",), "1") is None and len(pages) == 3


def test_a_pages_new_version_replaces_its_old_one():
    pages = Pages(max_pages=10, max_bytes=10_000)
    pages.put(("a",), page("old", 10))
    pages.put(("a",), page("new", 10))
    assert pages.get(("a",), "old") is None and pages.get(("a",), "new") and len(pages) == 1
