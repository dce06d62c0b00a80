"""Every write of the plugin leader is fenced by its (term, holder), not by the term alone:
a term number a lossy failover hands out again fences nothing in, and the new leadership
takes the deposed one's claims and settles its runs at once."""

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.receiver import Receiver
from webapp.extensions import db
from webapp.leadership.fence import Lead, record_work
from webapp.leadership.keys import PLUGINS
from webapp.models import HookDelivery, LeaderState, OutboxEvent, Timer, TimerRun, WebhookDelivery
from webapp.plugins import Plugin, hooks, registry, webhook_sends, webhooks
from webapp.plugins.base import HookEvent
from webapp.plugins.endpoints import create_webhook
from webapp.scheduling import plugin_tick, workers
from webapp.timers import create_timer

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)
OLD = Lead(5, "soloist:web.1:41:9f2c")  # deposed: its WAL was lost with the old primary
NEW = Lead(5, "soloist:web.2:37:71ab")  # the same term number, handed out again

fenced = Plugin("fenced", "Fenced", "Test actions and hooks.")
HOOKED: list[int] = []


@fenced.action("noop")
def noop(ctx) -> str:
    return "ran"


STARTED: list[int] = []


@fenced.action("counted")
def counted(ctx) -> str:
    STARTED.append(ctx.run_id)
    return "ran"


@fenced.hook("on_publish")
def on_publish(event) -> None:
    HOOKED.append(event.id)


@pytest.fixture
def plugged(app):
    """The app with the test plugin on, the built-ins off, and its context pushed."""
    HOOKED.clear()
    STARTED.clear()
    registry.register(fenced)
    app.config.update(WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=3)
    with app.app_context():
        for name in registry.BUILTIN:
            registry.set_enabled(name, name == "webhooks")
        yield app
        assert workers.drain(10)
    registry.unregister("fenced")


def lead(now: Lead) -> None:
    """Make now the plugin key's leadership, as an acquire writes it."""
    state = db.session.get(LeaderState, PLUGINS.value) or LeaderState(key=PLUGINS.value)
    state.term, state.holder, state.acquired_at = now.term, now.holder, T0
    state.holder_pid = 4242  # an open term: a release or an eviction clears it
    db.session.add(state)
    db.session.commit()


def hook_events(count: int, processed: datetime | None = T0) -> list[HookEvent]:
    rows = [OutboxEvent(topic="post.published", payload={"slug": f"p{i}"}, created_at=T0,
                        processed_at=processed, dedupe_key=f"test:{i}") for i in range(count)]
    db.session.add_all(rows)
    db.session.commit()
    return [HookEvent(e.id, e.topic, None, e.payload, T0, e.dedupe_key) for e in rows]


def test_a_deposed_holder_with_a_reissued_term_claims_no_delivery_and_its_claim_is_taken(
        plugged):
    receiver = Receiver().start()
    try:
        endpoint = create_webhook(receiver.url + "/in", ["post.published"], "s3cret-receiver-1")
        for event in hook_events(2):
            webhooks.enqueue(event)
        lead(OLD)
        stale = webhooks.claim_next(endpoint.id, T0, OLD)
        lead(NEW)  # the failover: same term number, another holder
        assert webhooks.claim_next(endpoint.id, T0, OLD) is None  # term >= 5 let it in
        sent = webhooks.deliver_due(lambda: T0 + timedelta(seconds=1), 5, NEW)
        assert sent["delivered"] == 2  # the deposed one's claim at once, no lease to wait
        assert webhook_sends.record(stale, 200, "", False, T0) == "stale"
        claimed = db.session.execute(sa.select(WebhookDelivery.claimed_term,
                                               WebhookDelivery.claimed_holder)).all()
        assert set(claimed) == {(5, NEW.holder)} and len(receiver.received()) == 2
    finally:
        receiver.close()


def test_a_deposed_holder_claims_no_hook_call_and_the_new_one_takes_its_claims(plugged):
    hook_events(2, processed=None)
    assert hooks.fan_out(T0, {"fenced"}) == 2
    lead(NEW)
    assert hooks.claim("fenced", T0, OLD.holder, OLD)[1] == []  # no fence at all before
    assert db.session.scalar(sa.select(sa.func.count()).where(
        HookDelivery.status == "running")) == 0
    lead(OLD)
    _token, taken = hooks.claim("fenced", T0, OLD.holder, OLD)
    lead(NEW)
    token, ids = hooks.claim("fenced", T0, NEW.holder, NEW)  # at once: no lease to wait out
    assert ids == taken and len(ids) == 2
    hooks.run_batch("fenced", ids, lambda: T0, token)
    assert len(HOOKED) == 2


def runs_of(made: Timer) -> list[TimerRun]:
    db.session.rollback()
    return list(db.session.scalars(sa.select(TimerRun).where(TimerRun.timer_id == made.id)
                                   .order_by(TimerRun.scheduled_for)))


def timer() -> Timer:
    return create_timer({"name": "t", "action": "fenced.noop", "kind": "every", "every": "1",
                         "unit": "minutes", "start_at": T0.isoformat(), "timezone": "UTC",
                         "misfire": "run_once", "grace_seconds": "60",
                         "max_runtime_seconds": "600", "max_failures": "3"},
                        now=T0 - timedelta(seconds=1))


