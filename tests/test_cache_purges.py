"""Every change readers see is purged from each cache once, from the outbox, like a webhook:
one row per purger per event, batched, hard for a takedown, fenced, retried, and a dead
purger delays only itself."""

import logging
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from tests.harness.cache_apis import TOKEN, CacheAPI
from tests.harness.cluster import free_port
from tests.harness.support import new_post
from webapp.extensions import db
from webapp.leadership.fence import Lead
from webapp.leadership.keys import PLUGINS
from webapp.models import CachePurge, LeaderState, OutboxEvent
from webapp.plugins import purge_sends, purges
from webapp.scheduling import delivery_tick, plugin_due

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)
DEAD = f"varnish+http://127.0.0.1:{free_port()}"  # nothing listens there


def event(topic: str, post_id: int | None = 7, slug: str = "hello", at: datetime = T0,
          real: bool = False) -> int:
    """Write an outbox event about post_id (real: a posts row exists, else the payload only)."""
    row = OutboxEvent(topic=topic, created_at=at, post_id=post_id if real else None,
                      payload={"post_id": post_id, "slug": slug, "title": "Hello"},
                      dedupe_key=f"{topic}:{post_id}:{slug}:{at.isoformat()}")
    db.session.add(row)
    db.session.commit()
    return row.id


def rows(purger: str | None = None) -> list[CachePurge]:
    db.session.rollback()
    query = sa.select(CachePurge).order_by(CachePurge.id)
    return list(db.session.scalars(query if purger is None else
                                   query.where(CachePurge.purger == purger)))


def send(name: str, at: datetime = T0, lead: Lead | None = None) -> dict:
    return purge_sends.send_purger(name, lead or Lead(), lambda: at, 30)


def varnish(cache_api: CacheAPI) -> str:
    return "varnish+http://" + cache_api.url.removeprefix("http://")


def test_each_event_readers_see_is_queued_once_for_each_purger_hard_only_for_a_takedown(
        app, cache_api):
    app.config["CACHE_PURGE"] = [varnish(cache_api), "purge+" + cache_api.url]
    with app.app_context():
        event("post.published")
        event("post.unpublished", at=T0 + timedelta(seconds=1))
        event("post.updated", at=T0 + timedelta(seconds=2))
        event("ops.no_leader", post_id=None)  # not something readers see
        delivery_tick.fan_out(T0, set())
        delivery_tick.fan_out(T0, set())  # a second leader's fan-out adds nothing
        found = [(r.purger.split(":")[0], r.topic, r.keys, r.hard) for r in rows()]
    assert found == [
        ("varnish+http", "post.published", "post-7 home feed sitemap", False),
        ("purge+http", "post.published", "/posts/hello / /?page=2 /feed.xml /sitemap.xml",
         False),
        ("varnish+http", "post.unpublished", "post-7 home feed sitemap", True),
        ("purge+http", "post.unpublished", "/posts/hello / /?page=2 /feed.xml /sitemap.xml",
         True),
        ("varnish+http", "post.updated", "post-7", False),
        ("purge+http", "post.updated", "/posts/hello", False)]


def test_a_slug_change_purges_the_lists_too(app, cache_api):
    app.config["CACHE_PURGE"] = [varnish(cache_api)]
    post_id = new_post(app, "Hello", status="published")
    with app.app_context():
        event("post.published", post_id, real=True)
        event("post.updated", post_id, at=T0 + timedelta(seconds=1), real=True)
        event("post.updated", post_id, slug="renamed", at=T0 + timedelta(seconds=2), real=True)
        delivery_tick.fan_out(T0, set())
        lists = f"post-{post_id} home feed sitemap"
        assert [r.keys for r in rows()] == [lists, f"post-{post_id}", lists]


