"""The plugin tick with an injected clock: slots, misfires, timeouts, overlap, run now."""

import multiprocessing
import os
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from webapp.extensions import db
from webapp.leadership.keys import PLUGINS
from webapp.models import Timer, TimerRun
from webapp.plugins import Param, Plugin, registry
from webapp.scheduling import plugin_tick, workers
from webapp.scheduling.runner import Scheduler
from webapp.timers import create_timer, pause, queue_run_now, resume

T0 = datetime(2026, 3, 29, 9, 0, 0, tzinfo=UTC)

probe = Plugin("probe", "Probe", "Test actions.")
RECORDED: list[tuple[int, datetime]] = []
RELEASE = threading.Event()


@probe.action("record", params=[Param("path", "str", "")])
def record(ctx, path: str = "") -> str:
    """Remember the slot (and append it to path, for other processes to read)."""
    RECORDED.append((ctx.timer_id, ctx.scheduled_for))
    if path:
        with open(path, "a") as log:
            log.write(f"{ctx.timer_id} {ctx.scheduled_for.isoformat()} {os.getpid()}\n")
    return "recorded"


@probe.action("block")
def block(ctx) -> None:
    """Wait until the test lets go."""
    RELEASE.wait(30)


@probe.action("fail")
def fail(ctx) -> None:
    raise RuntimeError("the probe failed on purpose")


@pytest.fixture
def engine(app):
    """An app with the probe plugin and the built-in plugins switched off."""
    RECORDED.clear()
    RELEASE.clear()
    registry.register(probe)
    with app.app_context():
        for name in registry.BUILTIN:
            registry.set_enabled(name, False)
        yield app
        RELEASE.set()
        assert workers.drain(10)
    registry.unregister("probe")


def make_timer(action: str = "probe.record", **fields) -> Timer:
    data = {"name": "t", "action": action, "kind": "every", "every": "10", "unit": "seconds",
            "start_at": T0.isoformat(), "timezone": "UTC", "misfire": "run_once",
            "grace_seconds": "60", "max_runtime_seconds": "300", "max_failures": "3"}
    data.update({k: str(v) for k, v in fields.items()})
    return create_timer(data, now=T0 - timedelta(seconds=1))


def runs(timer: Timer) -> list[TimerRun]:
    db.session.rollback()
    return list(db.session.scalars(sa.select(TimerRun).where(TimerRun.timer_id == timer.id)
                                   .order_by(TimerRun.scheduled_for)))


def settled(timer: Timer) -> list[TimerRun]:
    assert workers.drain(10)
    return runs(timer)


def test_a_due_slot_runs_once_and_the_next_run_comes_from_the_schedule(engine):
    timer = make_timer()
    assert timer.next_run_at == T0
    assert plugin_tick.tick(T0 - timedelta(seconds=5)) == T0
    assert runs(timer) == []
    upcoming = plugin_tick.tick(T0 + timedelta(seconds=4))  # a late tick, inside the grace window
    assert upcoming == T0 + timedelta(seconds=10)  # from the slot, not from the tick
    assert plugin_tick.tick(T0 + timedelta(seconds=4)) == upcoming  # nothing is run twice
    [run] = settled(timer)
    assert (run.scheduled_for, run.trigger, run.status) == (T0, "schedule", "succeeded")
    assert run.started_at == T0 + timedelta(seconds=4) and run.result == "recorded"
    assert run.instance == "" and run.duration_seconds >= 0
    assert [(timer.id, T0)] == RECORDED


def test_after_an_outage_run_once_catches_up_with_a_single_run(engine):
    timer = make_timer(every=1, unit="minutes")
    back = T0 + timedelta(hours=2, seconds=30)
    upcoming = plugin_tick.tick(back, "web.1")
    [run] = settled(timer)
    assert (run.trigger, run.status, run.instance) == ("catch_up", "succeeded", "web.1")
    assert run.scheduled_for == T0 + timedelta(hours=2)  # the latest missed slot
    assert upcoming == T0 + timedelta(hours=2, minutes=1)
    assert [(timer.id, T0 + timedelta(hours=2))] == RECORDED


def test_after_an_outage_skip_records_the_missed_slot_and_waits_for_the_next(engine):
    timer = make_timer(every=1, unit="minutes", misfire="skip")
    upcoming = plugin_tick.tick(T0 + timedelta(hours=2, seconds=30))
    [run] = settled(timer)
    assert run.status == "skipped" and "misfire policy: skip" in run.error
    assert upcoming == T0 + timedelta(hours=2, minutes=1)
    assert RECORDED == []
    plugin_tick.tick(upcoming)
    assert [r.status for r in settled(timer)] == ["skipped", "succeeded"]


