"""No cache keeps a public page past the moment it is known to turn wrong; a purger lets it
keep the rest for a day while browsers ask every visit."""

from datetime import timedelta

import pytest

from tests.harness.support import new_post
from webapp.config import ConfigError, load_config
from webapp.db import database_now
from webapp.extensions import db
from webapp.models import ScheduledChange
from webapp.plugins import sitemap

PURGER = ["varnish+http://127.0.0.1:6081"]
LISTS = ("/", "/feed.xml", "/sitemap.xml")


def now(app):
    with app.app_context():
        return database_now()


def lifetime(response) -> tuple[int | None, int | None, str]:
    """Return max-age, s-maxage and the whole Cache-Control of response."""
    control = response.cache_control
    return control.max_age, control.s_maxage, response.headers["Cache-Control"]


def test_without_a_purger_a_page_with_no_change_ahead_is_kept_briefly_as_before(app):
    new_post(app, "Hello", slug="hello", status="published", published_at=now(app))
    for path in ("/posts/hello", *LISTS[:2]):
        assert app.test_client().get(path).headers["Cache-Control"] == (
            "public, max-age=60, stale-while-revalidate=300")
    assert app.test_client().get("/posts/nope").headers["Cache-Control"] == "no-cache"


def test_with_a_purger_shared_caches_keep_pages_a_day_and_browsers_ask_every_visit(app):
    app.config["CACHE_PURGE"] = PURGER
    new_post(app, "Hello", slug="hello", status="published", published_at=now(app))
    reader = app.test_client()
    for path in ("/posts/hello", "/", "/feed.xml"):
        first = reader.get(path)
        assert first.headers["Cache-Control"] == (
            "public, max-age=0, s-maxage=86400, stale-while-revalidate=300"), path
        again = reader.get(path, headers={"If-None-Match": first.headers["ETag"]})
        assert (again.status_code, again.headers["Cache-Control"]) == (
            304, first.headers["Cache-Control"]), path
    # a URL no post has is purged with the list a post taking it joins
    assert lifetime(reader.get("/posts/nope"))[:2] == (0, 86400)


@pytest.mark.parametrize("purger", [[], PURGER], ids=["no-purger", "purger"])
def test_a_scheduled_posts_404_is_kept_only_until_it_is_due(app, purger):
    app.config["CACHE_PURGE"] = purger
    due = now(app) + timedelta(seconds=40)
    new_post(app, "Soon", slug="soon", status="scheduled", publish_at=due)
    new_post(app, "Now", slug="now", status="scheduled", publish_at=now(app))  # overdue
    reader = app.test_client()
    max_age, shared, control = lifetime(reader.get("/posts/soon"))
    assert 30 <= (shared if purger else max_age) <= 40 and "stale" not in control
    assert "no-cache" in reader.get("/posts/now").headers["Cache-Control"]


@pytest.mark.parametrize("purger", [[], PURGER], ids=["no-purger", "purger"])
def test_a_live_post_is_kept_no_later_than_its_takedown_or_its_scheduled_change(app, purger):
    app.config["CACHE_PURGE"] = purger
    start = now(app)
    new_post(app, "Going", slug="going", status="published", published_at=start,
             unpublish_at=start + timedelta(seconds=30))
    changing = new_post(app, "Changing", slug="changing", status="published",
                        published_at=start)
    with app.app_context():
        db.session.add(ScheduledChange(post_id=changing, title="Changed", body="New.",
                                       apply_at=start + timedelta(seconds=45), base_version=1,
                                       base_digest=""))
        db.session.commit()
    reader = app.test_client()
    for path, limit in (("/posts/going", 30), ("/posts/changing", 45)):
        first = reader.get(path)
        again = reader.get(path, headers={"If-None-Match": first.headers["ETag"]})
        for response in (first, again):  # the 304 refreshes a kept copy: no longer either
            max_age, shared, control = lifetime(response)
            assert limit - 10 <= (shared if purger else max_age) <= limit, (path, control)
            assert "stale" not in control, path


@pytest.mark.parametrize("purger", [[], PURGER], ids=["no-purger", "purger"])
def test_the_lists_are_kept_no_later_than_the_next_post_they_would_list(app, purger):
    app.config["CACHE_PURGE"] = purger
    start = now(app)
    new_post(app, "Hello", slug="hello", status="published", published_at=start)
    new_post(app, "Soon", slug="soon", status="scheduled",
             publish_at=start + timedelta(seconds=50))
    with app.app_context():
        sitemap.rebuild(start)
    reader = app.test_client()
    for path in LISTS:
        first = reader.get(path)
        max_age, shared, control = lifetime(first)
        assert 40 <= (shared if purger else max_age) <= 50, (path, control)
        assert "stale" not in control, path
    etag = reader.get("/").headers["ETag"]
    assert lifetime(reader.get("/", headers={"If-None-Match": etag}))[2] == control


def test_cache_purge_lists_purgers_and_names_one_it_cannot_use():
    env = {"DATABASE_URL": "postgres://u:p@db.example:5432/app"}
    assert load_config(env)["CACHE_PURGE"] == []
    listed = ("varnish+http://10.0.0.5:6081, fastly://SERVICE, cloudflare://ZONE,"
              "purge+http://nginx:80,purge+https://edge.example")
    assert load_config({**env, "CACHE_PURGE": listed})["CACHE_PURGE"] == [
        "varnish+http://10.0.0.5:6081", "fastly://SERVICE", "cloudflare://ZONE",
        "purge+http://nginx:80", "purge+https://edge.example"]
    for bad in ("http://varnish:6081", "fastly:SERVICE", "varnish+http://host:99999"):
        with pytest.raises(ConfigError, match="CACHE_PURGE lists"):
            load_config({**env, "CACHE_PURGE": f"fastly://S,{bad}"})
    with pytest.raises(ConfigError) as raised:
        load_config({**env, "CACHE_PURGE": "https://user:secret@edge.example"})
    assert "secret" not in str(raised.value)


@pytest.mark.parametrize("purge", [[], PURGER])
def test_an_answer_that_can_turn_right_any_moment_is_kept_by_no_cache(app, purge):
    """Before its plugin's first build the sitemap is a 404, which Varnish would otherwise
    keep two minutes (its default for an answer without Cache-Control), past the build."""
    app.config["CACHE_PURGE"] = purge
    missing = app.test_client().get("/sitemap.xml")
    assert missing.status_code == 404 and missing.headers["Cache-Control"] == "no-cache"
    with app.app_context():
        sitemap.rebuild(database_now())
    assert app.test_client().get("/sitemap.xml").status_code == 200
