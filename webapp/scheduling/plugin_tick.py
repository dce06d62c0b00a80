"""The plugin scheduler's tick: run due timer slots and feed outbox events to hooks.

Each call is a short, bounded unit of work on the leader's scheduler thread:
mark runs past their maximum runtime as timed out, start queued run-now
requests, claim due slots, fan outbox events out to hooks, and return when
something is next due. It looks first (webapp.scheduling.plugin_due, one
statement): when nothing is due, that is the whole tick. Actions and hooks run
in worker threads (webapp.scheduling.workers), never here.

At most once per slot: a slot is claimed by inserting its timer_runs row
(UNIQUE timer_id, scheduled_for) before anything runs; a second leader's insert
does nothing, and a deposed leader's claim is refused by the fence (the plugin key's
term and holder, webapp.leadership.fence). A run the claiming leadership never started,
or whose process died, is settled as abandoned by the next leadership at once.
The next slot is computed from the slot's own time, so a slow run
never drifts the schedule.
"""

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

import sqlalchemy as sa
from flask import current_app

from ..db import boot_id, for_update_skip_locked, insert_ignoring_conflicts
from ..extensions import db
from ..leadership import current_view
from ..leadership.base import process_of
from ..leadership.fence import Lead, record_work
from ..leadership.keys import PLUGINS
from ..models import Timer, TimerRun
from ..ops import alerts
from ..ops.freezes import is_frozen
from ..plugins import hooks, registry
from ..plugins.schedules import Schedule
from ..timers import ensure_default_timers
from ..timers.runs import count_outcome, finish_run
from . import delivery_tick, plugin_due, workers

log = logging.getLogger("soloist.timers")

BLOCKED_RECHECK = timedelta(seconds=1)  # due work waits for a free worker or a hook batch
CLAIM_BATCH = 100
BUDGET_SHARE = 4  # a tick works at most LEADER_STALE_SECONDS / 4, then says "due now"
monotonic = time.monotonic  # the budget's clock (tests move it)


def budget() -> Callable[[], bool]:
    """Return a test of whether this tick has used its time: well under LEADER_STALE_SECONDS.

    The runner heartbeats between ticks only, so a healthy leader with a long backlog
    (a hundred due slots, each claim a commit) must hand back before a follower sees its
    heartbeat as stale and evicts it; it is called again at once.
    """
    limit = float(current_app.config.get("LEADER_STALE_SECONDS", 10.0)) / BUDGET_SHARE
    deadline = monotonic() + limit
    return lambda: monotonic() >= deadline


def tick(now: datetime, instance: str = "", term: int | None = None) -> datetime | None:
    """Do one unit of plugin work at now; return when the next one is due.

    With term, instance is this leader's lock session name (leader_state's holder) and
    (term, instance) the leadership every claim and write is fenced by; without, the
    current leadership is read and instance only names the runs. A new leadership takes
    the previous ones' unfinished claims and settles their runs at once. The reads share
    one transaction, ended before the tick returns.
    """
    try:
        lead = Lead.of(term, instance)
        enabled = registry.enabled_names()
        _ensure_default_timers(now)
        ahead = plugin_due.look(now, lead, enabled)
        if ahead.idle(now):
            return ahead.wake  # nothing to time out, start, claim, fan out or send
        return _work(now, instance, lead, enabled)
    finally:
        db.session.rollback()  # the scheduler's connection never waits in a transaction


def _work(now: datetime, instance: str, lead: Lead, enabled: set[str]) -> datetime:
    """Do the plugin work due at now, step by step; return when the next is due."""
    over = budget()
    done = {"abandoned": settle_orphans(now, lead),
            "timed out": expire_overdue(now) + delivery_tick.expire_hooks(now)}
    if done["timed out"]:
        enabled = registry.enabled_names()  # a plugin may have been paused for hanging
    more = False
    if not is_frozen("timers"):  # frozen: no run starts; hooks and deliveries go on
        done["started"] = start_queued(now, instance, lead, enabled)
        claimed, more = claim_due(now, instance, lead, enabled, over)
        done["started"] += claimed
    done["events"] = delivery_tick.fan_out(now, enabled)
    done["hook batches"] = delivery_tick.start_hook_batches(now, instance, lead, enabled)
    done["senders"] = delivery_tick.start_senders(now, lead, enabled)
    if any(done.values()):
        record_work(PLUGINS.value, now, ", ".join(f"{k} {v}" for k, v in done.items() if v),
                    term=lead.term, holder=lead.holder)
    if more or done["events"] >= hooks.FAN_OUT_BATCH:
        return now  # a backlog: come back at once
    wake = plugin_due.look(now, lead, enabled).wake
    return wake if wake > now else now + BLOCKED_RECHECK


def _ensure_default_timers(now: datetime) -> None:
    """Create the plugins' missing default timers once per app and plugin load.

    They are only ever created (a plugin's own timer cannot be deleted), so once is enough.
    """
    loads = registry.loads()
    if current_app.extensions.get("soloist.default_timers") != loads:
        ensure_default_timers(now)
        current_app.extensions["soloist.default_timers"] = loads


