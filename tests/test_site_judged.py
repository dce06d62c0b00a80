"""What the outside judges check on the public pages: valid HTML, search engines' needs,
feed readers' links, the largest paint, structured data and compression."""

import gzip
import html
import json
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from tests.harness import media_files as made
from tests.harness.support import make_app, new_post, post_form, text
from tests.test_media import upload
from tests.test_site_pages import ATOM, meta
from webapp.extensions import db

# stored times carry microseconds, which HTML's date strings cannot hold
T0 = datetime(2026, 3, 29, 9, 0, 5, 123456, tzinfo=UTC)


def test_no_time_on_a_public_page_carries_a_fraction_of_a_second(app):
    for i in range(21):
        new_post(app, f"Post {i}", slug=f"post-{i}", status="published",
                 published_at=T0 + timedelta(minutes=i, microseconds=i))
    client = app.test_client()
    pages = [text(client.get(url)) for url in ("/", "/?page=2", "/posts/post-3")]
    stamps = [s for page in pages for s in re.findall(r'<time datetime="([^"]*)"', page)]
    assert len(stamps) == 22 and "2026-03-29T09:03:05Z" in stamps
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s) for s in stamps), stamps


def test_robots_txt_names_the_sitemap_on_site_url_never_the_host_asked_for(pg_url):
    app = make_app(pg_url, SITE_URL="https://news.example.com/blog")
    client = app.test_client()
    answer = client.get("/robots.txt", base_url="http://evil.test")
    assert answer.status_code == 200 and answer.mimetype == "text/plain"
    assert "Sitemap: https://news.example.com/blog/sitemap.xml\n" in text(answer)
    assert "evil.test" not in text(answer) and "User-agent: *" in text(answer)
    assert answer.headers["Cache-Control"].startswith("public, max-age=")
    again = client.get("/robots.txt", headers={"If-None-Match": answer.headers["ETag"]})
    assert again.status_code == 304
    with app.app_context():
        db.engine.dispose()


def test_robots_txt_names_no_sitemap_without_site_url(app):
    answer = text(app.test_client().get("/robots.txt", base_url="http://evil.test"))
    assert "Sitemap:" not in answer and "evil.test" not in answer


def test_without_a_description_search_engines_get_a_true_sentence_not_an_empty_one(app, auth):
    app.config.update(SITE_NAME="Harbour News", SITE_DESCRIPTION="")
    new_post(app, "Only a picture", slug="picture", status="published", published_at=T0,
             body="# Just a heading")
    reader = app.test_client()
    index, post = text(reader.get("/")), text(reader.get("/posts/picture"))
    said = "The latest posts from Harbour News."
    assert meta(index, "description") == meta(index, "og:description") == said
    assert 'class="site-description"' not in index  # the page itself claims nothing more
    assert meta(post, "description") == meta(post, "og:description") == "Only a picture"
    assert said in html.unescape(text(auth.client("admin").get("/admin/site/")))
    post_form(auth.client("admin"), "/admin/site/", {"name": "", "description": "From the quay"})
    assert meta(text(reader.get("/")), "description") == "From the quay"


def test_the_feeds_images_and_links_are_absolute_for_a_reader_away_from_the_site(app, auth):
    editor = auth.client("editor")
    image = upload(editor, made.jpeg((1200, 800)), alt="Quay").get_json()
    new_post(app, "Boats", slug="boats", status="published", published_at=T0,
             body=f"{image['markdown']}\n\nSee [the last one](/posts/last) or [this](#here).")
    feed = ET.fromstring(app.test_client().get("/feed.xml").data)
    content = feed.find(f"{ATOM}entry/{ATOM}content").text
    base = f"http://localhost/media/{image['sha256']}/"
    assert f'<img src="{base}orig.jpg" srcset="{base}480.jpg 480w, {base}640.jpg 640w, ' \
           f'{base}960.jpg 960w, {base}orig.jpg 1200w"' in content
    assert 'href="http://localhost/posts/last"' in content
    assert 'href="http://localhost/posts/boats#here"' in content
    assert '"/' not in content  # nothing left for a feed reader to resolve
    assert "<picture" not in content and ".webp" not in content  # every reader takes JPEG


