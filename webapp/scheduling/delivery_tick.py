"""The plugin tick's delivery steps: hook batches and webhook senders, bounded in time.

Plugin code and receivers run in worker threads (webapp.scheduling.workers), each
kind with slots of its own. A hook call past its maximum runtime is recorded as
timed out and its thread abandoned; a plugin with too many abandoned threads
still alive is paused, with the reason shown on the Plugins page.
"""

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import datetime
from functools import partial

import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.exc import SQLAlchemyError

from ..db import clock, wake_scheduler
from ..extensions import db
from ..leadership.fence import Lead
from ..leadership.keys import PLUGINS
from ..ops import alerts
from ..plugins import hooks, purge_sends, purges, registry, webhooks
from ..site import purgers
from . import workers

log = logging.getLogger("soloist.timers")

SEND_BUDGET = 60.0  # seconds one sender thread works before the tick looks again


def this_app() -> Flask:
    """Return the app itself, not the proxy: the worker threads it is handed to outlive the
    tick's context."""
    return current_app._get_current_object()  # type: ignore[attr-defined]


def hook_kind(plugin: str) -> str:
    """Return the worker slots a plugin's hook batches use.

    Built-in plugins' hooks (the sitemap's) have slots of their own: installed plugins that
    hang can hold every other hook slot until they time out, but never the built-ins'.
    """
    return "core" if plugin in registry.BUILTIN else "hooks"


def hook_key(plugin: str) -> str:
    """Return the worker key of a plugin's hook batch."""
    return f"{hook_kind(plugin)}:{plugin}"


def run_key(plugin: str, run_id: int) -> str:
    """Return the worker key of a timer run (its plugin counts its hung threads)."""
    return f"run:{plugin}:{run_id}"


def expire_hooks(now: datetime) -> int:
    """Time out hook calls past their maximum runtime; pause plugins that keep hanging."""
    late = hooks.expire(now)
    for name in late:
        workers.abandon(hook_key(name))
    pause_hung_plugins(set(late), now)
    return len(late)


def pause_hung_plugins(names: set[str], now: datetime) -> None:
    """Pause each plugin of names whose abandoned threads reached the bound."""
    limit = current_app.config["PLUGIN_MAX_ABANDONED"]
    for name in sorted(names):
        hung = workers.abandoned(name)
        if hung >= limit:
            reason = (f"Paused automatically: {hung} of its calls ran past their maximum "
                      "runtime and are still running. Fix the plugin, then switch it on.")
            log.warning("plugin %s paused: %d hung threads", name, hung)
            if name in registry.enabled_names():  # once, when it turns paused
                alerts.plugin_paused(name, reason, now)
            registry.set_enabled(name, False, reason)  # commits the alert with the pause


def start_hook_batches(now: datetime, holder: str, lead: Lead, enabled: set[str],
                       engine: sa.Engine | None = None) -> int:
    """Start one worker per plugin with hook deliveries due, on engine (plugin work's pool;
    None: the app's); return how many started."""
    app, started = this_app(), 0
    for name in hooks.plugins_with_due_work(now, lead, enabled):
        key = hook_key(name)
        if workers.busy(key) or workers.free_slots(hook_kind(name)) <= 0:
            continue
        token, ids = hooks.claim(name, now, holder, lead)
        if ids:
            workers.start(key, app, partial(hooks.run_batch, name, ids, clock(now), token),
                          engine)
            started += 1
    return started


def waking(send: Callable[[], object]) -> Callable[[], None]:
    """Return send, followed by a wake of the plugin leader once it has ended.

    The tick that started a sender computed its next wake while the sender's rows were
    claimed: a lease away, not their next attempt (a failed purge's is 5 s on), so it
    would sleep past that attempt until something else woke it (measured: a purger back
    after an outage purged 9 s later, up to IDLE). At the sender's end the rows say when.
    """
    def run() -> None:
        try:
            send()
        finally:
            with suppress(SQLAlchemyError):  # the database away: the leader polls anyway
                db.session.rollback()
                wake_scheduler(PLUGINS.name)
                db.session.commit()

    return run


def start_senders(now: datetime, lead: Lead, enabled: set[str],
                  engine: sa.Engine | None = None) -> int:
    """Start the webhook senders and the cache purgers' senders due, on engine (plugin work's
    pool; None: the app's); return how many started."""
    return start_webhook_senders(now, lead, enabled, engine) + start_purgers(now, lead, engine)


def start_webhook_senders(now: datetime, lead: Lead, enabled: set[str],
                          engine: sa.Engine | None = None) -> int:
    """Start one sender per endpoint with deliveries due (bounded); return how many started."""
    if "webhooks" not in enabled:
        return 0
    app, started = this_app(), 0
    for endpoint_id in webhooks.endpoints_due(now, lead):
        key = f"send:{endpoint_id}"
        if workers.busy(key):
            if not webhooks.lapsed(endpoint_id, now):
                continue
            # its sender is stuck past the lease (a name lookup or a trickling answer): leave
            # it behind; its claim is taken over and its late writes change nothing
            workers.abandon(key)
        if workers.free_slots("send") <= 0:
            break
        workers.start(key, app, waking(partial(webhooks.send_endpoint, endpoint_id, lead,
                                               clock(now), SEND_BUDGET, time.sleep)), engine)
        started += 1
    return started


def start_purgers(now: datetime, lead: Lead, engine: sa.Engine | None = None) -> int:
    """Start one sender per configured purger with purges due; return how many started.

    One thread each, in the send slots: a dead CDN API holds its own sender, no other's.
    """
    configured = purgers.configured()
    if not configured:
        return 0  # no purger: not a statement more a tick
    app, started = this_app(), 0
    for name in purges.purgers_due(now, lead, configured):
        key = f"purge:{name}"
        if workers.busy(key):
            if not purges.lapsed(name, now):
                continue
            workers.abandon(key)  # stuck past its lease: its claim is taken over (fenced)
        if workers.free_slots("send") <= 0:
            break
        workers.start(key, app, waking(partial(purge_sends.send_purger, name, lead,
                                               clock(now), SEND_BUDGET)), engine)
        started += 1
    return started


def fan_out(now: datetime, enabled: set[str]) -> int:
    """Turn new outbox events into hook deliveries, webhook deliveries and cache purges, in
    one transaction."""
    def also(events: Sequence[hooks.Event]) -> None:
        if "webhooks" in enabled:
            webhooks.enqueue_events(events)
        purges.enqueue_events(events)

    return hooks.fan_out(now, enabled, also)