def test_a_slug_change_purges_the_old_address_too_where_a_purge_names_paths(app, cache_api):
    app.config["CACHE_PURGE"] = ["purge+" + cache_api.url]
    post_id = new_post(app, "Hello", status="published")
    with app.app_context():
        event("post.published", post_id, real=True)
        event("post.updated", post_id, slug="renamed", at=T0 + timedelta(seconds=1), real=True)
        delivery_tick.fan_out(T0, set())
        assert rows()[1].keys == "/posts/renamed /posts/hello / /?page=2 /feed.xml /sitemap.xml"


def test_a_plain_purge_names_every_page_of_the_home_one_past_the_last(app, cache_api):
    app.config["CACHE_PURGE"] = ["purge+" + cache_api.url]
    for n in range(41):  # three pages of 20
        new_post(app, f"Post {n}", status="published")
    with app.app_context():
        event("site.settings", post_id=None)
        delivery_tick.fan_out(T0, set())
        assert rows()[0].keys == "/ /?page=2 /?page=3 /?page=4"


def test_a_removed_file_is_purged_hard_every_width(app, cache_api):
    """Its widths are cached for a year (immutable): the removal purges them, by key or path."""
    from tests.harness import media_files
    from webapp.media import store

    app.config["CACHE_PURGE"] = [varnish(cache_api), "purge+" + cache_api.url]
    with app.app_context():
        row, _ = store.upload(media_files.jpeg((1200, 800)), "gull.jpg", "A gull", 10**7, None)
        sha, ext = row.sha256, row.ext
        store.delete_file(row.id)
        delivery_tick.fan_out(T0, set())
        keyed, plain = rows()
    assert (keyed.topic, keyed.keys, keyed.hard) == ("media.deleted", f"media-{sha[:32]}", True)
    assert f"/media/{sha}/orig.{ext}" in plain.keys.split()
    assert f"/media/{sha}/960.{ext}" in plain.keys.split() and plain.hard
    assert f"/media/{sha}/960.webp" in plain.keys.split()  # its WebP copies too


def test_the_sitemap_is_purged_again_once_its_plugin_stored_a_new_list(app, cache_api):
    """The post's own purge can come before the plugin's rebuild: a reader between them
    caches the old list, so the rebuild purges `sitemap` again, and only when it changed."""
    from webapp.plugins import sitemap

    app.config["CACHE_PURGE"] = [varnish(cache_api)]
    new_post(app, "Hello", status="published")
    with app.app_context():
        sitemap.rebuild(T0)
        sitemap.rebuild(T0 + timedelta(minutes=15))  # the timer: nothing changed
        delivery_tick.fan_out(T0, set())
        assert [(r.topic, r.keys) for r in rows()] == [("sitemap.built", "sitemap")]


def test_several_events_go_in_one_request_hard_if_any_is_a_takedown(app, cache_api):
    app.config["CACHE_PURGE"] = [varnish(cache_api)]
    with app.app_context():
        event("post.updated", post_id=1)
        event("post.updated", post_id=2)
        delivery_tick.fan_out(T0, set())
        assert send(purges.purgers_due(T0, Lead(), app.config["CACHE_PURGE"])[0]) == {
            "done": 2, "retrying": 0, "failed": 0, "stale": 0}
        event("post.published", post_id=3, at=T0 + timedelta(seconds=1))
        event("post.unpublished", post_id=4, at=T0 + timedelta(seconds=1))
        delivery_tick.fan_out(T0, set())
        send(varnish(cache_api), T0 + timedelta(seconds=1))
        assert {r.status for r in rows()} == {"done"}
    soft, hard = cache_api.requests
    assert soft.headers["xkey-softpurge"] == "post-1 post-2" and "xkey-purge" not in soft.headers
    assert hard.headers["xkey-purge"] == "post-3 home feed sitemap post-4"


