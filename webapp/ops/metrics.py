"""Prometheus metrics: fleet-wide gauges read from the database, per-process histograms.

Any instance answers a scrape for the whole fleet: the gauges (who leads each key,
posts, timers, deliveries, the outbox) are read from the database at scrape time by
FleetCollector, in five statements. The histograms (publish lag, tick duration)
are this instance's: under gunicorn they live in PROMETHEUS_MULTIPROC_DIR (set by
webapp/gunicorn_conf.py) and a scrape adds up every worker's files; without it
(flask run, tests) the process's own values are served.

soloist_key_has_leader is 1 when the key is being led or a failover is under way:
a process holds the lock and its heartbeat is at most LEADER_STALE_SECONDS old
(or it has just taken the key and not yet recorded its term), or nobody holds the
lock but the last holder showed life (a heartbeat, or a recorded release, loss or
eviction) at most LEADER_STALE_SECONDS ago. It is 0 for a holder frozen past that
age (it does no work until a standby evicts it) and for a key nobody has led for
that long. A killed leader's standby takes over within FOLLOWER_POLL_SECONDS, so a
failover never shows as 0.
"""

from collections.abc import Iterable, Iterator
from datetime import datetime
from functools import cache
from typing import NamedTuple

import sqlalchemy as sa
from flask import current_app
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from ..extensions import db
from ..leadership import current_view
from ..leadership.base import LockSession, is_stale
from ..leadership.keys import KEYS, SchedulerKey
from ..leadership.status import holder_ages
from ..models import (
    CachePurge,
    LeaderEvent,
    LeaderState,
    OutboxEvent,
    Post,
    Timer,
    WebhookDelivery,
)


class Histograms(NamedTuple):
    """This process's histograms (see _histograms)."""

    publish_lag: Histogram
    tick_duration: Histogram


@cache
def _histograms() -> Histograms:
    """Return the publish lag and tick duration histograms, made on first use.

    Not at import: under gunicorn a histogram's values are files named after the process
    that made them, and the master imports this module (webapp/gunicorn_conf.py) before it
    forks; each worker makes its own when it first observes or serves a scrape.
    """
    publish_lag = Histogram(
        "soloist_publish_lag_seconds",
        "Seconds from a post's publish_at to its publication by the publish leader.",
        buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        registry=None,  # added to each scrape's registry (or read from the workers' files)
    )
    tick_duration = Histogram(
        "soloist_tick_duration_seconds",
        "Seconds one tick of a scheduler key's leader took.",
        ["key"],
        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        registry=None,
    )
    return Histograms(publish_lag, tick_duration)


TIMER_STATES = ("active", "failing", "paused")
DELIVERY_STATUSES = ("pending", "sending", "delivered", "failed")
PURGE_STATUSES = ("pending", "sending", "done", "failed")


def observe_publish_lags(lags: Iterable[float]) -> None:
    """Record the lag of each post the publish leader just published."""
    for lag in lags:
        _histograms().publish_lag.observe(max(lag, 0.0))


def observe_tick(key: str, seconds: float) -> None:
    """Record how long one tick of key took."""
    _histograms().tick_duration.labels(key=key).observe(seconds)


def exposition() -> tuple[bytes, str]:
    """Return the whole scrape in the Prometheus text format, and its content type."""
    registry = CollectorRegistry()
    registry.register(FleetCollector(current_app.config["LEADER_STALE_SECONDS"]))
    histograms = _histograms()  # so a scrape shows them before the first observation
    path = current_app.config["PROMETHEUS_MULTIPROC_DIR"]
    if path:
        MultiProcessCollector(registry, path)  # every worker's histograms, added up
    else:
        for histogram in histograms:
            registry.register(histogram)
    body = generate_latest(registry)
    db.session.rollback()  # end the read transaction before the body goes out
    return body, CONTENT_TYPE_LATEST


class FleetCollector:
    """The fleet's gauges, read from the database each time Prometheus scrapes."""

    def __init__(self, stale_seconds: float) -> None:
        self.stale_seconds = stale_seconds

    def collect(self) -> Iterator[Metric]:
        """Read leadership and the work queues now; yield one family per gauge."""
        view = current_view()
        now = view.now()
        sessions = view.sessions([k.value for k in KEYS.values()])
        states = _leader_states()
        ages = {key: age.seconds for key, age in
                holder_ages(view.mode, sessions, states, now).items()}
        yield from leader_families(now, sessions, states, self.stale_seconds, ages)
        yield from queue_families(_queue_counts(now))
        yield _oldest_late(now)


def _leader_states() -> dict[int, sa.Row]:
    """Return each key's term, holder, heartbeat and the time of its last recorded change."""
    last_event = (sa.select(sa.func.max(LeaderEvent.at))
                  .where(LeaderEvent.key == LeaderState.key).scalar_subquery())
    rows = db.session.execute(sa.select(
        LeaderState.key, LeaderState.term, LeaderState.holder_pid, LeaderState.heartbeat_at,
        last_event.label("last_event_at")))
    return {row.key: row for row in rows}


