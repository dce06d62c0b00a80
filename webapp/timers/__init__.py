"""Timers as editors manage them: create, change, pause, resume, run now, and their runs.

The views and the JSON API both call these; every function commits its own work,
and wakes the plugin leader when a timer may now be due sooner. The plugin
leader's side (claiming due slots, running actions) is in webapp.scheduling. It may
import the bottom of the house, ops (audit, alerts) and plugins (actions, schedules).
"""

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from ..db import database_now, insert_ignoring_conflicts, wake_scheduler
from ..extensions import db
from ..models import Timer, TimerRun
from ..ops import audit
from ..plugins import registry
from ..plugins.base import ValidationError
from ..plugins.schedules import Schedule
from .fields import MISFIRE, parse_moment, parse_timer, zones

__all__ = ["MISFIRE", "create_timer", "delete_timer", "ensure_default_timers", "history",
           "list_timers", "parse_moment", "parse_timer", "pause", "queue_run_now", "resume",
           "update_timer", "zones"]

log = logging.getLogger("soloist.timers")


def _target(timer: Timer) -> str:
    return audit.target("timer", timer.id, timer.name)


def _apply(timer: Timer, values: dict, now: datetime) -> None:
    for key, value in values.items():
        setattr(timer, key, value)
    if timer.kind == "every" and timer.start_at is None:
        timer.start_at = now.replace(microsecond=0)
    timer.next_run_at = Schedule.of(timer).next_after(now)


def create_timer(data: Mapping[str, Any], now: datetime | None = None) -> Timer:
    """Validate data and store a new timer; wake the plugin leader."""
    now = now or database_now()
    values = parse_timer(data)
    refuse_past_once(values, now)
    timer = Timer(consecutive_failures=0, paused=False, paused_reason="")
    _apply(timer, values, now)
    db.session.add(timer)
    db.session.flush()  # the audit row names the new timer's id
    audit.record("timer.create", _target(timer), {
        key: values[key] for key in ("action", "params", "kind", "every", "unit", "cron",
                                     "run_at", "timezone") if key in values})
    wake_scheduler("plugins")
    db.session.commit()
    return timer


def update_timer(timer: Timer, data: Mapping[str, Any], now: datetime | None = None) -> Timer:
    """Validate data and change timer; the next run is recomputed from its new schedule."""
    now = now or database_now()  # first: on PostgreSQL it ends the transaction that loaded timer
    values = parse_timer(data)
    if timer.default_key and (values["plugin"], values["action"]) != (timer.plugin, timer.action):
        # the plugin finds its own timer by (plugin, default_key): moving it would orphan it
        raise ValidationError({"action": f"This is the {timer.plugin} plugin's own timer, so its "
                                         f"action stays {timer.qualified_action}; create a new "
                                         "timer for another action."})
    if values["run_at"] != timer.run_at:
        refuse_past_once(values, now)
    before = {key: getattr(timer, key) for key in values}
    audit.record("timer.edit", _target(timer), audit.changes(before, values))
    _apply(timer, values, now)
    wake_scheduler("plugins")
    db.session.commit()
    return timer


def refuse_past_once(values: dict, now: datetime) -> None:
    """Refuse a one-off timer whose time has passed (its form and its preview alike)."""
    if values["kind"] == "once" and values["run_at"] <= now:
        raise ValidationError({"run_at": "That time has passed; pick a time in the future."})


def list_timers() -> list[tuple[Timer, TimerRun | None]]:
    """Return every timer with its latest finished (or running) run."""
    timers = db.session.scalars(sa.select(Timer).order_by(Timer.plugin, Timer.name)).all()
    latest = (sa.select(sa.func.max(TimerRun.id)).where(TimerRun.status != "queued")
              .group_by(TimerRun.timer_id))
    runs = {r.timer_id: r for r in db.session.scalars(
        sa.select(TimerRun).where(TimerRun.id.in_(latest)))}
    return [(t, runs.get(t.id)) for t in timers]


