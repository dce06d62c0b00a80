"""Plugins: actions for timers, hooks fed from the outbox, and the built-in plugins.

Write a plugin with the API in webapp.plugins.base and expose it through the
entry-point group `soloist.plugins` (see webapp.plugins.registry). It may import the
bottom of the house, leadership (keys) and ops (audit, alerts). Timers build on plugins
(their actions and schedules), so plugins import no timers: a redelivery wakes the
plugin leader instead of queueing the webhooks timer.
"""

from .base import Action, HookEvent, Param, Plugin, RunContext, ValidationError

__all__ = ["Action", "HookEvent", "Param", "Plugin", "RunContext", "ValidationError"]
