"""Releases: many changes go live as one, in one transaction, exactly once, never early,
fenced like a publication, held by a freeze, with one release.published event and one purge."""

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.support import new_post, race_two
from webapp import posts
from webapp.extensions import db
from webapp.leadership.keys import PUBLISH
from webapp.models import (
    CachePurge,
    LeaderState,
    OutboxEvent,
    Post,
    PostRevision,
    Release,
    WebhookDelivery,
    WebhookEndpoint,
)
from webapp.ops import freezes
from webapp.plugins import endpoints
from webapp.posts.releases import ItemSpec, ReleaseError
from webapp.scheduling import delivery_tick, publish
from webapp.site import state

AT = datetime(2031, 6, 1, 9, 0, tzinfo=UTC)


def drafts(app, n: int, prefix: str = "d", status: str = "draft") -> list[int]:
    """Insert n posts in status at once; return their ids."""
    with app.app_context():
        ids = db.session.scalars(sa.insert(Post).returning(Post.id), [
            {"title": f"{prefix} {i}", "slug": f"{prefix}-{i}", "body": "text",
             "status": status, "version": 1,
             **({"published_at": AT - timedelta(days=1)} if status == "published" else {})}
            for i in range(n)]).all()
        db.session.commit()
        return list(ids)


def release_of(app, specs: list[ItemSpec], at: datetime = AT, name: str = "Launch") -> int:
    with app.app_context():
        return posts.releases.create_release(name, at, specs).id


def topics(app) -> dict[str, int]:
    with app.app_context():
        return dict(db.session.execute(sa.select(OutboxEvent.topic, sa.func.count())
                                       .group_by(OutboxEvent.topic)).all())


def statuses(app, ids: list[int]) -> set[str]:
    with app.app_context():
        return set(db.session.scalars(sa.select(Post.status).where(Post.id.in_(ids))))


def test_a_thousand_items_go_live_in_one_transaction_never_early_and_once(app, pg_url):
    ids = drafts(app, 1000)
    release_id = release_of(app, [ItemSpec("publish", i) for i in ids])
    seen: set[int] = set()
    stop = threading.Event()

    def read() -> None:  # another client, polling what readers would see
        with psycopg.connect(pg_url, autocommit=True) as conn:
            while not stop.is_set():
                seen.add(conn.execute("SELECT count(*) FROM posts WHERE status = 'published'")
                         .fetchone()[0])

    reader = threading.Thread(target=read)
    reader.start()
    try:
        with app.app_context():
            assert publish.tick(AT - timedelta(milliseconds=1)) == AT  # it sleeps until then
            assert statuses(app, ids) == {"draft"}
            publish.tick(AT + timedelta(milliseconds=20))
    finally:
        stop.set()
        reader.join(10)
    assert statuses(app, ids) == {"published"}
    assert seen <= {0, 1000} and 1000 in seen  # all or none, never half a launch
    assert topics(app) == {"post.published": 1000, "release.published": 1}
    with app.app_context():
        assert publish.tick(AT + timedelta(seconds=5)) is None  # nothing again
        release = db.session.get(Release, release_id)
        assert release.status == "published" and release.published_at == AT + timedelta(
            milliseconds=20)
        assert len(release.result["published"]) == 1000 and release.result["skipped"] == []
    assert topics(app) == {"post.published": 1000, "release.published": 1}


def _apply(url: str, when: datetime, barrier, results) -> None:
    """Child process: apply due releases until none is left."""
    from tests.harness.support import make_app

    app = make_app(url)
    done: list[int] = []
    with app.app_context():
        barrier.wait(timeout=30)
        while batch := posts.apply_due_releases(when):
            done.extend(batch)
        db.engine.dispose()
    results.put(done)


def test_two_leaders_applying_at_once_apply_each_release_once(app, pg_url):
    first = release_of(app, [ItemSpec("publish", i) for i in drafts(app, 50, "a")])
    second = release_of(app, [ItemSpec("publish", i) for i in drafts(app, 50, "b")],
                        AT + timedelta(seconds=1))
    done = race_two(_apply, pg_url, AT + timedelta(seconds=2))
    assert sorted(done[0] + done[1]) == [first, second]
    assert topics(app) == {"post.published": 100, "release.published": 2}


def test_a_deposed_leader_cannot_apply_a_release(app):
    ids = drafts(app, 3)
    release_of(app, [ItemSpec("publish", i) for i in ids])
    with app.app_context():
        db.session.add(LeaderState(key=PUBLISH.value, term=7, holder="soloist:new:1:x",
                                   holder_pid=4242))
        db.session.commit()
        assert posts.apply_due_releases(AT, holder="soloist:old:1:y", term=6) == []
        assert statuses(app, ids) == {"draft"}
        assert len(posts.apply_due_releases(AT, holder="soloist:new:1:x", term=7)) == 1
    assert statuses(app, ids) == {"published"}