def history(timer: Timer, limit: int = 50) -> list[TimerRun]:
    """Return a timer's latest runs, newest first."""
    return list(db.session.scalars(
        sa.select(TimerRun).where(TimerRun.timer_id == timer.id)
        .order_by(TimerRun.scheduled_for.desc(), TimerRun.id.desc()).limit(limit)))


def queue_run_now(timer: Timer, now: datetime | None = None, *,
                  audited: bool = True) -> TimerRun:
    """Queue a run for the plugin leader (one waiting run per timer at most).

    audited=False when the run is part of another recorded change (a redelivery).
    """
    now = now or database_now()
    waiting = db.session.scalar(sa.select(TimerRun).where(
        TimerRun.timer_id == timer.id, TimerRun.status == "queued").limit(1))
    if waiting is not None:
        return waiting
    for nudge in range(100):  # the slot's time is taken (a scheduled run): a microsecond on
        run_id = db.session.scalar(
            insert_ignoring_conflicts(TimerRun, ["timer_id", "scheduled_for"])
            .values(timer_id=timer.id, scheduled_for=now + timedelta(microseconds=nudge),
                    queued_at=now, trigger="manual", status="queued", result="", error="",
                    instance="")
            .returning(TimerRun.id))
        if run_id is not None:
            break
    if audited:
        audit.record("timer.run", _target(timer), {"run": run_id})
    wake_scheduler("plugins")
    db.session.commit()
    return db.session.get_one(TimerRun, run_id)


def pause(timer: Timer, reason: str = "Paused by an editor.") -> None:
    """Stop a timer from running on schedule until it is resumed."""
    audit.record("timer.pause", _target(timer), {"paused": [timer.paused, True]})
    timer.paused = True
    timer.paused_reason = reason[:500]
    db.session.commit()


def resume(timer: Timer, now: datetime | None = None) -> None:
    """Run a timer on schedule again, from the next slot after now, with failures forgiven."""
    now = now or database_now()
    audit.record("timer.resume", _target(timer), {"paused": [timer.paused, False]})
    timer.paused = False
    timer.paused_reason = ""
    timer.consecutive_failures = 0
    timer.next_run_at = Schedule.of(timer).next_after(now)
    wake_scheduler("plugins")
    db.session.commit()


def delete_timer(timer: Timer) -> None:
    """Delete a timer and its history (a plugin's own timers can only be paused)."""
    if timer.default_key:
        raise ValidationError({"timer": "A plugin's own timer cannot be deleted; pause it."})
    audit.record("timer.delete", _target(timer), {"action": timer.qualified_action})
    db.session.delete(timer)
    db.session.commit()


def ensure_default_timers(now: datetime) -> int:
    """Create the default timers loaded plugins ask for and do not have yet; return how many."""
    have = set(db.session.execute(
        sa.select(Timer.plugin, Timer.default_key).where(Timer.default_key.is_not(None))).all())
    rows = []
    for plugin in registry.plugins().values():
        for default in plugin.default_timers:
            if (plugin.name, default.key) in have:
                continue
            try:
                rows.append(_default_row(plugin.name, default, now))
            except Exception:  # one plugin's bad timer must not stop the others
                log.exception("default timer %s of plugin %s is invalid", default.key,
                              plugin.name)
    if rows:
        db.session.execute(insert_ignoring_conflicts(Timer, ["plugin", "default_key"]), rows)
    db.session.commit()
    return len(rows)


def _default_row(plugin: str, default, now: datetime) -> dict:
    start = now.replace(microsecond=0)
    row = {"name": default.name, "plugin": plugin, "action": default.action,
           "params": dict(default.params), "default_key": default.key,
           "every": None, "unit": None, "cron": None, "run_at": None,
           "start_at": start if default.schedule["kind"] == "every" else None,
           "timezone": default.timezone, "paused": False, "paused_reason": "",
           "misfire": default.misfire, "grace_seconds": default.grace_seconds,
           "max_runtime_seconds": default.max_runtime_seconds, "max_failures": 0,
           "consecutive_failures": 0, "created_at": now, "updated_at": now}
    row.update(default.schedule)
    row["next_run_at"] = Schedule(row["kind"], row["timezone"], row["every"], row["unit"],
                                  row["cron"], None, row["start_at"]).next_after(now)
    return row
