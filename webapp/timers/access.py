"""Who may change a timer: the built-in plugins that trim and deliver the audit trail are admins'.

The housekeeping plugin deletes leadership events and webhook delivery logs, which only
admins may read, and the webhooks plugin delivers them: an editor who could shorten the
retention, run it or pause delivery could erase or hold back what admins audit.
Editors keep every other timer, their own included.
"""

ADMIN_PLUGINS = frozenset({"housekeeping", "webhooks"})


def plugin_of(action: str) -> str:
    """Return the plugin part of 'plugin.action'."""
    return action.strip().partition(".")[0]


def may_change(user, plugin: str) -> bool:
    """Return whether user may create, change, run, pause or delete plugin's timers."""
    return plugin not in ADMIN_PLUGINS or bool(user.is_authenticated and user.can("admin"))


def refusal(plugin: str) -> str:
    """Say why an editor may not touch plugin's timers."""
    return (f"Only admins can change, run, pause or delete the {plugin} plugin's timers: "
            "they trim and deliver the audit trail (leadership events, webhook deliveries).")
