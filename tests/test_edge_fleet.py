"""Readers behind a real Varnish see each change when it happens, not when a copy expires: a
fleet of two instances (the origins, taken in turn), CACHE_PURGE naming the Varnish, and
readers who read every page first so that Varnish holds a copy of each. A scheduled
publish and takedown, an edit of a live post, a scheduled change swapped in by the
leader, and a purger that is down for a while and comes back: each reaches every page
that shows it. bench/edge.py measures how soon (docs/benchmarks.md); here a reader
waits at most DEADLINE seconds, where a copy would otherwise be kept for a day."""

from collections.abc import Callable
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import (
    Instance,
    drop_database,
    migrated_database,
    status_of,
    stop_all,
    wait_for,
)
from tests.harness.edge import Varnish
from tests.harness.support import make_app, postgres_or_skip
from webapp import posts
from webapp.db import database_now
from webapp.extensions import db
from webapp.models import CachePurge

pytestmark = pytest.mark.slow

DEADLINE = 10.0  # seconds after the change; the target is 1 s (bench/edge.py)
PAGES = ("/", "/feed.xml", "/sitemap.xml")


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    """Two instances (one worker each) behind one Varnish, which they purge; an app on
    their database to make changes with, as an editor's request would."""
    postgres_or_skip()
    url = migrated_database("soloist_edge")
    tmp = tmp_path_factory.mktemp("edge")
    instances = [Instance(name, url, workers=1, log_dir=tmp) for name in ("a", "b")]
    cache = Varnish([i.port for i in instances])
    try:
        for instance in instances:
            instance.env["CACHE_PURGE"] = cache.purger
            instance.start()
        wait_for(lambda: cache.read("/healthz").status == 200 and all(
            status_of(i.url + "/healthz", 2) == 200 for i in instances), 60,
            "both instances answering through Varnish")
        app = make_app(url, CACHE_PURGE=[cache.purger])
        yield cache, app
    finally:
        stop_all(instances)
        cache.close()
        drop_database(url)


def live(app, title: str, slug: str, unpublish_at=None) -> int:
    """Publish a new post now, as an editor's "Publish now" does; return its id."""
    with app.app_context():
        post_id = posts.create_post(title, slug, "Some text.").id
        posts.publish_now(post_id)
        if unpublish_at is not None:
            posts.change_post(post_id, posts.get_post(post_id).version, None,
                              {"unpublish_at": unpublish_at})
    return post_id


def cached(cache: Varnish, *paths: str) -> None:
    """Read each path until Varnish answers it from its copy (a reader was there before)."""
    for path in paths:
        wait_for(lambda p=path: cache.read(p).hit, 10, f"Varnish to hold a copy of {path}")


def shows(cache: Varnish, path: str, text: str) -> bool:
    return text in cache.read(path).body


def seen_by_readers(cache: Varnish, what: str, checks: dict[str, Callable[[], bool]]) -> None:
    """Wait until every check holds through Varnish; name the pages still wrong if not."""
    try:
        wait_for(lambda: all(check() for check in checks.values()), DEADLINE, what,
                 interval=0.1)
    except AssertionError:
        wrong = [page for page, check in checks.items() if not check()]
        raise AssertionError(f"{what}: still wrong through Varnish after {DEADLINE:g} s: "
                             f"{wrong}") from None


def test_a_scheduled_publish_and_takedown_reach_every_page_through_varnish(edge):
    cache, app = edge
    with app.app_context():
        at = database_now() + timedelta(seconds=4)
        posts.create_post("Coming soon", "coming-soon", "Here at four.", at)
    live(app, "Going away", "going-away", unpublish_at=at)
    cached(cache, *PAGES, "/posts/going-away", "/posts/coming-soon")
    assert shows(cache, "/", "Going away") and not shows(cache, "/", "Coming soon")
    seen_by_readers(cache, "a publish and a takedown at their time", {
        "the new post's page": lambda: cache.read("/posts/coming-soon").status == 200,
        "the old post's page": lambda: cache.read("/posts/going-away").status == 404,
        "the home page": lambda: shows(cache, "/", "Coming soon")
        and not shows(cache, "/", "Going away"),
        "the feed": lambda: shows(cache, "/feed.xml", "Coming soon")
        and not shows(cache, "/feed.xml", "Going away"),
        "the sitemap": lambda: shows(cache, "/sitemap.xml", "/posts/coming-soon")
        and not shows(cache, "/sitemap.xml", "/posts/going-away")})


def test_an_edit_and_a_scheduled_change_reach_every_page_through_varnish(edge):
    cache, app = edge
    post_id = live(app, "First words", "first-words")
    pages = ("/posts/first-words", "/", "/feed.xml")
    cached(cache, *pages)
    with app.app_context():
        current = posts.get_post(post_id)
        posts.update_post(post_id, current.version, None, "Second words", current.slug,
                          current.body)
    seen_by_readers(cache, "an edit of a live post", {
        page: lambda p=page: shows(cache, p, "Second words")
        and not shows(cache, p, "First words") for page in pages})
    cached(cache, *pages)
    with app.app_context():
        posts.schedule_change(post_id, "Third words", "Thrice.",
                              database_now() + timedelta(seconds=2))
    seen_by_readers(cache, "a scheduled change swapped in by the leader", {
        page: lambda p=page: shows(cache, p, "Third words") for page in pages})


def test_a_purger_that_is_down_delays_its_purges_and_loses_none(edge):
    cache, app = edge
    post_id = live(app, "Before the outage", "outage")
    cached(cache, "/posts/outage")
    cache.purges(False)
    try:
        with app.app_context():
            current = posts.get_post(post_id)
            posts.update_post(post_id, current.version, None, "During the outage", current.slug,
                              current.body)
            wait_for(lambda: _refused(post_id), 15, "the purge to be refused and retried")
        page = cache.read("/posts/outage")
        assert page.hit and "Before the outage" in page.body  # the old copy, until purged
    finally:
        cache.purges(True)
    seen_by_readers(cache, "the edit, once the purger is back", {
        "the post's page": lambda: shows(cache, "/posts/outage", "During the outage")})
    with app.app_context():
        wait_for(lambda: not _waiting() or db.session.rollback(), DEADLINE,
                 "every purge to be done")
        assert db.session.scalar(sa.select(sa.func.count()).where(
            CachePurge.status == "failed")) == 0


def _refused(post_id: int) -> bool:
    db.session.rollback()
    return db.session.scalar(sa.select(sa.func.count()).where(
        CachePurge.keys.contains(f"post-{post_id}"), CachePurge.status == "pending",
        CachePurge.last_error.contains("HTTP 503"))) > 0


def _waiting() -> int:
    return db.session.scalar(sa.select(sa.func.count()).where(
        CachePurge.status.in_(("pending", "sending"))))
