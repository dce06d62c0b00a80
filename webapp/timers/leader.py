"""The timer leader's writes: claim due slots, start run-now requests, expire, settle orphans.

The plugin tick (webapp.scheduling.plugin_tick) orchestrates; what it writes about
timers lives here. At most once per slot: a slot is claimed by inserting its timer_runs
row (UNIQUE timer_id, scheduled_for) before anything runs; a second leader's insert does
nothing, and a deposed leader's claim is refused by the fence (the plugin key's term and
holder, webapp.leadership.fence). The next slot is computed from the slot's own time, so
a slow run never drifts the schedule. Threads are the scheduler's: a Runner it passes in
says whether a run's thread is alive here and starts the thread of a claimed run.
"""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol

import sqlalchemy as sa

from ..db import boot_id, for_update_skip_locked, insert_ignoring_conflicts, rows_changed
from ..extensions import db
from ..leadership import current_view
from ..leadership.base import process_of
from ..leadership.fence import Lead
from ..models import Timer, TimerRun
from ..ops import alerts
from ..plugins.schedules import Schedule
from .runs import count_outcome

log = logging.getLogger("soloist.timers")

CLAIM_BATCH = 100


class Runner(Protocol):
    """The threads that run timers' actions, as the leader's writes need them."""

    def free(self) -> int:
        """Return how many more runs may start now."""

    def running(self, run_id: int, plugin: str) -> bool:
        """Return whether a thread of this process runs run_id now."""

    def launch(self, run_id: int, timer: Timer, slot: datetime, now: datetime,
               holder: str, lead: Lead) -> int:
        """Start a claimed run's thread; return 1, or 0 (and settle the run) if it cannot."""


def expire_overdue(now: datetime) -> list[tuple[int, str]]:
    """Record runs past their maximum runtime as timed out; return (run id, plugin) of each."""
    running = db.session.execute(
        sa.select(TimerRun.id, TimerRun.timer_id, TimerRun.started_at, Timer.max_runtime_seconds,
                  Timer.plugin)
        .join(Timer, Timer.id == TimerRun.timer_id).where(TimerRun.status == "running")).all()
    expired = []
    for run_id, timer_id, started_at, limit, plugin in running:
        if started_at is None or started_at + timedelta(seconds=limit) > now:
            continue  # one with no start is settled as an orphan, if at all
        error = f"Ran past its maximum runtime of {limit} s; recorded as timed out."
        settled = rows_changed(
            sa.update(TimerRun).where(TimerRun.id == run_id, TimerRun.status == "running")
            .values(status="timed_out", finished_at=now, error=error,
                    duration_seconds=(now - started_at).total_seconds()))
        if settled:
            count_outcome(timer_id, False, error, now)
            expired.append((run_id, plugin))
        db.session.commit()
    return expired


def settle_orphans(now: datetime, lead: Lead, runner: Runner) -> int:
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
        if _claimer_alive(holder, partial(runner.running, run_id, plugin)):
            continue
        settled += rows_changed(
            sa.update(TimerRun).where(TimerRun.id == run_id, TimerRun.status == "running",
                                      lead.holds())
            .values(status="abandoned", finished_at=now, error=_orphan_error(term, holder, lead),
                    duration_seconds=(now - (started_at or now)).total_seconds()))
    db.session.commit()
    return settled


def _orphan_error(term: int, holder: str, lead: Lead) -> str:
    """Say why a run nothing runs was settled, and that its outcome is unknown."""
    if (term, holder) == (lead.term, lead.holder):
        return ("Abandoned: its thread ended but its outcome could not be recorded (the "
                "database could not be reached); whether its action finished is unknown.")
    return (f"Abandoned: claimed by {holder or 'an earlier leader'} (term {term}), which "
            "no longer leads the plugin scheduler; its outcome is unknown.")


def _claimer_alive(holder: str, running_here: Callable[[], bool]) -> bool:
    """Return whether the process that claimed a run may still be running it.

    Known by its boot id, never by (instance, pid): containers repeat pids, and a
    platform's instance name outlives a restart.
    """
    boot = process_of(holder)
    if not boot:
        return False
    if boot == boot_id():
        return running_here()  # this process: is its thread alive?
    return current_view().process_alive(boot)


