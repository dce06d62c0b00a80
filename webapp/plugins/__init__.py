"""Plugins: actions for timers, hooks fed from the outbox, and the built-in plugins.

Write a plugin with the API in webapp.plugins.base and expose it through the
entry-point group `soloist.plugins` (see webapp.plugins.registry).
"""

from .base import Action, HookEvent, Param, Plugin, RunContext, ValidationError

__all__ = ["Action", "HookEvent", "Param", "Plugin", "RunContext", "ValidationError"]