def test_a_slot_late_by_more_than_the_grace_window_is_a_misfire(engine):
    timer = make_timer(every=1, unit="hours", misfire="skip", grace_seconds=30)
    plugin_tick.tick(T0 + timedelta(seconds=29))
    assert workers.drain(10)  # the run ends first (else, an hour later, it is timed out)
    plugin_tick.tick(T0 + timedelta(hours=1, seconds=31))
    assert [(r.scheduled_for, r.status) for r in settled(timer)] == [
        (T0, "succeeded"), (T0 + timedelta(hours=1), "skipped")]


def test_a_run_past_its_maximum_runtime_is_timed_out_without_blocking_the_tick(engine):
    timer = make_timer("probe.block", max_runtime_seconds=2)
    plugin_tick.tick(T0)
    assert wait_for(lambda: [r.status for r in runs(timer)] == ["running"], 5, "the run")
    started = time.monotonic()
    upcoming = plugin_tick.tick(T0 + timedelta(seconds=3))
    assert time.monotonic() - started < 2  # the tick did not wait for the action
    [run] = runs(timer)
    assert run.status == "timed_out" and "maximum runtime of 2 s" in run.error
    assert upcoming == T0 + timedelta(seconds=10)
    RELEASE.set()
    assert settled(timer)[0].status == "timed_out"  # the late finish does not overwrite it
    assert db.session.get(Timer, timer.id).consecutive_failures == 1


def test_a_slot_is_skipped_while_the_previous_run_is_still_running(engine):
    timer = make_timer("probe.block")
    plugin_tick.tick(T0)
    plugin_tick.tick(T0 + timedelta(seconds=10))
    statuses = [(r.scheduled_for, r.status) for r in runs(timer)]
    assert statuses == [(T0, "running"), (T0 + timedelta(seconds=10), "skipped")]
    assert "still running" in runs(timer)[1].error
    RELEASE.set()
    assert [r.status for r in settled(timer)] == ["succeeded", "skipped"]


def test_run_now_is_queued_and_run_by_the_leader_not_by_the_caller(engine):
    timer = make_timer(every=1, unit="days", start_at=(T0 + timedelta(hours=1)).isoformat())
    run = queue_run_now(timer, now=T0)
    assert queue_run_now(timer, now=T0 + timedelta(seconds=1)).id == run.id  # one waiting run
    assert runs(timer)[0].status == "queued" and RECORDED == []
    plugin_tick.tick(T0 + timedelta(seconds=1))
    [done] = settled(timer)
    assert (done.trigger, done.status) == ("manual", "succeeded")
    assert [(timer.id, T0)] == RECORDED


def test_run_now_waits_while_a_run_is_in_flight(engine):
    timer = make_timer("probe.block")
    plugin_tick.tick(T0)
    queue_run_now(timer, now=T0 + timedelta(seconds=1))
    plugin_tick.tick(T0 + timedelta(seconds=2))
    assert [r.status for r in runs(timer)] == ["running", "queued"]
    RELEASE.set()
    assert workers.drain(10)
    plugin_tick.tick(T0 + timedelta(seconds=3))
    assert [r.status for r in settled(timer)] == ["succeeded", "succeeded"]


def test_the_plugin_leader_runs_a_run_now_request_as_soon_as_it_is_queued(engine):
    later = datetime.now(UTC) + timedelta(hours=1)
    timer = make_timer(every=1, unit="days", start_at=later.isoformat())
    running = Scheduler(engine)
    running.start()
    try:
        wait_for(lambda: PLUGINS.value in running.due, 10, "the first plugin tick")
        queue_run_now(timer)
        # the leader sleeps up to 10 s when idle: only the wake-up makes this fast
        wait_for(lambda: [r.status for r in runs(timer)] == ["succeeded"], 5,
                 "the plugin leader to run the queued run")
        assert runs(timer)[0].instance == running.locks.name
    finally:
        assert running.stop(10)


