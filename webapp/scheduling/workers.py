"""Worker threads that run plugin code (timer runs and hook batches) for the plugin tick.

The tick claims work in the database, then hands it to a daemon thread here
and returns at once; the thread records its own outcome with a conditional
UPDATE (status still 'running'), so a run the tick has meanwhile marked timed
out stays timed out. Python cannot kill a thread: a run past its maximum
runtime is abandoned (recorded as timed out, no longer counted here) and left
to finish on its own.
"""

import logging
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime

import sqlalchemy as sa
from flask import Flask

from ..extensions import db
from ..leadership.fence import Lead
from ..plugins import registry
from ..plugins.base import RunContext
from ..timers.runs import begin_run, finish_run
from .engines import working_on

log = logging.getLogger("soloist.workers")

# Threads in flight per process, by kind of work: a kind that hangs cannot take the others'
# places (eight hung hooks leave timer runs and webhook senders their own slots).
SLOTS = {"run": 4, "hooks": 4, "core": 2, "send": 4}  # core: the built-in plugins' hooks
OUTCOME_TRIES = 4  # a run's outcome write, tried on a fresh connection each time
OUTCOME_BACKOFF = 0.25  # seconds before the second try, doubled before each next one

_lock = threading.Lock()
_threads: dict[str, threading.Thread] = {}  # key "<kind>:<plugin or endpoint>[:<id>]"
_abandoned: dict[str, threading.Thread] = {}


def busy(key: str) -> bool:
    """Return whether the work called key is running in this process (or about to start)."""
    with _lock:
        thread = _threads.get(key)
        return thread is not None and not _ended(thread)


def free_slots(kind: str = "run") -> int:
    """Return how many more workers of kind ("run", "hooks" or "send") may start now."""
    with _lock:
        for key in [k for k, t in _threads.items() if _ended(t)]:
            del _threads[key]
        return SLOTS[kind] - sum(1 for k in _threads if k.split(":", 1)[0] == kind)


def start(key: str, app: Flask, target: Callable[[], None],
          engine: sa.Engine | None = None) -> None:
    """Run target in a daemon thread inside its own app context, on engine (plugin work's
    own pool; None: the app's)."""

    def body() -> None:
        with working_on(app, engine):
            try:
                target()
            except Exception:
                log.exception("worker %s failed", key)

    thread = threading.Thread(target=body, name=f"soloist-{key}", daemon=True)
    with _lock:
        _threads[key] = thread  # busy from here on: a tick never settles a run being launched
    try:
        thread.start()
    except BaseException:
        with _lock:
            _threads.pop(key, None)
        raise


def _ended(thread: threading.Thread) -> bool:
    return thread.ident is not None and not thread.is_alive()


def abandon(key: str) -> None:
    """Stop counting a worker (it ran past its maximum runtime); it finishes on its own."""
    with _lock:
        thread = _threads.pop(key, None)
        if thread is not None:
            _abandoned[f"{key}:{thread.ident}"] = thread  # one key may be abandoned twice


def abandoned(plugin: str) -> int:
    """Return how many abandoned threads of plugin are still alive in this process."""
    with _lock:
        for key in [k for k, t in _abandoned.items() if not t.is_alive()]:
            del _abandoned[key]
        return sum(1 for k in _abandoned if k.split(":")[1:2] == [plugin])


def drain(timeout: float) -> bool:
    """Wait up to timeout for every worker, abandoned ones too; return whether all finished."""
    deadline = time.monotonic() + timeout
    while True:
        with _lock:
            alive = [t for t in [*_threads.values(), *_abandoned.values()] if t.is_alive()]
        if not alive:
            return True
        if time.monotonic() >= deadline:
            return False
        alive[0].join(min(0.05, max(0.0, deadline - time.monotonic())))


def execute_run(run_id: int, timer_id: int, qualified: str, params: dict,
                scheduled_for: datetime, started_at: datetime, holder: str,
                max_runtime: float, app: Flask, lead: Lead) -> None:
    """Run one claimed timer run and record its outcome (called in a worker).

    lead is the leadership that claimed it: the run starts only while its claim and that
    leadership hold (begin_run), and what the action claims is fenced by it. The outcome
    write is tried again on a fresh connection if it fails (record_outcome).
    """
    if not begin_run(run_id, lead, started_at):
        log.warning("timer run %s (%s) not started: its claim or leadership is gone",
                    run_id, qualified)
        return
    origin = time.monotonic()
    status, result, error = "succeeded", "", ""
    try:
        found = registry.find_action(qualified)
        if found is None:
            raise LookupError(f"action {qualified} is not loaded")
        ctx = RunContext(app, run_id, timer_id, scheduled_for, started_at, holder,
                         origin + max_runtime, lead, time.sleep)
        result = str(found[1].func(ctx, **params) or "")
    except Exception as exc:  # the action's failure is the run's result
        _forget_transaction()
        log.warning("timer run %s (%s) failed: %s", run_id, qualified, exc)
        status = "failed"
        error = f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()[-3000:]}"
    record_outcome(run_id, timer_id, status, result, error, started_at,
                   time.monotonic() - origin)


def record_outcome(run_id: int, timer_id: int, status: str, result: str, error: str,
                   started_at: datetime, duration: float) -> bool:
    """Record a run's outcome (finish_run), trying again on a fresh connection if it fails.

    A connection ended under the run (a failover, an idle-in-transaction timeout, a
    terminated backend) must not leave the run 'running': every later slot of its timer
    would be skipped until its maximum runtime. Bounded: past the last try the run is left
    to the leader's next tick (webapp.timers.leader.settle_orphans). Return whether it was written.
    """
    for attempt in range(OUTCOME_TRIES):
        try:
            finish_run(run_id, timer_id, status, result, error, started_at, duration)
            return True
        except sa.exc.SQLAlchemyError as exc:
            log.warning("timer run %s: recording its outcome failed (try %d of %d): %s",
                        run_id, attempt + 1, OUTCOME_TRIES, exc)
            db.session().invalidate()  # the next try checks out another connection
            if attempt + 1 < OUTCOME_TRIES:
                time.sleep(OUTCOME_BACKOFF * 2 ** attempt)
    log.error("timer run %s: its outcome (%s) could not be recorded; the leader's next tick "
              "settles it", run_id, status)
    return False


def _forget_transaction() -> None:
    """Roll back what a failed action left open; a connection that died under it is dropped."""
    try:
        db.session.rollback()
    except sa.exc.SQLAlchemyError:
        db.session().invalidate()
