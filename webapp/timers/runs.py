"""Timer runs: start one only under its claim, record its outcome once, and count failures
toward a timer's pause."""

import logging
from datetime import datetime, timedelta

import sqlalchemy as sa

from ..db import rows_changed, wake_scheduler
from ..extensions import db
from ..leadership.fence import Lead
from ..models import Timer, TimerRun
from ..ops import alerts

log = logging.getLogger("soloist.timers")

NOT_STARTED = ("Abandoned: not started, its leader no longer leads the plugin scheduler "
               "(it handed over, or was deposed, between the claim and the start).")


def _claimed_by(run_id: int, lead: Lead) -> list[sa.ColumnElement[bool]]:
    return [TimerRun.id == run_id, TimerRun.status == "running",
            TimerRun.claimed_term == lead.term, TimerRun.claimed_holder == lead.holder]


def begin_run(run_id: int, lead: Lead, at: datetime) -> bool:
    """Return whether the run may start now: still running under lead's claim, lead leads.

    A fenced write, at the moment of the side effect: a leader that was deposed (frozen,
    then thawed) or has handed over since its claim starts nothing, and a run already
    recorded abandoned is never started. A run it may not start is settled here, at once,
    so its timer's next slot is not skipped while this process lives.
    """
    started = rows_changed(sa.update(TimerRun).where(*_claimed_by(run_id, lead),
                                                     lead.holds())
                           .values(status="running"))
    if not started:
        db.session.execute(sa.update(TimerRun).where(*_claimed_by(run_id, lead)).values(
            status="abandoned", finished_at=at, error=NOT_STARTED, duration_seconds=0.0))
        wake_scheduler("plugins")
    db.session.commit()
    return bool(started)


def finish_run(run_id: int, timer_id: int, status: str, result: str, error: str,
               started_at: datetime, duration: float) -> None:
    """Record a run's outcome unless it was already settled (e.g. timed out)."""
    done = rows_changed(
        sa.update(TimerRun)
        .where(TimerRun.id == run_id, TimerRun.status == "running")
        .values(status=status, result=result[:500], error=error, duration_seconds=duration,
                finished_at=started_at + timedelta(seconds=duration))
    )
    if done:
        count_outcome(timer_id, status == "succeeded", error.split("\n", 1)[0],
                      started_at + timedelta(seconds=duration))
    wake_scheduler("plugins")  # a queued run may have been waiting for this one
    db.session.commit()


def count_outcome(timer_id: int, ok: bool, reason: str, at: datetime) -> None:
    """Reset or count consecutive failures; pause the timer at its limit (no commit).

    An automatic pause writes its ops.timer_paused alert in the same transaction.
    """
    if ok:
        db.session.execute(sa.update(Timer).where(Timer.id == timer_id)
                           .values(consecutive_failures=0))
        return
    db.session.execute(sa.update(Timer).where(Timer.id == timer_id)
                       .values(consecutive_failures=Timer.consecutive_failures + 1))
    timer = db.session.get(Timer, timer_id)
    if timer is None or timer.paused or not timer.max_failures:
        return
    if timer.consecutive_failures >= timer.max_failures:
        timer.paused = True
        timer.paused_reason = (f"Paused automatically after {timer.consecutive_failures} "
                               f"failed runs in a row. Last error: {reason}")[:500]
        log.warning("timer %s (%s) paused after %d failures", timer.id, timer.name,
                    timer.consecutive_failures)
        alerts.timer_paused(timer, timer.paused_reason, at)