def expire_overdue(now: datetime) -> int:
    """Record runs past their maximum runtime as timed out; return how many."""
    running = db.session.execute(
        sa.select(TimerRun.id, TimerRun.timer_id, TimerRun.started_at, Timer.max_runtime_seconds,
                  Timer.plugin)
        .join(Timer, Timer.id == TimerRun.timer_id).where(TimerRun.status == "running")).all()
    expired, hung = 0, set()
    for run_id, timer_id, started_at, limit, plugin in running:
        if started_at + timedelta(seconds=limit) > now:
            continue
        error = f"Ran past its maximum runtime of {limit} s; recorded as timed out."
        settled = db.session.execute(
            sa.update(TimerRun).where(TimerRun.id == run_id, TimerRun.status == "running")
            .values(status="timed_out", finished_at=now, error=error,
                    duration_seconds=(now - started_at).total_seconds())).rowcount
        if settled:
            count_outcome(timer_id, False, error, now)
            workers.abandon(delivery_tick.run_key(plugin, run_id))
            hung.add(plugin)
            expired += 1
        db.session.commit()
    delivery_tick.pause_hung_plugins(hung, now)
    return expired


def settle_orphans(now: datetime, lead: Lead) -> int:
    """Record running runs that nothing runs any more as abandoned; return how many.

    Another leadership's run whose claimer is gone: its leader died, or failed between
    claiming and starting it. A run of this leadership that no thread of this process
    runs: its thread ended without recording its outcome (the write failed every try).
    Waiting out their maximum runtime would only skip the timer's next slots. A run whose
    claimer still lives (it lost the key for a moment, or leads again under a new nonce)
    may still be running: it stays in flight until it ends or times out, so a timer never
    runs twice at once. A run claimed at now (this tick) is being launched: left alone;
    so is one of this leadership whose holder names no process (the unled (0, "") of
    ticks called by hand, which several processes may share).
    Not counted as the timer's failures.
    """
    running = db.session.execute(
        sa.select(TimerRun.id, TimerRun.started_at, TimerRun.claimed_term,
                  TimerRun.claimed_holder, Timer.plugin)
        .join(Timer, Timer.id == TimerRun.timer_id)
        .where(TimerRun.status == "running",
               sa.or_(TimerRun.started_at.is_(None), TimerRun.started_at < now))).all()
    settled = 0
    for run_id, started_at, term, holder, plugin in running:
        if (term, holder) == (lead.term, lead.holder) and process_of(holder) != boot_id():
            continue  # a holder naming no process (ticks called by hand): which one runs it?
        if _claimer_alive(holder, delivery_tick.run_key(plugin, run_id)):
            continue
        settled += db.session.execute(
            sa.update(TimerRun).where(TimerRun.id == run_id, TimerRun.status == "running",
                                      lead.holds())
            .values(status="abandoned", finished_at=now, error=_orphan_error(term, holder, lead),
                    duration_seconds=(now - (started_at or now)).total_seconds())).rowcount
    db.session.commit()
    return settled


def _orphan_error(term: int, holder: str, lead: Lead) -> str:
    """Say why a run nothing runs was settled, and that its outcome is unknown."""
    if (term, holder) == (lead.term, lead.holder):
        return ("Abandoned: its thread ended but its outcome could not be recorded (the "
                "database could not be reached); whether its action finished is unknown.")
    return (f"Abandoned: claimed by {holder or 'an earlier leader'} (term {term}), which "
            "no longer leads the plugin scheduler; its outcome is unknown.")


def _claimer_alive(holder: str, key: str) -> bool:
    """Return whether the process that claimed a run may still be running it.

    Known by its boot id, never by (instance, pid): containers repeat pids, and a
    platform's instance name outlives a restart.
    """
    boot = process_of(holder)
    if not boot:
        return False
    if boot == boot_id():
        return workers.busy(key)  # this process: is its thread alive?
    return current_view().process_alive(boot)


def _in_flight(timer_id: int) -> bool:
    return db.session.scalar(sa.select(TimerRun.id).where(
        TimerRun.timer_id == timer_id, TimerRun.status == "running").limit(1)) is not None


def start_queued(now: datetime, instance: str, lead: Lead, enabled: set[str]) -> int:
    """Start run-now requests whose timer is not already running; return how many."""
    queued = db.session.execute(
        sa.select(TimerRun.id, TimerRun.scheduled_for, Timer)
        .join(Timer, Timer.id == TimerRun.timer_id)
        .where(TimerRun.status == "queued").order_by(TimerRun.queued_at, TimerRun.id)).all()
    started = 0
    for run_id, slot, timer in queued:
        if timer.plugin not in enabled or _in_flight(timer.id) or workers.free_slots() <= 0:
            continue
        claimed = db.session.execute(
            sa.update(TimerRun).where(TimerRun.id == run_id, TimerRun.status == "queued",
                                      lead.holds())
            .values(status="running", started_at=now, instance=instance[:200],
                    **lead.mark())).rowcount
        db.session.commit()
        if claimed:
            started += _launch(run_id, timer, slot, now, instance, lead)
    return started