def test_a_publishing_freeze_holds_a_release_until_resumed(app):
    ids = drafts(app, 3)
    release_id = release_of(app, [ItemSpec("publish", i) for i in ids])
    with app.app_context():
        freezes.freeze("publishing", "legal review", "publish", "ops@example.com")
        publish.tick(AT + timedelta(minutes=1))
        assert statuses(app, ids) == {"draft"}
        done = freezes.resume("publishing", posts.hold_due, now=AT + timedelta(minutes=1),
                              came_due=posts.came_due, releases_due=posts.releases.came_due)
        assert done.released_releases == [(release_id, "Launch")] and done.held_releases == []
        publish.tick(AT + timedelta(minutes=2))
    assert statuses(app, ids) == {"published"}


def test_a_release_due_in_a_freeze_that_holds_waits_for_a_new_time(app, auth):
    """A freeze's "hold" keeps back what came due, releases as posts: none goes on resume."""
    ids = drafts(app, 2)
    release_id = release_of(app, [ItemSpec("publish", i) for i in ids])
    during = AT + timedelta(minutes=1)
    with app.app_context():
        freezes.freeze("publishing", "legal review", "hold", "ops@example.com")
        done = freezes.resume("publishing", posts.hold_due, now=during,
                              came_due=posts.came_due, hold_releases=posts.releases.hold_due)
        assert done.held_releases == [(release_id, "Launch")]
        publish.tick(during + timedelta(minutes=1))
        assert db.session.get(Release, release_id).status == "held"
    assert statuses(app, ids) == {"draft"}
    page = auth.client("editor").get(f"/admin/releases/{release_id}")
    assert "Held: it came due" in page.get_data(as_text=True)
    later = AT + timedelta(hours=1)
    with app.app_context():
        release = db.session.get(Release, release_id)
        posts.releases.update_release(release_id, "Launch", later, release.version)
        assert db.session.get(Release, release_id).status == "scheduled"
        publish.tick(later)
    assert statuses(app, ids) == {"published"}


def test_every_kind_of_item_goes_with_its_own_event_and_the_release_purges_once(
        app, cache_api):
    app.config["CACHE_PURGE"] = ["varnish+http://" + cache_api.url.removeprefix("http://")]
    new, old = drafts(app, 2, "new"), drafts(app, 1, "old", "published")
    live = new_post(app, "Prices", status="published", body="40 euros",
                    published_at=AT - timedelta(days=1))
    release_id = release_of(app, [
        ItemSpec("publish", new[0]), ItemSpec("publish", new[1]), ItemSpec("unpublish", old[0]),
        ItemSpec("change", live, title="Prices", body="30 euros"),
        ItemSpec("settings", site_name="Spring", site_description="Now open")])
    with app.app_context():
        publish.tick(AT)
        assert state.current().name == "Spring"
        assert db.session.get(Post, live).body == "30 euros"
        revision = db.session.scalars(sa.select(PostRevision).where(
            PostRevision.post_id == live)).one()
        assert (revision.reason, revision.was_live) == ("change", True)
        event = db.session.scalars(sa.select(OutboxEvent).where(
            OutboxEvent.topic == "release.published")).one()
        assert event.payload["release_id"] == release_id
        assert (event.payload["published"], event.payload["unpublished"],
                event.payload["changed"], event.payload["settings"]) == (
            sorted(new), old, [live], True)
        delivery_tick.fan_out(AT, set())
        purges = list(db.session.scalars(sa.select(CachePurge)))
    assert topics(app) == {"post.published": 2, "post.unpublished": 1, "post.updated": 1,
                           "site.settings": 1, "release.published": 1}
    assert statuses(app, new) == {"published"} and statuses(app, old) == {"unpublished"}
    # one purge for the whole release (the settings: every page), hard for the takedown
    assert [(p.topic, p.keys, p.hard) for p in purges] == [("release.published", "site", True)]


def test_a_release_without_settings_purges_its_posts_and_the_lists_in_one_request(
        app, cache_api):
    app.config["CACHE_PURGE"] = ["purge+" + cache_api.url]
    ids = drafts(app, 3)
    release_of(app, [ItemSpec("publish", i) for i in ids])
    with app.app_context():
        publish.tick(AT)
        delivery_tick.fan_out(AT, set())
        purges = list(db.session.scalars(sa.select(CachePurge)))
    assert len(purges) == 1
    paths = purges[0].keys.split()
    assert {"/posts/d-0", "/posts/d-1", "/posts/d-2", "/", "/feed.xml", "/sitemap.xml"} <= set(
        paths)


