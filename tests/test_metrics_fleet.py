"""GET /metrics on a real fleet: a failover keeps a leader, workers' histograms add up."""

import os
import signal
import time
import urllib.request
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import cluster
from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, Instance, pid_of, stop_all, wait_for
from tests.harness.support import postgres_or_skip

pytestmark = pytest.mark.slow

SCRAPE_TOKEN = "fleet-scrape-" + "z" * 40
POSTS = 5


@pytest.fixture(scope="module")
def scraped_fleet(tmp_path_factory):
    """Instance a (2 workers, leading both keys) and b (1 worker standing by)."""
    postgres_or_skip()
    url = cluster.migrated_database("soloist_metrics")
    view = cluster.LockView(url)
    tmp = tmp_path_factory.mktemp("metrics")
    started = []
    try:
        a = Instance("a", url, workers=2, log_dir=tmp, METRICS_TOKEN=SCRAPE_TOKEN).start()
        started.append(a)
        wait_for(lambda: len(view.holders()) == 2 and len(view.lock_sessions()) == 1, 60,
                 "a's workers to lead both keys", interval=0.1)
        b = Instance("b", url, workers=1, log_dir=tmp, METRICS_TOKEN=SCRAPE_TOKEN).start()
        started.append(b)
        wait_for(lambda: len(view.lock_sessions()) == 2, 60, "b's worker to stand by",
                 interval=0.1)
        yield SimpleNamespace(view=view, a=a, b=b)
    finally:
        stop_all(started)
        view.close()
        cluster.drop_database(url)


def scrape(instance: Instance) -> dict[tuple, float]:
    """Return {(sample name, (label, value)…): value} as Prometheus would read it."""
    request = urllib.request.Request(f"{instance.url}/metrics",
                                     headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read().decode()
    return {(s.name, *sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def test_publish_lag_counts_every_post_whichever_worker_answers(scraped_fleet):
    fleet = scraped_fleet
    leader = fleet.view.holder(PUBLISH_KEY)
    assert fleet.a.owns(leader), "a, started first, leads the publish key"
    fleet.view.conn.execute(
        "INSERT INTO posts (title, slug, body, status, publish_at, version, created_at, "
        "updated_at) SELECT 'Due ' || g, 'due-' || g, '', 'scheduled', "
        "now() + interval '1 second', 1, now(), now() FROM generate_series(1, %s) g", (POSTS,))
    fleet.view.conn.execute("SELECT pg_notify('soloist_wake', 'publish')")
    wait_for(lambda: fleet.view.query(
        "SELECT count(*) FROM posts WHERE status = 'published'")[0][0] == POSTS, 15,
        "the posts to be published", interval=0.1)
    # the leader counts each post's lag after its commit: wait for the last count
    wait_for(lambda: scrape(fleet.a).get(("soloist_publish_lag_seconds_count",)) == POSTS,
             10, "the leader to count every post's lag", interval=0.1)
    # Freeze the leader's worker: a's other worker answers, from the leader's files.
    os.kill(pid_of(leader), signal.SIGSTOP)
    try:
        found = [scrape(fleet.a) for _ in range(3)]
    finally:
        os.kill(pid_of(leader), signal.SIGCONT)
    for sample in found:
        assert sample[("soloist_publish_lag_seconds_count",)] == POSTS
        assert sample[("soloist_publish_lag_seconds_bucket", ("le", "2.5"))] == POSTS
        assert sample[("soloist_tick_duration_seconds_count", ("key", "publish"))] >= 1
        assert sample[("soloist_posts", ("status", "published"))] == POSTS
    assert scrape(fleet.b).get(("soloist_publish_lag_seconds_count",), 0) == 0  # b's own


def test_killing_the_leader_keeps_has_leader_at_1_and_the_term_goes_up_within_2_s(scraped_fleet):
    fleet = scraped_fleet

    def gauges(key: str) -> tuple[float, float]:
        sample = scrape(fleet.b)
        return (sample[("soloist_key_has_leader", ("key", key))],
                sample[("soloist_leader_term", ("key", key))])

    assert gauges("publish")[0] == gauges("plugins")[0] == 1
    before = gauges("publish")[1]
    victim = fleet.view.holder(PUBLISH_KEY)
    seen: list[tuple[float, float, float]] = []

    def term_went_up() -> bool:
        led, term = gauges("publish")
        seen.append((time.monotonic() - killed, led, term))
        return term > before

    os.kill(pid_of(victim), signal.SIGKILL)
    killed = time.monotonic()
    wait_for(term_went_up, 2.0, "soloist_leader_term to go up after SIGKILL", interval=0.05)
    for _ in range(10):  # and a little after the new term began
        term_went_up()
    assert len(seen) >= 10 and all(led == 1 for _t, led, _term in seen), seen
    assert fleet.view.holder(PUBLISH_KEY) not in (None, victim)
    assert gauges("plugins")[0] == 1 and PLUGINS_KEY in fleet.view.holders()
