"""The public site as a site: its name and description, excerpts, pages, link previews."""

import html
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from tests.harness.support import make_app, new_post, post_form, text
from webapp.extensions import db

ATOM = "{http://www.w3.org/2005/Atom}"
T0 = datetime(2026, 3, 29, 9, 0, tzinfo=UTC)
TRICKY = 'Fish & "chips" <script>alert(1)</script>'


def meta(page: str, prop: str) -> str | None:
    """Return the content of <meta property=prop> (or name=prop), unescaped."""
    found = re.search(rf'<meta (?:property|name)="{re.escape(prop)}" content="([^"]*)">', page)
    return html.unescape(found.group(1)) if found else None


def link(page: str, rel: str) -> str | None:
    found = re.search(rf'<link rel="{rel}"[^>]* href="([^"]*)">', page)
    return html.unescape(found.group(1)) if found else None


def publish_many(app, count: int) -> None:
    for i in range(count):
        new_post(app, f"Post {i}", slug=f"post-{i}", body=f"Paragraph *{i}* here.\n\nMore.",
                 status="published", published_at=T0 + timedelta(minutes=i))


def test_the_index_shows_excerpts_of_each_posts_first_paragraph_as_plain_text(app):
    new_post(app, "Harbour", slug="harbour", status="published", published_at=T0,
             body="# A heading\n\nThe **boats** came in at `dawn`, see [the map](https://x.test)"
                  " <b>now</b>.\n\nSecond paragraph.")
    page = text(app.test_client().get("/"))
    assert ('<p class="excerpt">The boats came in at dawn, see the map &lt;b&gt;now&lt;/b&gt;.'
            '</p>') in page
    assert "Second paragraph" not in page and "A heading" not in page


def test_a_long_first_paragraph_is_cut_at_a_word(app):
    new_post(app, "Long", slug="long", status="published", published_at=T0,
             body="word " * 200)
    excerpt = re.search(r'<p class="excerpt">([^<]*)</p>', text(app.test_client().get("/")))
    assert excerpt.group(1).endswith("word…") and len(excerpt.group(1)) <= 241


def test_the_index_pages_twenty_posts_with_links_both_ways_and_404_past_the_end(app):
    publish_many(app, 45)
    client = app.test_client()
    first, second, third = (text(client.get(u)) for u in ("/", "/?page=2", "/?page=3"))
    assert 'rel="next" href="/?page=2"' in first and 'rel="prev"' not in first
    assert 'rel="prev" href="/"' in second and 'rel="next" href="/?page=3"' in second
    assert 'rel="prev" href="/?page=2"' in third and 'rel="next"' not in third
    assert third.count('class="excerpt"') == 5
    assert client.get("/?page=4").status_code == 404
    assert link(second, "canonical") == "http://localhost/?page=2"
    assert link(first, "canonical") == "http://localhost/"


def test_pages_carry_open_graph_canonical_and_the_feed_escaped(app):
    app.config.update(SITE_NAME=TRICKY, SITE_DESCRIPTION='A "quay" & more')
    new_post(app, TRICKY, slug="tricky", status="published", published_at=T0,
             body='Body with "quotes" & <em>tags</em>.')
    client = app.test_client()
    post = text(client.get("/posts/tricky"))
    assert "<script>alert" not in post
    assert meta(post, "og:title") == TRICKY and meta(post, "og:site_name") == TRICKY
    assert meta(post, "og:type") == "article"
    assert meta(post, "og:description") == 'Body with "quotes" & <em>tags</em>.'
    assert meta(post, "og:url") == link(post, "canonical") == "http://localhost/posts/tricky"
    assert link(post, "alternate") == "http://localhost/feed.xml"
    assert 'type="application/atom+xml"' in post
    index = text(client.get("/"))
    assert meta(index, "og:type") == "website" and meta(index, "og:title") == TRICKY
    assert meta(index, "og:description") == meta(index, "description") == 'A "quay" & more'
    assert html.unescape(re.search(r"<h1>(.*?)</h1>", index).group(1)) == TRICKY
    assert "<script>alert" not in index