def test_a_dead_purger_delays_only_itself_and_is_retried_every_few_seconds(app, cache_api):
    app.config["CACHE_PURGE"] = [DEAD, varnish(cache_api)]
    with app.app_context():
        event("post.published")
        delivery_tick.fan_out(T0, set())
        assert purges.purgers_due(T0, Lead(), app.config["CACHE_PURGE"]) == sorted(
            app.config["CACHE_PURGE"])
        assert send(DEAD)["retrying"] == 1
        assert send(varnish(cache_api))["done"] == 1
        [dead] = rows(DEAD)
        assert dead.status == "pending" and dead.attempts == 1
        assert "could not be reached" in dead.last_error
        assert dead.next_attempt_at > T0  # not tried again at once: no busy loop
        # nor after a growing back-off: a cache that comes back is purged within seconds
        again = dead.next_attempt_at
        assert send(DEAD, again)["retrying"] == 1
        assert rows(DEAD)[0].next_attempt_at == again + timedelta(seconds=5)
        ahead = plugin_due.look(T0, Lead(), set())
        assert ahead.wake == dead.next_attempt_at and ahead.idle(T0)
        assert purges.purgers_due(T0, Lead(), app.config["CACHE_PURGE"]) == []


def test_a_purge_older_than_the_caches_lifetime_is_given_up_its_copies_expired(app):
    app.config["CACHE_PURGE"] = [DEAD]
    with app.app_context():
        event("post.published", at=T0 - timedelta(days=2))
        delivery_tick.fan_out(T0, set())
        assert send(DEAD)["retrying"] == 1  # counted as tried; the row is failed, not retried
        [row] = rows(DEAD)
        assert row.status == "failed" and "could not be reached" in row.last_error


def test_a_rate_limit_is_waited_out_as_the_api_asks_then_the_purge_is_done(app, cache_api):
    app.config.update(CACHE_PURGE=["fastly://SVC123"], FASTLY_API_TOKEN=TOKEN,
                      FASTLY_API_URL=cache_api.url)
    cache_api.limited, cache_api.retry_after = 1, 120
    with app.app_context():
        event("post.published")
        delivery_tick.fan_out(T0, set())
        assert send("fastly://SVC123")["retrying"] == 1
        [row] = rows()
        assert row.next_attempt_at >= T0 + timedelta(seconds=120)
        assert "HTTP 429" in row.last_error
        assert send("fastly://SVC123", T0 + timedelta(seconds=60))["done"] == 0
        assert send("fastly://SVC123", T0 + timedelta(seconds=121))["done"] == 1
    [done] = cache_api.requests
    assert done.path == "/service/SVC123/purge"
    assert done.headers["Surrogate-Key"] == "post-7 home feed sitemap"
    assert done.headers["Fastly-Soft-Purge"] == "1"


def lead(now: Lead) -> None:
    state = db.session.get(LeaderState, PLUGINS.value) or LeaderState(key=PLUGINS.value)
    state.term, state.holder, state.acquired_at, state.holder_pid = now.term, now.holder, T0, 1
    db.session.add(state)
    db.session.commit()


def test_a_purge_claimed_under_an_ended_leadership_is_not_sent_but_handed_back(app, cache_api):
    app.config["CACHE_PURGE"] = [varnish(cache_api)]
    old, new = Lead(4, "soloist:web.1:7:oldnonce:abcdef"), Lead(5, "soloist:web.2:7:newone:x")
    with app.app_context():
        event("post.unpublished")
        delivery_tick.fan_out(T0, set())
        lead(old)
        batch = purges.claim(varnish(cache_api), T0, old)
        assert purges.claim(varnish(cache_api), T0, old) is None  # claimed once
        lead(new)  # old was deposed between its claim and its purge
        assert purges.still_held(batch, T0) == []
        [row] = rows()
        assert (row.status, row.attempts, row.claim) == ("pending", 0, "")
        assert send(varnish(cache_api), lead=new)["done"] == 1
    assert len(cache_api.requests) == 1


