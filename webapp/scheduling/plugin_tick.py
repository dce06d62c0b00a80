"""The plugin scheduler's tick: run due timer slots and feed outbox events to hooks.

Each call is a short, bounded unit of work on the leader's scheduler thread:
mark runs past their maximum runtime as timed out, start queued run-now
requests, claim due slots, fan outbox events out to hooks, and return when
something is next due. It looks first (webapp.scheduling.plugin_due, one
statement): when nothing is due, that is the whole tick. Actions and hooks run
in worker threads (webapp.scheduling.workers), never here.

What it writes about timers (claims, run-now requests, expiry, orphans) is the timers'
(webapp.timers.leader); this module says in what order, and owns the threads: a run
past its maximum runtime leaves its thread behind, a plugin that keeps hanging is
paused, and a claimed run is started here (RUNNER).
"""

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

import sqlalchemy as sa
from flask import current_app

from ..extensions import db
from ..leadership.fence import Lead, record_work
from ..leadership.keys import PLUGINS
from ..models import Timer
from ..ops.freezes import is_frozen
from ..plugins import hooks, registry
from ..timers import ensure_default_timers, leader
from ..timers.runs import finish_run
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
    limit = current_app.config["LEADER_STALE_SECONDS"] / BUDGET_SHARE
    deadline = monotonic() + limit
    return lambda: monotonic() >= deadline


def tick(now: datetime, holder: str = "", term: int | None = None,
         plugin_engine: sa.Engine | None = None) -> datetime | None:
    """Do one unit of plugin work at now; return when the next one is due.

    With term, holder is this leader's lock session name (leader_state's holder) and
    (term, holder) the leadership every claim and write is fenced by; without, the
    current leadership is read and holder only names the runs. A new leadership takes
    the previous ones' unfinished claims and settles their runs at once. The reads share
    one transaction, ended before the tick returns. Plugin code runs on plugin_engine (the
    scheduler's pool for it, webapp.scheduling.engines; None: the app's).
    """
    try:
        lead = Lead.of(term, holder)
        enabled = registry.enabled_names()
        _ensure_default_timers(now)
        ahead = plugin_due.look(now, lead, enabled)
        if ahead.idle(now):
            return ahead.wake  # nothing to time out, start, claim, fan out or send
        return _work(now, holder, lead, enabled, plugin_engine)
    finally:
        db.session.rollback()  # the scheduler's connection never waits in a transaction


def _work(now: datetime, holder: str, lead: Lead, enabled: set[str],
          engine: sa.Engine | None) -> datetime:
    """Do the plugin work due at now, step by step, its threads on engine; return when the
    next is due."""
    over, runner = budget(), _Runner(engine)
    done = {"abandoned": leader.settle_orphans(now, lead, runner),
            "timed out": _expire_runs(now) + delivery_tick.expire_hooks(now)}
    if done["timed out"]:
        enabled = registry.enabled_names()  # a plugin may have been paused for hanging
    more = False
    if not is_frozen("timers"):  # frozen: no run starts; hooks and deliveries go on
        done["started"] = leader.start_queued(now, holder, lead, enabled, runner)
        claimed, more = leader.claim_due(now, holder, lead, enabled, runner, over)
        done["started"] += claimed
    done["events"] = delivery_tick.fan_out(now, enabled)
    done["hook batches"] = delivery_tick.start_hook_batches(now, holder, lead, enabled,
                                                            engine)
    done["senders"] = delivery_tick.start_senders(now, lead, enabled, engine)
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


def _expire_runs(now: datetime) -> int:
    """Time out runs past their maximum runtime, leave their threads behind, and pause a
    plugin whose abandoned threads reached the bound; return how many timed out."""
    expired = leader.expire_overdue(now)
    for run_id, plugin in expired:
        workers.abandon(delivery_tick.run_key(plugin, run_id))
    delivery_tick.pause_hung_plugins({plugin for _run, plugin in expired}, now)
    return len(expired)


class _Runner:
    """The worker threads, as the timer leader's writes see them (timers.leader.Runner);
    their runs work on engine (None: the app's pool)."""

    def __init__(self, engine: sa.Engine | None = None) -> None:
        self.engine = engine

    def free(self) -> int:
        return workers.free_slots()

    def running(self, run_id: int, plugin: str) -> bool:
        return workers.busy(delivery_tick.run_key(plugin, run_id))

    def launch(self, run_id: int, timer: Timer, slot: datetime, now: datetime, holder: str,
               lead: Lead) -> int:
        # _launch looked up at call time: tests stand in for it
        return _launch(run_id, timer, slot, now, holder, lead, engine=self.engine)


RUNNER = _Runner()  # on the app's pool


def _launch(run_id: int, timer: Timer, slot: datetime, now: datetime, holder: str,
            lead: Lead, engine: sa.Engine | None = None) -> int:
    """Start a claimed run's thread; return 1, or settle the run as failed and return 0.

    A thread that cannot start (the process is out of threads) must not leave a run
    'running' that nothing runs: that would skip the timer's slots for its maximum runtime.
    """
    app = delivery_tick.this_app()
    timer_id, plugin = timer.id, timer.plugin
    try:
        workers.start(delivery_tick.run_key(plugin, run_id), app, partial(
            workers.execute_run, run_id, timer_id, timer.qualified_action,
            dict(timer.params or {}), slot, now, holder, float(timer.max_runtime_seconds),
            app, lead), engine)
    except Exception as exc:  # noqa: BLE001 - whatever it was, the run did not start
        db.session.rollback()
        log.exception("timer run %s could not start", run_id)
        finish_run(run_id, timer_id, "failed", "", f"Not started: {type(exc).__name__}: {exc}",
                   now, 0.0)
        return 0
    return 1
