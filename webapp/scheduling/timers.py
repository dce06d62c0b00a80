"""The plugin scheduler's tick: runs the hooks registered for the plugin key's leader."""

from collections.abc import Callable
from datetime import datetime, timedelta

IDLE = timedelta(seconds=60)

# Each hook is hook(now, instance) -> next wake or None; the "Plugins" work adds timers here.
HOOKS: list[Callable[[datetime, str], datetime | None]] = []


def tick(now: datetime, instance: str = "") -> datetime | None:
    """Run every plugin hook once; return the earliest next wake."""
    wakes = [now + IDLE]
    for hook in HOOKS:
        upcoming = hook(now, instance)
        if upcoming is not None:
            wakes.append(upcoming)
    return min(wakes)