def test_a_purger_that_keeps_failing_raises_an_alert_and_its_token_is_never_shown(
        app, cache_api, caplog):
    app.config.update(CACHE_PURGE=["fastly://SVC123"], FASTLY_API_TOKEN=TOKEN,
                      FASTLY_API_URL=cache_api.url)
    cache_api.down = True
    caplog.set_level(logging.DEBUG)
    with app.app_context():
        event("post.published")
        delivery_tick.fan_out(T0, set())
        at = T0
        for _ in range(purges.FAILING_AFTER):
            send("fastly://SVC123", at)
            at = rows()[0].next_attempt_at
        alert = db.session.scalar(sa.select(OutboxEvent).where(
            OutboxEvent.topic == "ops.purge_failing"))
        assert alert.payload["purger"] == "fastly://SVC123"
        assert "HTTP 503" in alert.payload["last_error"]
        shown = " ".join([caplog.text, rows()[0].last_error, str(alert.payload)])
    assert TOKEN not in shown


def one_done_one_waiting(app, cache_api) -> None:
    """Purge one publication through a live purger and a dead one, 2 s after it."""
    app.config["CACHE_PURGE"] = [varnish(cache_api), DEAD]
    with app.app_context():
        event("post.published")
        delivery_tick.fan_out(T0, set())
        send(varnish(cache_api), T0 + timedelta(seconds=2))
        send(DEAD, T0 + timedelta(seconds=2))


def test_the_status_of_each_purger_shows_its_last_success_and_what_waits(app, cache_api):
    one_done_one_waiting(app, cache_api)
    with app.app_context():
        live, dead = sorted(purge_sends.health(app.config["CACHE_PURGE"]),
                            key=lambda h: h.name != varnish(cache_api))
    assert live.last_done == T0 + timedelta(seconds=2) and live.lag_seconds == 2.0
    assert live.waiting == 0 and dead.waiting == 1 and dead.last_done is None
    assert dead.behind(T0 + timedelta(seconds=10)) == 10.0
    assert "could not be reached" in dead.last_error


def test_the_status_page_shows_each_purger_and_what_waits_for_a_dead_one(app, cache_api, auth):
    one_done_one_waiting(app, cache_api)
    page = auth.client("viewer").get("/status/").get_data(as_text=True)
    section = page[page.index('id="purges"'):]
    assert varnish(cache_api) in section and DEAD in section
    assert "2.0 s after its change" in section  # the live one's last purge and its lag
    assert "could not be reached" in section  # the dead one's error, in words
    assert 'class="stale">1' in section  # one waiting for it, long past a minute


def test_the_status_page_says_when_no_purger_is_configured(app, auth):
    page = auth.client("viewer").get("/status/").get_data(as_text=True)
    assert "No purger configured" in page[page.index('id="purges"'):]


def test_metrics_count_the_purges_per_status(app, cache_api):
    from webapp.ops.metrics import exposition

    one_done_one_waiting(app, cache_api)
    with app.app_context():
        body = exposition()[0].decode()
    assert 'soloist_cache_purges{status="done"} 1.0' in body
    assert 'soloist_cache_purges{status="pending"} 1.0' in body  # the dead purger's


def test_new_site_settings_purge_every_page_and_reach_no_webhook_or_hook(app, cache_api):
    from webapp.models import HookDelivery, WebhookDelivery
    from webapp.plugins.endpoints import create_webhook
    from webapp.site import state

    app.config["CACHE_PURGE"] = [varnish(cache_api)]
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True
    with app.app_context():
        create_webhook(cache_api.url + "/hook", ["post.published", "post.unpublished"], "s" * 32)
        state.save_settings("The Daily Once", "")
        delivery_tick.fan_out(T0, {"webhooks", "sitemap", "housekeeping"})
        [purge] = rows()
        assert (purge.topic, purge.keys, purge.hard) == ("site.settings", "site", False)
        assert db.session.scalar(sa.select(sa.func.count(WebhookDelivery.id))) == 0
        assert db.session.scalar(sa.select(sa.func.count(HookDelivery.id))) == 0
        assert db.session.scalar(sa.select(sa.func.count(OutboxEvent.id)).where(
            OutboxEvent.processed_at.is_(None))) == 0  # fanned out, not left waiting