def test_a_deposed_holder_claims_no_timer_slot_and_writes_no_bookkeeping(plugged):
    made = timer()
    lead(NEW)
    plugin_tick.tick(T0, OLD.holder, term=OLD.term)
    assert runs_of(made) == []
    assert db.session.get(Timer, made.id).next_run_at == T0  # not advanced either
    record_work(PLUGINS.value, T0, "late work", term=OLD.term, holder=OLD.holder)
    assert db.session.get(LeaderState, PLUGINS.value).last_result == ""
    plugin_tick.tick(T0, NEW.holder, term=NEW.term)
    assert workers.drain(10)
    [run] = runs_of(made)
    assert (run.status, run.claimed_term, run.claimed_holder) == ("succeeded", 5, NEW.holder)
    assert db.session.get(LeaderState, PLUGINS.value).last_result.startswith("started 1")


def test_a_run_claimed_but_never_started_is_settled_by_the_next_leader_at_once(
        plugged, monkeypatch):
    made = timer()
    lead(OLD)

    def killed(*_args, **_engine):  # the process dies between the claim's commit and the thread
        raise SystemExit("killed")

    monkeypatch.setattr(plugin_tick, "_launch", killed)
    with pytest.raises(SystemExit):
        plugin_tick.tick(T0, OLD.holder, term=OLD.term)
    monkeypatch.undo()
    lead(NEW)
    slot = T0 + timedelta(minutes=1)
    assert plugin_tick.tick(slot - timedelta(seconds=30), NEW.holder, term=5) <= slot
    plugin_tick.tick(slot, NEW.holder, term=NEW.term)  # the next slot, on time
    assert workers.drain(10)
    first, second = runs_of(made)
    assert first.status == "abandoned" and OLD.holder in first.error
    assert first.finished_at == slot - timedelta(seconds=30)  # not after 600 s
    assert (second.scheduled_for, second.status) == (slot, "succeeded")
    assert db.session.get(Timer, made.id).consecutive_failures == 0  # not the timer's fault


def test_a_run_whose_thread_cannot_start_is_recorded_failed_not_left_running(
        plugged, monkeypatch):
    made = timer()

    def no_threads(*_args):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(workers, "start", no_threads)
    plugin_tick.tick(T0)
    monkeypatch.undo()
    [run] = runs_of(made)
    assert run.status == "failed" and "can't start new thread" in run.error
    plugin_tick.tick(T0 + timedelta(minutes=1))
    assert workers.drain(10)
    assert [r.status for r in runs_of(made)] == ["failed", "succeeded"]


def test_a_run_still_running_when_its_leader_lost_the_key_is_never_overlapped(plugged):
    # this very process claimed it (its thread runs), then lost the key for a moment and
    # now follows; the new leader must neither abandon it nor start the timer beside it
    import os
    import threading

    from webapp.db import identity

    release, running = threading.Event(), []

    @fenced.action("slow")
    def slow(ctx) -> str:
        running.append(True)
        release.wait(20)
        return "done"

    try:
        made = create_timer({"name": "Slow", "action": "fenced.slow", "kind": "every",
                             "every": "1", "unit": "minutes", "start_at": T0.isoformat(),
                             "timezone": "UTC", "max_runtime_seconds": "300"},
                            now=T0 - timedelta(seconds=1))
        here = Lead(3, identity(plugged.config["INSTANCE_NAME"], pid=os.getpid(),
                                nonce="aaaaaaaa"))
        lead(here)
        plugin_tick.tick(T0, here.holder, term=here.term)
        wait_for(lambda: running, 5, "the run to start")
        lead(NEW)
        plugin_tick.tick(T0 + timedelta(minutes=1), NEW.holder, term=NEW.term)
        first, second = runs_of(made)
        assert first.status == "running"  # still in flight, not abandoned
        assert second.status == "skipped" and "still running" in second.error
        assert len(running) == 1  # never two at once
    finally:
        release.set()
        fenced.actions.pop("slow", None)


def test_a_thawed_leader_does_not_start_a_run_its_successor_recorded_abandoned(
        plugged, monkeypatch):
    made, launched = timer(), []
    lead(OLD)
    # it froze between the claim's commit and its thread's start
    monkeypatch.setattr(plugin_tick, "_launch",
                        lambda *args, **_engine: launched.append(args) or 1)
    plugin_tick.tick(T0, OLD.holder, term=OLD.term)
    monkeypatch.undo()
    lead(NEW)  # evicted; the successor settles the run it cannot see running
    plugin_tick.tick(T0 + timedelta(seconds=30), NEW.holder, term=NEW.term)
    [(run_id, made_timer, slot, now, instance, old)] = launched
    workers.execute_run(run_id, made_timer.id, "fenced.counted", {}, slot, now, instance,
                        600.0, plugged, old)  # thawed: its thread runs at last
    [run] = runs_of(made)
    assert run.status == "abandoned" and STARTED == []  # its action never started


def test_a_leader_that_handed_over_starts_no_run_it_claimed_and_settles_it_at_once(plugged):
    made = timer()
    lead(OLD)
    state = db.session.get(LeaderState, PLUGINS.value)
    run = TimerRun(timer_id=made.id, scheduled_for=T0, trigger="schedule", status="running",
                   started_at=T0, result="", error="", instance=OLD.holder, **OLD.mark())
    db.session.add(run)
    state.holder_pid = None  # released (a SIGTERM) between the claim and the start
    db.session.commit()
    workers.execute_run(run.id, made.id, "fenced.counted", {}, T0, T0, OLD.holder, 600.0,
                        plugged, OLD)
    [settled] = runs_of(made)
    assert settled.status == "abandoned" and "not started" in settled.error
    assert STARTED == []
