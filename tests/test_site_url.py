"""Absolute links (feed, sitemap, API) name SITE_URL, never the Host header a client sent;
production does not start without it."""

import json
import subprocess
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from tests.harness.cluster import BIN, ROOT, base_env
from tests.harness.support import Api, make_app, new_post, text
from webapp.config import ConfigError, check_production_config, load_config
from webapp.extensions import db
from webapp.plugins import sitemap

ATOM = "{http://www.w3.org/2005/Atom}"
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
FORGED = {"Host": "attacker.example", "X-Forwarded-Host": "attacker.example"}


def feed_links(client) -> list[str]:
    """Return every id and href of /feed.xml, asked for with a forged Host."""
    feed = ET.fromstring(client.get("/feed.xml", headers=FORGED).get_data())
    ids = [e.text for e in feed.iter(f"{ATOM}id")]
    return ids + [e.get("href") for e in feed.iter(f"{ATOM}link")]


def sitemap_locs(app, client) -> list[str]:
    """Rebuild the sitemap and return its <loc>s, asked for with a forged Host."""
    with app.app_context():
        sitemap.rebuild(NOW)
        db.session.remove()
    urlset = ET.fromstring(client.get("/sitemap.xml", headers=FORGED).get_data())
    return [e.text for e in urlset.iter(f"{SITEMAP}loc")]


@pytest.fixture
def site_app(pg_url, app):
    """Return an app (on the emptied test database) whose SITE_URL has a path prefix."""
    site_app = make_app(pg_url, SITE_URL="https://blog.example.com/news")
    yield site_app
    with site_app.app_context():
        db.session.remove()
        db.engine.dispose()


def test_feed_and_sitemap_links_use_site_url_whatever_host_is_sent(site_app):
    new_post(site_app, "Hello", status="published", published_at=NOW)
    client = site_app.test_client()
    links = feed_links(client)
    assert len(links) == 5
    assert all(link.startswith("https://blog.example.com/news/") for link in links), links
    assert "https://blog.example.com/news/posts/hello" in links
    assert sitemap_locs(site_app, client) == ["https://blog.example.com/news/",
                                              "https://blog.example.com/news/posts/hello"]


def test_the_api_names_a_posts_address_on_site_url(site_app):
    api = Api(site_app)
    post_id = new_post(site_app, "Hello", status="published", published_at=NOW)
    response = api.client.get(f"/api/posts/{post_id}", headers={
        **FORGED, "Authorization": f"Bearer {api.tokens['viewer']}"})
    assert response.get_json()["url"] == "https://blog.example.com/news/posts/hello"


def test_pages_keep_relative_links_with_site_url_set(site_app):
    page = site_app.test_client().get("/", headers=FORGED).get_data(as_text=True)
    assert 'href="/feed.xml"' in page
    assert "attacker.example" not in page


def test_without_site_url_links_follow_the_request(app, client):
    new_post(app, "Hello", status="published", published_at=NOW)
    feed = ET.fromstring(client.get("/feed.xml").get_data())
    assert [e.text for e in feed.iter(f"{ATOM}id")][-1] == "http://localhost/posts/hello"


@pytest.mark.parametrize("value", [
    "example.com", "ftp://example.com", "https://", "https://example.com/?a=1",
    "https://example.com/#top", "https://user:pass@example.com", "https://example.com:99999",
    "https://exa mple.com", "javascript:alert(1)",
])
def test_a_bad_site_url_stops_start_up_naming_it(value):
    with pytest.raises(ConfigError, match="SITE_URL"):
        load_config({"SITE_URL": value})


@pytest.mark.parametrize(("value", "stored"), [
    ("https://example.com", "https://example.com"),
    ("https://Example.COM/", "https://example.com"),
    ("http://127.0.0.1:8000/blog/", "http://127.0.0.1:8000/blog"),
    ("", None),
])
def test_site_url_is_stored_without_a_trailing_slash(value, stored):
    assert load_config({"SITE_URL": value})["SITE_URL"] == stored


def test_production_without_site_url_does_not_start_and_says_what_to_set():
    env = {k: v for k, v in base_env(None).items() if k != "SITE_URL"}
    result = subprocess.run([str(BIN / "flask"), "--app", "webapp", "db", "current"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "SITE_URL is not set: set it to the site's public address" in result.stderr
    strong = base_env(None)["SECRET_KEY"]
    for empty in (None, ""):
        with pytest.raises(ConfigError, match="SITE_URL"):
            check_production_config({"SECRET_KEY": strong, "SITE_URL": empty})
    check_production_config({"SECRET_KEY": strong, "SITE_URL": "https://example.com"})
    # debug and tests start without one (links then follow the request's host)
    check_production_config({"DEBUG": True, "SECRET_KEY": strong})
    check_production_config({"TESTING": True, "SECRET_KEY": strong})


def test_every_recipe_sets_site_url():
    app_json = json.loads((ROOT / "app.json").read_text())
    assert app_json["env"]["SITE_URL"]["required"] is True  # the Heroku button asks for it
    assert 'SITE_URL="$${SITE_URL:-http://localhost:$${PORT:-8000}}"' in (
        (ROOT / "Makefile").read_text())  # make run


def test_the_metrics_help_page_names_site_url_not_the_host_or_query_a_client_sent(site_app):
    # the page a browser gets at /metrics shows a scrape config and a curl line to copy:
    # a forged Host header or query must not put an attacker's address into them
    page = site_app.test_client().get("/metrics?next=https://evil.example/", headers={
        **FORGED, "Accept": "text/html"})
    shown = text(page)
    assert page.status_code == 401
    assert "evil.example" not in shown and "attacker.example" not in shown
    assert "metrics_path: /news/metrics\n    scheme: https\n" in shown
    assert 'targets: ["blog.example.com"]' in shown
    assert "https://blog.example.com/news/metrics</code>" in shown