def test_what_no_longer_fits_when_it_goes_is_skipped_and_said(app):
    ids = drafts(app, 2)
    release_id = release_of(app, [ItemSpec("publish", i) for i in ids])
    with app.app_context():
        posts.publish_now(ids[0])  # an editor could not wait
        publish.tick(AT)
        release = db.session.get(Release, release_id)
        assert release.result["published"] == [ids[1]]
        assert release.result["skipped"] == [
            {"post_id": ids[0], "kind": "publish", "why": "live already"}]
    assert topics(app)["post.published"] == 2  # the editor's, and the release's one


@pytest.mark.parametrize(("name", "at", "specs", "field"), [
    ("", AT, [], "name"),
    ("Launch", datetime(2020, 1, 1, tzinfo=UTC), [], "release_at"),
    ("Launch", AT, [ItemSpec("dance", 1)], "items[0].kind"),
    ("Launch", AT, [ItemSpec("publish", 999_999)], "items[0].post_id"),
    ("Launch", AT, [ItemSpec("settings", site_name="x" * 101)], "items[0].site_name"),
])
def test_a_bad_release_is_refused_naming_the_field_and_nothing_is_saved(app, name, at, specs,
                                                                        field):
    with app.app_context():
        with pytest.raises(ReleaseError) as refused:
            posts.releases.create_release(name, at, specs)
        assert field in refused.value.errors
        assert db.session.scalar(sa.select(sa.func.count(Release.id))) == 0


def test_a_post_is_in_a_release_once_and_only_a_live_post_is_taken_down(app):
    draft, = drafts(app, 1)
    with app.app_context():
        with pytest.raises(ReleaseError) as twice:
            posts.releases.create_release("L", AT, [ItemSpec("publish", draft),
                                                    ItemSpec("change", draft, "T", "B")])
        assert "in this release already" in twice.value.errors["items[1].post_id"]
        with pytest.raises(ReleaseError) as down:
            posts.releases.create_release("L", AT, [ItemSpec("unpublish", draft)])
        assert "not live" in down.value.errors["items[0].post_id"]


def test_a_release_is_edited_until_it_goes_then_read_only(app):
    ids = drafts(app, 2)
    release_id = release_of(app, [ItemSpec("publish", ids[0])])
    with app.app_context():
        item = posts.releases.add_item(release_id, ItemSpec("publish", ids[1]), version=1)
        with pytest.raises(ReleaseError, match="Someone else changed"):
            posts.releases.add_item(release_id, ItemSpec("publish", ids[1]), version=1)
        posts.releases.remove_item(release_id, item.id)
        later = AT + timedelta(hours=1)
        posts.releases.update_release(release_id, "Renamed", later)
        publish.tick(AT + timedelta(minutes=1))
        assert statuses(app, ids) == {"draft"}  # moved: not early
        publish.tick(later)
        assert statuses(app, ids[:1]) == {"published"} and statuses(app, ids[1:]) == {"draft"}
        with pytest.raises(ReleaseError, match="went live"):
            posts.releases.update_release(release_id, "Again", later + timedelta(hours=1))
        with pytest.raises(ReleaseError, match="went live"):
            posts.releases.cancel_release(release_id)


def test_a_cancelled_release_never_goes(app):
    ids = drafts(app, 2)
    release_id = release_of(app, [ItemSpec("publish", i) for i in ids])
    with app.app_context():
        posts.releases.cancel_release(release_id)
        assert publish.tick(AT + timedelta(minutes=1)) is None
    assert statuses(app, ids) == {"draft"} and "release.published" not in topics(app)


def test_webhooks_offer_release_published():
    assert "release.published" in endpoints.TOPICS


def test_a_release_goes_on_sqlite_too(sqlite_app):
    ids = drafts(sqlite_app, 3)
    live = new_post(sqlite_app, "Prices", status="published", body="40 euros",
                    published_at=AT - timedelta(days=1))
    release_of(sqlite_app, [*(ItemSpec("publish", i) for i in ids),
                            ItemSpec("change", live, title="Prices", body="30 euros")])
    with sqlite_app.app_context():
        assert publish.tick(AT - timedelta(seconds=1)) == AT
        assert publish.tick(AT) is None
        assert db.session.get(Post, live).body == "30 euros"
    assert statuses(sqlite_app, ids) == {"published"}
    assert topics(sqlite_app) == {"post.published": 3, "post.updated": 1, "release.published": 1}


def test_an_endpoint_subscribed_to_releases_gets_one_delivery_for_the_whole_release(app):
    ids = drafts(app, 5)
    release_of(app, [ItemSpec("publish", i) for i in ids])
    with app.app_context():
        db.session.add(WebhookEndpoint(url="http://127.0.0.1:9/hook", secret="s" * 32,
                                       events=["release.published"]))
        db.session.commit()
        publish.tick(AT)
        delivery_tick.fan_out(AT, {"webhooks"})
        sent = list(db.session.scalars(sa.select(WebhookDelivery)))
    assert [d.topic for d in sent] == ["release.published"]
    assert '"release_id"' in sent[0].body and "Launch" in sent[0].body