def test_a_posts_first_image_loads_at_once_first_and_the_others_when_scrolled_to(app, auth):
    editor = auth.client("editor")
    first, second = (upload(editor, made.jpeg((1200, 800), color=c)).get_json()
                     for c in ((200, 40, 40), (40, 40, 200)))
    new_post(app, "Boats", slug="boats", status="published", published_at=T0,
             body=f"Intro.\n\n{first['markdown']}\n\nMore.\n\n{second['markdown']}")
    page = text(app.test_client().get("/posts/boats"))
    images = {sha: re.search(rf'<img src="/media/{sha}/[^>]*>', page).group(0)
              for sha in (first["sha256"], second["sha256"])}
    top, below = images[first["sha256"]], images[second["sha256"]]
    assert 'fetchpriority="high"' in top and "loading=" not in top
    assert 'loading="lazy"' in below and "fetchpriority" not in below
    # the column is 640 px from a 680 px window up, the window less 2.5rem below it
    sizes = 'sizes="(max-width: 42.5rem) calc(100vw - 2.5rem), 40rem"'
    assert sizes in top and sizes in below
    assert f"/media/{first['sha256']}/640.jpg 640w" in top  # a 640 px column at 1x takes it


def test_a_post_describes_itself_to_search_engines_as_an_article_that_cannot_break_out(
        app, auth):
    image = upload(auth.client("editor"), made.jpeg((2000, 1000)), alt="Quay").get_json()
    title = 'Boats </script><script>alert(1)</script> & "more"'
    new_post(app, title, slug="boats", status="published", published_at=T0,
             updated_at=T0 + timedelta(hours=2), body=f"Intro.\n\n{image['markdown']}")
    answer = app.test_client().get("/posts/boats")
    page = text(answer)
    blocks = re.findall(r'<script type="application/ld\+json">(.*?)</script>', page, re.S)
    assert len(blocks) == 1 and "<script>alert" not in page
    assert json.loads(blocks[0]) == {
        "@context": "https://schema.org", "@type": "Article", "headline": title,
        "datePublished": "2026-03-29T09:00:05Z", "dateModified": "2026-03-29T11:00:05Z",
        "author": {"@type": "Organization", "name": "Soloist", "url": "http://localhost/"},
        "publisher": {"@type": "Organization", "name": "Soloist", "url": "http://localhost/"},
        "url": "http://localhost/posts/boats", "mainEntityOfPage": "http://localhost/posts/boats",
        "image": [f"http://localhost/media/{image['sha256']}/1600.jpg"]}
    assert "script-src 'self'" in answer.headers["Content-Security-Policy"]  # none run


GZIP = {"Accept-Encoding": "gzip, br"}


def test_public_text_comes_gzipped_to_a_client_that_asks_and_plain_to_one_that_does_not(app):
    for i in range(5):
        new_post(app, f"Post {i}", slug=f"post-{i}", status="published", published_at=T0,
                 body="The boats came in at dawn, as they do. " * 20)
    client = app.test_client()
    saved = {}
    for url in ("/", "/posts/post-1", "/feed.xml", "/static/css/site.css"):
        plain, packed = client.get(url), client.get(url, headers=GZIP)
        assert "Content-Encoding" not in plain.headers, url
        assert packed.headers["Content-Encoding"] == "gzip", url
        assert gzip.decompress(packed.data) == plain.data, url
        assert "Accept-Encoding" in plain.headers["Vary"] and "Accept-Encoding" in \
            packed.headers["Vary"], url
        assert packed.headers["ETag"].startswith('W/"'), url
        assert int(packed.headers["Content-Length"]) == len(packed.data), url
        saved[url] = 1 - len(packed.data) / len(plain.data)
        again = client.get(url, headers={**GZIP, "If-None-Match": packed.headers["ETag"]})
        again.close()  # a static file's 304 holds the file open until its answer is closed
        assert again.status_code == 304 and again.data == b"", url
    assert all(fraction > 0.5 for fraction in saved.values()), saved


def test_small_answers_signed_in_pages_and_images_are_never_compressed(app, auth):
    new_post(app, "Hello", slug="hello", status="published", published_at=T0)
    image = upload(auth.client("editor"), made.image("PNG")).get_json()
    reader, admin = app.test_client(), auth.client("admin")
    small = reader.get("/robots.txt", headers=GZIP)
    assert "Content-Encoding" not in small.headers and "Vary" not in small.headers
    # a page with a CSRF token in it stays uncompressed (BREACH)
    assert "Content-Encoding" not in admin.get("/posts/hello", headers=GZIP).headers
    assert "Content-Encoding" not in admin.get("/admin/site/", headers=GZIP).headers
    assert "Content-Encoding" not in reader.get(image["url"], headers=GZIP).headers