def has_leader(holding: LockSession | None, state: sa.Row | None, now: datetime,
               stale: float, age: float | None = None) -> bool:
    """Return whether key is led, or a failover is under way (see the module's docstring).

    A holder is judged by age, its silence by the rule its eviction uses (its heartbeat,
    else what its lock session last did): one that never records a heartbeat is not led
    for ever. None: its session's activity cannot be read (another role's), so it counts.
    """
    if holding is not None:
        return age is None or not is_stale(age, stale)
    if state is None:
        return False
    signs = [state.heartbeat_at, state.last_event_at]  # a killed holder's last heartbeat,
    # or a release, loss or eviction
    latest = max((t for t in signs if t is not None), default=None)
    return latest is not None and not is_stale((now - latest).total_seconds(), stale)


def leader_families(now: datetime, sessions: list[LockSession], states: dict[int, sa.Row],
                    stale: float, ages: dict[int, float | None]) -> Iterator[Metric]:
    """Yield the per-key leadership gauges."""
    led = GaugeMetricFamily("soloist_key_has_leader", "1 if the key is led or a failover is "
                            "under way (a holder or its last sign of life within "
                            "LEADER_STALE_SECONDS), else 0.", labels=["key"])
    age = GaugeMetricFamily("soloist_leader_heartbeat_age_seconds", "Seconds since the "
                            "key's holder last recorded a heartbeat.", labels=["key"])
    term = GaugeMetricFamily("soloist_leader_term", "The key's leadership term: one more "
                             "each time a process takes it.", labels=["key"])
    standbys = GaugeMetricFamily("soloist_key_standbys", "Lock sessions ready to take the "
                                 "key over (connected, not holding it).", labels=["key"])
    for key in KEYS.values():
        holding = _holding(key, sessions)
        state = states.get(key.value)
        led.add_metric([key.name], int(has_leader(holding, state, now, stale,
                                                  ages.get(key.value))))
        if state is not None and state.heartbeat_at is not None:
            age.add_metric([key.name], max((now - state.heartbeat_at).total_seconds(), 0.0))
        term.add_metric([key.name], state.term if state is not None else 0)
        standbys.add_metric([key.name], sum(
            1 for s in sessions
            if key.value not in s.keys and s.application_name.startswith("soloist:")))
    yield from (led, age, term, standbys)


def _holding(key: SchedulerKey, sessions: list[LockSession]) -> LockSession | None:
    return next((s for s in sessions if key.value in s.keys), None)


def _queue_counts(now: datetime) -> dict[tuple[str, str], int]:
    """Count posts, timers, deliveries and purges per status, late posts and the outbox."""
    timer_state = sa.case((Timer.paused, "paused"), (Timer.consecutive_failures > 0, "failing"),
                          else_="active")
    parts = [
        sa.select(sa.literal("posts"), Post.status, sa.func.count()).group_by(Post.status),
        sa.select(sa.literal("late"), sa.literal(""), sa.func.count())
        .where(Post.status == "scheduled", Post.publish_at <= now),
        sa.select(sa.literal("timers"), timer_state, sa.func.count()).group_by(timer_state),
        sa.select(sa.literal("deliveries"), WebhookDelivery.status, sa.func.count())
        .group_by(WebhookDelivery.status),
        sa.select(sa.literal("purges"), CachePurge.status, sa.func.count())
        .group_by(CachePurge.status),
        sa.select(sa.literal("outbox"), sa.literal(""), sa.func.count())
        .where(OutboxEvent.processed_at.is_(None)),
    ]
    rows = db.session.execute(sa.union_all(*parts)).all()
    return {(what, str(label)): int(n) for what, label, n in rows}


def _oldest_late(now: datetime) -> Metric:
    """Return how long the longest-waiting due post has been late (0 when none is)."""
    due = db.session.scalar(sa.select(sa.func.min(Post.publish_at)).where(
        Post.status == "scheduled", Post.publish_at <= now))  # the ix_posts_due index
    return GaugeMetricFamily(
        "soloist_posts_late_seconds", "Seconds the longest-waiting due post has been late "
        "(0 when none is).", value=max((now - due).total_seconds(), 0.0) if due else 0.0)


def queue_families(counts: dict[tuple[str, str], int]) -> Iterator[Metric]:
    """Yield the posts, timers, deliveries and outbox gauges (every known label, 0 if none)."""
    for name, what, label, known, help_text in (
        ("soloist_posts", "posts", "status", Post.STATUSES, "Posts per status."),
        ("soloist_timers", "timers", "state", TIMER_STATES,
         "Timers per state: active, failing (failed last time) or paused."),
        ("soloist_webhook_deliveries", "deliveries", "status", DELIVERY_STATUSES,
         "Webhook deliveries per status."),
        ("soloist_cache_purges", "purges", "status", PURGE_STATUSES,
         "Cache purges per status (CACHE_PURGE: one a purger an event readers see)."),
    ):
        family = GaugeMetricFamily(name, help_text, labels=[label])
        seen = {lab for (w, lab) in counts if w == what}
        for value in sorted(set(known) | seen):
            family.add_metric([value], counts.get((what, value), 0))
        yield family
    yield GaugeMetricFamily("soloist_posts_late", "Scheduled posts whose publish_at has come "
                            "and that are not published yet.", value=counts.get(("late", ""), 0))
    yield GaugeMetricFamily("soloist_outbox_backlog", "Outbox events not yet fanned out to "
                            "hooks and webhooks.", value=counts.get(("outbox", ""), 0))
