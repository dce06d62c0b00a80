"""GET /metrics: who may scrape, and the fleet's gauges as the database has them."""

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, holding, wait_for
from tests.harness.support import Api, AuthActions, new_post, record_term, text
from webapp import posts
from webapp.db import database_now
from webapp.extensions import db
from webapp.models import (
    LeaderEvent,
    LeaderState,
    OutboxEvent,
    Timer,
    WebhookDelivery,
    WebhookEndpoint,
)

SCRAPE_TOKEN = "scrape-" + "x" * 40


def samples(response) -> dict[tuple, float]:
    """Return {(sample name, (label, value)…): value} of a scrape."""
    assert response.status_code == 200, response.get_data(as_text=True)
    found = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for s in family.samples:
            found[(s.name, *sorted(s.labels.items()))] = s.value
    return found


def scrape(api) -> dict[tuple, float]:
    return samples(api.client.get("/metrics", headers={
        "Authorization": f"Bearer {api.tokens['viewer']}"}))


def key_gauges(found: dict, key: str) -> dict[str, float]:
    names = ("soloist_key_has_leader", "soloist_leader_heartbeat_age_seconds",
             "soloist_leader_term", "soloist_key_standbys")
    return {n: found[(n, ("key", key))] for n in names if (n, ("key", key)) in found}


# who may scrape -------------------------------------------------------------------------

@pytest.mark.parametrize("authorization", [None, "Bearer", "Bearer sol_wrong",
                                           f"Basic {SCRAPE_TOKEN}", "Bearer " + "y" * 47])
def test_a_scrape_without_a_valid_token_is_401_with_a_short_text(app, api, authorization):
    app.config["METRICS_TOKEN"] = SCRAPE_TOKEN
    headers = {"Authorization": authorization} if authorization else {}
    response = api.client.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response.mimetype == "text/plain"
    assert "Bearer" in response.get_data(as_text=True)
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("role", ["viewer", "editor", "admin"])
def test_an_api_token_of_any_role_may_scrape(api, role):
    response = api.client.get("/metrics", headers={"Authorization": f"Bearer {api.tokens[role]}"})
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain; version=")
    assert ("soloist_key_has_leader", ("key", "publish")) in samples(response)


def test_the_scrape_token_may_scrape_and_a_signed_in_cookie_may_not(app, client):
    app.config["METRICS_TOKEN"] = SCRAPE_TOKEN
    response = client.get("/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
    assert ("soloist_posts_late",) in samples(response)
    AuthActions(client).login("admin")
    assert client.get("/metrics").status_code == 401  # bearer tokens only, as Prometheus sends


def test_a_revoked_users_token_may_not_scrape(app, api):
    from webapp.accounts.tokens import revoke_tokens
    from webapp.models import User

    with app.app_context():
        user = db.session.scalar(db.select(User).where(User.role == "viewer"))
        revoke_tokens(user, "test")
        db.session.commit()
    assert api.client.get("/metrics", headers={
        "Authorization": f"Bearer {api.tokens['viewer']}"}).status_code == 401


# leadership gauges ----------------------------------------------------------------------

def test_a_key_nobody_ever_led_has_no_leader_and_term_0(api):
    found = scrape(api)
    assert found[("soloist_posts_late_seconds",)] == 0
    assert key_gauges(found, "publish") == {"soloist_key_has_leader": 0, "soloist_leader_term": 0,
                                            "soloist_key_standbys": 0}


def test_a_live_holder_with_a_fresh_heartbeat_leads_and_the_others_stand_by(api, app, pg_url):
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY) as conn, holding(pg_url, "soloist:b:2"), \
            holding(pg_url, "psql"):
        record_term(app, PUBLISH_KEY, conn, term=7, heartbeat_age=0.5)
        found = scrape(api)
    publish = key_gauges(found, "publish")
    assert publish["soloist_key_has_leader"] == 1 and publish["soloist_leader_term"] == 7
    assert 0.5 <= publish["soloist_leader_heartbeat_age_seconds"] < 3
    assert publish["soloist_key_standbys"] == 1  # soloist:b:2, not psql
    assert key_gauges(found, "plugins")["soloist_key_standbys"] == 2
    assert key_gauges(found, "plugins")["soloist_key_has_leader"] == 0


