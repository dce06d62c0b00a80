"""When the plugin tick next has work: the owners' reads of it, in one statement.

The timers (the leader's side, here), hooks, webhooks and posts each give the reads
behind their next due time as scalar subqueries and turn the values into a time (and
say whether work waits now that no time shows: a claim to take over, a late hook
call). One SELECT reads them all in one round trip, so an idle tick is this statement
and the read of the plugin switches. The statement depends only on the enabled plugins
and the leadership, not on the time, so it is built once for each.
"""

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import aliased

from .. import posts
from ..extensions import db
from ..leadership.fence import Lead
from ..models import Timer, TimerRun
from ..plugins import hooks, purge_sends, webhooks
from ..site import purgers

IDLE = timedelta(seconds=60)
POST_SETTLE = timedelta(seconds=0.3)


@dataclass(frozen=True)
class Ahead:
    """When plugin work is next due (at most IDLE away), and whether work waits now anyway."""

    wake: datetime
    waiting: bool

    def idle(self, now: datetime) -> bool:
        """Return whether the tick has nothing to do at now."""
        return self.wake > now and not self.waiting


def _timer_reads(enabled: frozenset[str], lead: Lead) -> list[sa.ColumnElement]:
    """Return the first slot, whether a run-now request can start, whether runs run, and

    whether one runs under another leadership (an orphan to settle now).
    """
    mine = Timer.plugin.in_(enabled)
    running = aliased(TimerRun)
    return [
        sa.select(sa.func.min(Timer.next_run_at)).where(~Timer.paused, mine).scalar_subquery(),
        sa.exists().where(TimerRun.timer_id == Timer.id, TimerRun.status == "queued", mine,
                          ~sa.exists().where(running.timer_id == TimerRun.timer_id,
                                             running.status == "running")),
        sa.exists().where(TimerRun.status == "running"),
        sa.exists().where(TimerRun.status == "running",
                          lead.other(TimerRun.claimed_term, TimerRun.claimed_holder)),
    ]


RUN_DEADLINES = (sa.select(TimerRun.started_at, Timer.max_runtime_seconds)
                 .join(Timer, Timer.id == TimerRun.timer_id).where(TimerRun.status == "running"))


@functools.lru_cache(maxsize=16)
def _statement(enabled: frozenset[str], lead: Lead,
               cached: tuple[str, ...]) -> tuple[sa.Select, tuple[int, ...]]:
    """Return the one SELECT of every owner's reads, and how many columns each owner has.

    cached: the purgers configured (CACHE_PURGE's names), whose purges are read too.
    """
    groups: list[list[Any]] = [
        _timer_reads(enabled, lead), hooks.due_reads(lead, enabled), posts.next_due_reads(),
        webhooks.due_reads(lead) if "webhooks" in enabled else [],
        purge_sends.due_reads(lead, cached) if cached else []]
    columns = [column for group in groups for column in group]
    return (sa.select(*(c.label(f"r{i}") for i, c in enumerate(columns))),
            tuple(len(group) for group in groups))


def _read(enabled: set[str], lead: Lead) -> list[list]:
    """Run the one SELECT; return each owner's values."""
    statement, sizes = _statement(frozenset(enabled), lead, tuple(sorted(purgers.configured())))
    row, values = list(db.session.execute(statement).one()), []
    for size in sizes:
        values.append(row[:size])
        row = row[size:]
    return values


def look(now: datetime, lead: Lead, enabled: set[str]) -> Ahead:
    """Return when plugin work is next due and whether work no time shows waits now."""
    timer_values, hook_values, post_times, webhook_values, purge_values = _read(enabled, lead)
    first_slot, startable, running, orphaned = timer_values
    hook_due, hooks_waiting = hooks.due(now, hook_values)
    webhook_due, webhooks_waiting = webhooks.due(webhook_values, now) if webhook_values else (
        None, False)
    purge_due, purges_waiting = purge_sends.due(purge_values, now) if purge_values else (
        None, False)
    times = [now + IDLE, first_slot, hook_due, webhook_due, purge_due,
             now if startable else None]
    if running:
        times += [started + timedelta(seconds=limit)
                  for started, limit in db.session.execute(RUN_DEADLINES) if started]
    # Publishing NOTIFYs this leader on PostgreSQL; SQLite has no NOTIFY, so also look
    # again just after the next post is due, when its outbox event is there for the hooks.
    post_due = min((t for t in post_times if t is not None), default=None)
    if post_due is not None and post_due + POST_SETTLE > now:
        times.append(post_due + POST_SETTLE)
    return Ahead(min(t for t in times if t is not None),
                 bool(orphaned) or hooks_waiting or webhooks_waiting or purges_waiting)