def in_flight(timer_id: int) -> bool:
    """Return whether a run of the timer is running now."""
    return db.session.scalar(sa.select(TimerRun.id).where(
        TimerRun.timer_id == timer_id, TimerRun.status == "running").limit(1)) is not None


def start_queued(now: datetime, holder: str, lead: Lead, enabled: set[str],
                 runner: Runner) -> int:
    """Start run-now requests whose timer is not already running; return how many."""
    queued = db.session.execute(
        sa.select(TimerRun.id, TimerRun.scheduled_for, Timer)
        .join(Timer, Timer.id == TimerRun.timer_id)
        .where(TimerRun.status == "queued").order_by(TimerRun.queued_at, TimerRun.id)).all()
    started = 0
    for run_id, slot, timer in queued:
        if timer.plugin not in enabled or in_flight(timer.id) or runner.free() <= 0:
            continue
        claimed = rows_changed(
            sa.update(TimerRun).where(TimerRun.id == run_id, TimerRun.status == "queued",
                                      lead.holds())
            .values(status="running", started_at=now, instance=holder[:200],
                    **lead.mark()))
        db.session.commit()
        if claimed:
            started += runner.launch(run_id, timer, slot, now, holder, lead)
    return started


def claim_due(now: datetime, holder: str, lead: Lead, enabled: set[str], runner: Runner,
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
        if runner.free() <= 0 and not in_flight(timer.id):
            db.session.rollback()
            return started, False  # wait for a worker; the tick looks again shortly
        try:
            started += _claim_slot(timer, now, holder, lead, runner)
        except Deposed:
            return started, False  # another leads now: it claims the rest
        except (ValueError, LookupError, TypeError, ArithmeticError) as exc:
            _quarantine(timer.id, exc, now)  # a bad schedule pauses its timer, not the scheduler
        claims += 1
    return started, claims >= CLAIM_BATCH  # no row is left locked: each claim committed


class Deposed(Exception):
    """The plugin key's leadership is no longer the one the tick was called with."""


def _claim_slot(timer: Timer, now: datetime, holder: str, lead: Lead, runner: Runner) -> int:
    """Claim the timer's next slot (run, skip or catch up) and advance it; return runs started.

    Advancing the timer is fenced by lead: a deposed leader claims nothing.
    """
    schedule = Schedule.of(timer)
    due = timer.next_run_at
    if due is None:
        raise ValueError("a timer picked as due has no due time")
    slot, status, trigger, error = due, "running", "schedule", ""
    if now - due > timedelta(seconds=timer.grace_seconds):
        slot = max(schedule.latest_at_or_before(now) or due, due)
        late = f"Due at {due:%Y-%m-%d %H:%M:%S} UTC; the scheduler was {now - due} late."
        if timer.misfire == "skip":
            status, error = "skipped", f"{late} Skipped (misfire policy: skip)."
        else:
            trigger = "catch_up"
    if status == "running" and in_flight(timer.id):
        status, error = "skipped", "Skipped: the previous run was still running."
    advanced = rows_changed(
        sa.update(Timer).where(Timer.id == timer.id, Timer.next_run_at == due, lead.holds())
        .values(next_run_at=schedule.next_after(slot)))
    if not advanced:  # the row is locked by this transaction: only the fence can refuse
        db.session.rollback()
        raise Deposed()
    run_id = db.session.scalar(
        insert_ignoring_conflicts(TimerRun, ["timer_id", "scheduled_for"])
        .values(timer_id=timer.id, scheduled_for=slot, trigger=trigger, status=status,
                started_at=now if status == "running" else None, error=error, result="",
                instance=holder[:200], finished_at=None if status == "running" else now,
                **lead.mark())
        .returning(TimerRun.id))
    db.session.commit()
    if run_id is None or status != "running":
        return 0  # another leader claimed this slot, or it is recorded as skipped
    return runner.launch(run_id, timer, slot, now, holder, lead)


def _quarantine(timer_id: int, exc: Exception, now: datetime) -> None:
    db.session.rollback()
    log.exception("timer %s has a schedule that cannot be computed; pausing it", timer_id)
    reason = f"Paused: its schedule cannot be computed ({exc})."[:500]
    paused = rows_changed(sa.update(Timer).where(Timer.id == timer_id, ~Timer.paused)
                          .values(paused=True, paused_reason=reason))
    if paused:
        alerts.timer_paused(db.session.get_one(Timer, timer_id), reason, now)
    db.session.commit()
