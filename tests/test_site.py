"""The public site: published posts only, newest first, an Atom feed, read fresh each time."""

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.support import make_app, new_post, text
from webapp.extensions import db
from webapp.models import Post
from webapp.scheduling import publish

ATOM = "{http://www.w3.org/2005/Atom}"
T0 = datetime(2026, 3, 29, 9, 0, tzinfo=UTC)


def add_published(app, count: int) -> None:
    """Insert count published posts, one a minute from T0."""
    with app.app_context():
        db.session.execute(sa.insert(Post), [
            {"title": f"Post {i}", "slug": f"post-{i}", "body": f"Body **{i}**",
             "status": "published", "published_at": T0 + timedelta(minutes=i), "version": 1,
             "created_at": T0, "updated_at": T0 + timedelta(minutes=i)} for i in range(count)])
        db.session.commit()


def listed(page: str) -> list[str]:
    return [chunk.split("</a>")[0].split(">")[-1] for chunk in page.split("<h2><a")[1:]]


def test_the_home_page_lists_published_posts_newest_first_twenty_a_page(app):
    add_published(app, 25)
    new_post(app, "A draft")
    client = app.test_client()
    first = text(client.get("/"))
    assert listed(first)[:2] == ["Post 24", "Post 23"] and len(listed(first)) == 20
    assert "A draft" not in first and 'href="/?page=2"' in first
    second = text(client.get("/?page=2"))
    assert listed(second) == [f"Post {i}" for i in range(4, -1, -1)]
    assert 'href="/?page=3"' not in second


@pytest.mark.parametrize("page", ["0", "-3", "abc", "99999999999999999999", "2", "٣"])
def test_page_numbers_past_the_last_page_or_unreadable_are_404_not_an_error(app, page):
    add_published(app, 3)
    client = app.test_client()
    assert client.get(f"/?page={page}").status_code == 404
    assert client.get("/?page=1").status_code == 200


def test_a_post_page_shows_the_rendered_body(app):
    add_published(app, 1)
    response = app.test_client().get("/posts/post-0")
    assert response.status_code == 200
    assert "<h1>Post 0</h1>" in text(response) and "<strong>0</strong>" in text(response)


@pytest.mark.parametrize("status", ["draft", "scheduled", "unpublished"])
def test_posts_that_are_not_published_are_404_to_the_public(app, status):
    new_post(app, "Secret", slug="secret", status=status,
             publish_at=datetime.now(UTC) - timedelta(seconds=5))
    client = app.test_client()
    assert client.get("/posts/secret").status_code == 404
    assert "Secret" not in text(client.get("/"))
    assert "Secret" not in text(client.get("/feed.xml"))
    assert client.get("/posts/no-such-post").status_code == 404


def test_the_feed_is_atom_with_the_latest_published_posts(app):
    add_published(app, 25)
    new_post(app, "Draft <b>", slug="draft")
    response = app.test_client().get("/feed.xml")
    assert response.status_code == 200 and response.mimetype == "application/atom+xml"
    feed = ET.fromstring(response.data)
    entries = feed.findall(f"{ATOM}entry")
    assert len(entries) == 20
    assert entries[0].findtext(f"{ATOM}title") == "Post 24"
    assert entries[0].find(f"{ATOM}link").get("href") == "http://localhost/posts/post-24"
    assert entries[0].findtext(f"{ATOM}content") == "<p>Body <strong>24</strong></p>\n"
    assert feed.findtext(f"{ATOM}updated") == (T0 + timedelta(minutes=24)).isoformat()


def test_an_empty_feed_is_still_valid_atom(app):
    feed = ET.fromstring(app.test_client().get("/feed.xml").data)
    assert feed.findall(f"{ATOM}entry") == [] and feed.findtext(f"{ATOM}updated")


def test_a_post_published_by_another_process_shows_at_once_everywhere(app, pg_url):
    other_worker = make_app(pg_url)  # another worker: its own engine, pool and app
    here, there = app.test_client(), other_worker.test_client()
    new_post(app, "Fresh", slug="fresh", status="scheduled", publish_at=T0)
    assert here.get("/posts/fresh").status_code == 404  # both have served the page before
    assert there.get("/posts/fresh").status_code == 404
    assert "Fresh" not in text(there.get("/"))
    with app.app_context():
        assert publish.tick(T0) is None
    assert there.get("/posts/fresh").status_code == 200
    assert "Fresh" in text(there.get("/")) and "Fresh" in text(there.get("/feed.xml"))
    with other_worker.app_context():
        db.engine.dispose()


def test_readers_get_no_session_cookie_so_public_pages_stay_cacheable(app):
    add_published(app, 1)
    client = app.test_client()
    with app.app_context():
        slug = db.session.scalar(sa.select(Post.slug))
    for url in ("/", f"/posts/{slug}", "/feed.xml"):
        response = client.get(url)
        assert response.status_code == 200
        assert "Set-Cookie" not in response.headers, url