def test_absolute_links_in_the_head_use_site_url(pg_url):
    app = make_app(pg_url, SITE_URL="https://news.example.com/blog")
    new_post(app, "Hello", slug="hello", status="published", published_at=T0)
    page = text(app.test_client().get("/posts/hello", base_url="http://evil.test"))
    assert link(page, "canonical") == "https://news.example.com/blog/posts/hello"
    assert meta(page, "og:url") == "https://news.example.com/blog/posts/hello"
    assert link(page, "alternate") == "https://news.example.com/blog/feed.xml"
    with app.app_context():
        db.engine.dispose()


def test_an_admin_names_the_site_and_every_public_page_and_the_feed_show_it_at_once(
        app, auth):
    new_post(app, "Hello", slug="hello", status="published", published_at=T0, updated_at=T0)
    reader = app.test_client()
    before = {u: reader.get(u).headers["ETag"] for u in ("/", "/posts/hello", "/feed.xml")}
    admin = auth.client("admin")
    answer = post_form(admin, "/admin/site/", {"name": "Harbour News",
                                               "description": "From the quay"})
    assert answer.status_code == 303
    for url, etag in before.items():
        response = reader.get(url, headers={"If-None-Match": etag})
        assert response.status_code == 200 and "Harbour News" in text(response), url
    assert "<title>Hello · Harbour News</title>" in text(reader.get("/posts/hello"))
    feed = ET.fromstring(reader.get("/feed.xml").data)
    assert feed.findtext(f"{ATOM}title") == "Harbour News"
    assert feed.findtext(f"{ATOM}subtitle") == "From the quay"
    form = text(admin.get("/admin/site/"))
    assert 'value="Harbour News"' in form and 'value="From the quay"' in form


def test_blank_settings_fall_back_to_site_name_and_site_description(app, auth):
    app.config.update(SITE_NAME="From Env", SITE_DESCRIPTION="Env words")
    admin = auth.client("admin")
    post_form(admin, "/admin/site/", {"name": "Mine", "description": "Words"})
    post_form(admin, "/admin/site/", {"name": "  ", "description": ""})
    page = text(app.test_client().get("/"))
    assert "<h1>From Env</h1>" in page and "Env words" in page


@pytest.mark.parametrize(("field", "value"), [("name", "n" * 101), ("description", "d" * 301),
                                              ("name", "bell\x07")])
def test_settings_that_cannot_be_saved_are_refused_keeping_what_was_typed(
        app, auth, field, value):
    admin = auth.client("admin")
    form = {"name": "Fine", "description": "Fine too", field: value}
    answer = post_form(admin, "/admin/site/", form)
    assert answer.status_code == 422
    page = text(answer)
    assert 'id="e-' + field + '"' in page
    assert html.escape(value.replace("\x07", ""))[:50] in page.replace("\x07", "")
    assert "<h1>Soloist</h1>" in text(app.test_client().get("/"))


def test_only_admins_change_the_site_settings(app, auth):
    editor = auth.client("editor")
    assert editor.get("/admin/site/").status_code == 403
    assert post_form(editor, "/admin/site/", {"name": "Mine"}).status_code == 403


def test_the_excerpt_is_the_first_paragraph_even_after_a_long_code_block_or_list(app):
    fence = "```\n" + "code line\n\n" * 150 + "```\n\n"
    new_post(app, "Code", slug="code", status="published", published_at=T0,
             body=fence + "After the *code*.")
    new_post(app, "List", slug="list", status="published", published_at=T0 + timedelta(1),
             body="- item\n" * 200 + "\nThe paragraph.")
    page = text(app.test_client().get("/"))
    assert '<p class="excerpt">After the code.</p>' in page
    assert '<p class="excerpt">The paragraph.</p>' in page