def test_a_holder_frozen_past_the_stale_age_does_not_count_as_a_leader(api, app, pg_url):
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn, term=3, heartbeat_age=30)  # LEADER_STALE_SECONDS 10
        publish = key_gauges(scrape(api), "publish")
    assert publish["soloist_key_has_leader"] == 0
    assert publish["soloist_leader_heartbeat_age_seconds"] >= 30


@pytest.mark.parametrize(("age", "led"), [(3, 1), (30, 0)])
def test_a_killed_holder_counts_as_a_failover_until_its_heartbeat_is_stale(api, app, pg_url,
                                                                          age, led):
    with holding(pg_url, "soloist:a:1", PLUGINS_KEY) as conn:
        record_term(app, PLUGINS_KEY, conn, term=5, heartbeat_age=age)
    plugins = key_gauges(scrape(api), "plugins")  # the session has ended: nobody holds it
    assert (plugins["soloist_key_has_leader"], plugins["soloist_leader_term"]) == (led, 5)


@pytest.mark.parametrize(("ago", "led"), [(2, 1), (60, 0)])
def test_a_key_released_moments_ago_counts_as_a_handover(api, app, ago, led):
    with app.app_context():
        now = database_now()
        db.session.add(LeaderState(key=PUBLISH_KEY, term=4, holder="soloist:a:1",
                                   holder_pid=None, heartbeat_at=None))
        db.session.add(LeaderEvent(key=PUBLISH_KEY, kind="released", term=4,
                                   holder="soloist:a:1", at=now - timedelta(seconds=ago)))
        db.session.commit()
    publish = key_gauges(scrape(api), "publish")
    assert publish == {"soloist_key_has_leader": led, "soloist_leader_term": 4,
                       "soloist_key_standbys": 0}  # no heartbeat age after a clean release


def test_a_holder_that_has_not_recorded_its_term_yet_leads(api, pg_url):
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY):
        assert key_gauges(scrape(api), "publish")["soloist_key_has_leader"] == 1


# work queues ----------------------------------------------------------------------------

def test_posts_timers_deliveries_and_the_outbox_are_counted_per_status(api, app):
    now = datetime.now(UTC)
    new_post(app, "Draft")
    new_post(app, "Soon", status="scheduled", publish_at=now + timedelta(hours=1))
    new_post(app, "Late one", status="scheduled", publish_at=now - timedelta(minutes=2))
    new_post(app, "Late two", status="scheduled", publish_at=now - timedelta(seconds=5))
    live = new_post(app, "Live", status="published", published_at=now)
    with app.app_context():
        timer = {"plugin": "sitemap", "action": "rebuild", "kind": "every", "every": 1,
                 "unit": "hours", "params": {}}
        db.session.add_all([Timer(name="ok", **timer), Timer(name="off", paused=True, **timer),
                            Timer(name="bad", consecutive_failures=2, **timer)])
        endpoint = WebhookEndpoint(url="https://hooks.example.com/", events=["post.published"],
                                   secret="s" * 32)
        db.session.add(endpoint)
        db.session.flush()
        db.session.add_all([
            WebhookDelivery(delivery_id=f"d{n}", endpoint_id=endpoint.id, topic="post.published",
                            body="{}", status=status)
            for n, status in enumerate(["pending", "pending", "failed", "delivered"])])
        db.session.add_all([OutboxEvent(topic="post.published", post_id=live, payload={}),
                            OutboxEvent(topic="post.published", post_id=live, payload={},
                                        processed_at=now)])
        db.session.commit()
    found = scrape(api)
    assert {s: found[("soloist_posts", ("status", s))] for s in
            ("draft", "scheduled", "published", "unpublished")} == {
        "draft": 1, "scheduled": 3, "published": 1, "unpublished": 0}
    assert found[("soloist_posts_late",)] == 2
    assert 120 <= found[("soloist_posts_late_seconds",)] < 130
    assert {s: found[("soloist_timers", ("state", s))] for s in ("active", "failing", "paused")
            } == {"active": 1, "failing": 1, "paused": 1}
    assert {s: found[("soloist_webhook_deliveries", ("status", s))] for s in
            ("pending", "sending", "delivered", "failed")} == {
        "pending": 2, "sending": 0, "delivered": 1, "failed": 1}
    assert {s: found[("soloist_cache_purges", ("status", s))] for s in
            ("pending", "sending", "done", "failed")} == {
        "pending": 0, "sending": 0, "done": 0, "failed": 0}  # no purger configured: none
    assert found[("soloist_outbox_backlog",)] == 1