def claim_due(now: datetime, instance: str, lead: Lead, enabled: set[str],
              over: Callable[[], bool] = lambda: False) -> tuple[int, bool]:
    """Claim every due slot (up to a batch, or until over()); return (runs started, more left).

    over() is asked before each claim: the first claim is always made, so a tick makes
    progress however slow the database is.
    """
    started = claims = 0
    while claims < CLAIM_BATCH:
        if claims and over():
            return started, True  # out of time: the runner heartbeats and calls again
        timer = db.session.scalar(for_update_skip_locked(
            sa.select(Timer).where(Timer.next_run_at <= now, ~Timer.paused,
                                   Timer.plugin.in_(enabled))
            .order_by(Timer.next_run_at, Timer.id).limit(1)
            .execution_options(populate_existing=True)))  # as locked, not as read this tick
        if timer is None:
            break
        if workers.free_slots() <= 0 and not _in_flight(timer.id):
            db.session.rollback()
            return started, False  # wait for a worker; BLOCKED_RECHECK brings us back
        try:
            started += _claim_slot(timer, now, instance, lead)
        except Deposed:
            return started, False  # another leads now: it claims the rest
        except (ValueError, LookupError, TypeError, ArithmeticError) as exc:
            _quarantine(timer.id, exc, now)  # a bad schedule pauses its timer, not the scheduler
        claims += 1
    return started, claims >= CLAIM_BATCH  # no row is left locked: each claim committed


class Deposed(Exception):
    """The plugin key's leadership is no longer the one the tick was called with."""


def _claim_slot(timer: Timer, now: datetime, instance: str, lead: Lead) -> int:
    """Claim the timer's next slot (run, skip or catch up) and advance it; return runs started.

    Advancing the timer is fenced by lead: a deposed leader claims nothing.
    """
    schedule = Schedule.of(timer)
    due = slot = timer.next_run_at
    status, trigger, error = "running", "schedule", ""
    if now - due > timedelta(seconds=timer.grace_seconds):
        slot = max(schedule.latest_at_or_before(now) or due, due)
        late = f"Due at {due:%Y-%m-%d %H:%M:%S} UTC; the scheduler was {now - due} late."
        if timer.misfire == "skip":
            status, error = "skipped", f"{late} Skipped (misfire policy: skip)."
        else:
            trigger = "catch_up"
    if status == "running" and _in_flight(timer.id):
        status, error = "skipped", "Skipped: the previous run was still running."
    advanced = db.session.execute(
        sa.update(Timer).where(Timer.id == timer.id, Timer.next_run_at == due, lead.holds())
        .values(next_run_at=schedule.next_after(slot))).rowcount
    if not advanced:  # the row is locked by this transaction: only the fence can refuse
        db.session.rollback()
        raise Deposed()
    run_id = db.session.scalar(
        insert_ignoring_conflicts(TimerRun, ["timer_id", "scheduled_for"])
        .values(timer_id=timer.id, scheduled_for=slot, trigger=trigger, status=status,
                started_at=now if status == "running" else None, error=error, result="",
                instance=instance[:200], finished_at=None if status == "running" else now,
                **lead.mark())
        .returning(TimerRun.id))
    db.session.commit()
    if run_id is None or status != "running":
        return 0  # another leader claimed this slot, or it is recorded as skipped
    return _launch(run_id, timer, slot, now, instance, lead)


def _quarantine(timer_id: int, exc: Exception, now: datetime) -> None:
    db.session.rollback()
    log.exception("timer %s has a schedule that cannot be computed; pausing it", timer_id)
    reason = f"Paused: its schedule cannot be computed ({exc})."[:500]
    paused = db.session.execute(sa.update(Timer).where(Timer.id == timer_id, ~Timer.paused)
                                .values(paused=True, paused_reason=reason)).rowcount
    if paused:
        alerts.timer_paused(db.session.get(Timer, timer_id), reason, now)
    db.session.commit()


def _launch(run_id: int, timer: Timer, slot: datetime, now: datetime, instance: str,
            lead: Lead) -> int:
    """Start a claimed run's thread; return 1, or settle the run as failed and return 0.

    A thread that cannot start (the process is out of threads) must not leave a run
    'running' that nothing runs: that would skip the timer's slots for its maximum runtime.
    """
    app = delivery_tick.plugin_app()
    timer_id, plugin = timer.id, timer.plugin
    try:
        workers.start(delivery_tick.run_key(plugin, run_id), app, partial(
            workers.execute_run, run_id, timer_id, timer.qualified_action,
            dict(timer.params or {}), slot, now, instance, float(timer.max_runtime_seconds),
            app, lead))
    except Exception as exc:  # noqa: BLE001 - whatever it was, the run did not start
        db.session.rollback()
        log.exception("timer run %s could not start", run_id)
        finish_run(run_id, timer_id, "failed", "", f"Not started: {type(exc).__name__}: {exc}",
                   now, 0.0)
        return 0
    return 1