def test_a_timer_pauses_itself_after_repeated_failures_and_says_why(engine):
    timer = make_timer("probe.fail", max_failures=3)
    for slot in range(4):
        plugin_tick.tick(T0 + timedelta(seconds=10 * slot))
        assert workers.drain(10)
    history = settled(timer)
    assert [r.status for r in history] == ["failed", "failed", "failed"]
    assert "RuntimeError: the probe failed on purpose" in history[0].error
    db.session.refresh(timer)
    assert timer.paused and "after 3 failed runs in a row" in timer.paused_reason
    assert "the probe failed on purpose" in timer.paused_reason
    resume(timer, now=T0 + timedelta(seconds=45))
    assert not timer.paused and timer.consecutive_failures == 0
    assert timer.next_run_at == T0 + timedelta(seconds=50)


def test_a_paused_timer_or_a_switched_off_plugin_does_not_run(engine):
    timer = make_timer()
    pause(timer)
    plugin_tick.tick(T0 + timedelta(seconds=1))
    resume(timer, now=T0 - timedelta(seconds=1))
    registry.set_enabled("probe", False)
    plugin_tick.tick(T0 + timedelta(seconds=1))
    assert settled(timer) == []
    registry.set_enabled("probe", True)
    plugin_tick.tick(T0 + timedelta(seconds=1))
    assert [r.status for r in settled(timer)] == ["succeeded"]


def test_a_timer_whose_schedule_cannot_be_computed_is_paused_and_the_others_run(engine):
    bad, good = make_timer(kind="cron", cron="* * * * *"), make_timer(unit="hours")
    db.session.execute(sa.update(Timer).where(Timer.id == bad.id)
                       .values(timezone="Atlantis/Lost"))  # e.g. a zone a tzdata update dropped
    db.session.commit()
    plugin_tick.tick(T0 + timedelta(minutes=1))
    assert [r.status for r in settled(good)] == ["succeeded"]
    db.session.refresh(bad)
    assert bad.paused and "cannot be computed" in bad.paused_reason


def test_the_tick_works_on_sqlite_too(sqlite_app):
    registry.register(probe)
    RECORDED.clear()
    try:
        with sqlite_app.app_context():
            timer = make_timer()
            plugin_tick.tick(T0)
            assert [r.status for r in settled(timer)] == ["succeeded"]
    finally:
        registry.unregister("probe")


def _tick_through(url: str, path: str, barrier, results) -> None:
    """Child process: run the plugin tick over the same simulated 30 s as the other child."""
    from tests.harness.support import make_app

    registry.register(probe)
    app = make_app(url)
    with app.app_context():
        barrier.wait(timeout=60)
        for step in range(121):
            plugin_tick.tick(T0 + timedelta(seconds=step / 4), f"child-{os.getpid()}")
        workers.drain(30)
        db.engine.dispose()
    results.put(os.getpid())


def test_two_processes_ticking_at_once_never_run_a_slot_twice(engine, pg_url, tmp_path):
    path = tmp_path / "runs.log"
    made = [make_timer(every=1, unit="seconds", params=f'{{"path": "{path}"}}')
            for _ in range(4)]
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    children = [ctx.Process(target=_tick_through, args=(pg_url, str(path), barrier, results))
                for _ in range(2)]
    for child in children:
        child.start()
    pids = {results.get(timeout=180) for _ in children}
    for child in children:
        child.join(30)
        assert child.exitcode == 0
    executed = [tuple(line.split()[:2]) for line in path.read_text().splitlines()]
    assert len(executed) == len(set(executed))  # no slot ran twice
    for timer in made:
        slots = [r.scheduled_for for r in runs(timer)]
        assert slots == [T0 + timedelta(seconds=s) for s in range(31)]  # each slot claimed once
        ran = {r.scheduled_for.isoformat() for r in runs(timer) if r.status == "succeeded"}
        assert ran == {s for t, s in executed if t == str(timer.id)}
    claimed_by = {r.instance.split("-")[1] for t in made for r in runs(t)}
    assert claimed_by <= {str(p) for p in pids}


def test_a_long_backlog_is_claimed_in_ticks_short_enough_for_the_heartbeat(engine, monkeypatch):
    timers = [make_timer(every=1, unit="minutes") for _ in range(4)]
    engine.config["LEADER_STALE_SECONDS"] = 10.0  # a tick's budget: 2.5 s
    ticks = iter(range(0, 1000, 2))  # each claim takes 2 s of a slow database
    monkeypatch.setattr(plugin_tick, "monotonic", lambda: next(ticks))
    assert plugin_tick.tick(T0, "web.1") == T0  # out of time: due now, the runner heartbeats
    assert sum(len(runs(t)) for t in timers) == 2
    plugin_tick.tick(T0, "web.1")  # called again at once: the rest
    assert sorted(len(settled(t)) for t in timers) == [1, 1, 1, 1]