def test_the_publish_lag_histogram_counts_each_post_the_leader_publishes(api, app):
    before = scrape(api)
    with app.app_context():
        now = database_now()
        for n, seconds in enumerate((0.3, 4.0)):
            new_post(app, f"Due {n}", status="scheduled",
                     publish_at=now - timedelta(seconds=seconds))
        assert len(posts.publish_due(now)) == 2
    after = scrape(api)
    count = ("soloist_publish_lag_seconds_count",)
    assert after[count] - before.get(count, 0) == 2
    added = after[("soloist_publish_lag_seconds_sum",)] - before.get(
        ("soloist_publish_lag_seconds_sum",), 0)
    assert added == pytest.approx(4.3, abs=0.01)
    under_half = ("soloist_publish_lag_seconds_bucket", ("le", "0.5"))
    assert after[under_half] - before.get(under_half, 0) == 1


def test_the_single_host_sqlite_mode_answers_too(sqlite_app):
    sqlite_api = Api(sqlite_app)
    new_post(sqlite_app, "Late", status="scheduled",
             publish_at=datetime.now(UTC) - timedelta(seconds=30))
    found = scrape(sqlite_api)
    assert found[("soloist_posts", ("status", "scheduled"))] == 1
    assert found[("soloist_posts_late",)] == 1 and found[("soloist_posts_late_seconds",)] >= 30
    assert key_gauges(found, "publish")["soloist_key_has_leader"] == 0


def test_a_holder_that_never_records_a_heartbeat_stops_counting_once_it_is_silent(api, app,
                                                                                  pg_url):
    # it took the key (a standby granted it in the lock queue) and froze before recording
    # its term: its age is its session's silence, by the rule standbys evict with
    app.config["LEADER_STALE_SECONDS"] = 0.5
    with holding(pg_url, "soloist:a:1", PUBLISH_KEY):
        assert key_gauges(scrape(api), "publish")["soloist_key_has_leader"] == 1  # just taken
        wait_for(lambda: key_gauges(scrape(api), "publish")["soloist_key_has_leader"] == 0,
                 10, "the silent holder to stop counting as a leader")


BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;"
                     "version=0.0.4;q=0.3,*/*;q=0.1")


def test_a_browser_gets_a_page_saying_what_metrics_is_and_a_scraper_one_line(client):
    """Opened in a browser, /metrics is still a 401, but a page naming Prometheus and how it
    authenticates, not a bare line (issue 37, finding 8)."""
    page = client.get("/metrics", headers={"Accept": BROWSER_ACCEPT})
    assert page.status_code == 401 and page.content_type.startswith("text/html")
    assert page.headers["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert "Metrics for Prometheus" in text(page) and "Authorization: Bearer" in text(page)
    assert "credentials_file" in text(page)
    for accept in (PROMETHEUS_ACCEPT, "*/*", None):
        scraper = client.get("/metrics", headers={"Accept": accept} if accept else {})
        assert scraper.status_code == 401 and scraper.content_type.startswith("text/plain")
        assert text(scraper) == "Send Authorization: Bearer <METRICS_TOKEN or an API token>.\n"
