"""Models for plugins, timers and webhooks (filled in by the "Plugins" work)."""

__all__: list[str] = []
