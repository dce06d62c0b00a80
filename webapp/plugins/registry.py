"""Find the plugins (built in, entry points `soloist.plugins`), note the broken ones.

A plugin that fails to import or is not a Plugin is kept aside with its error;
the rest load and run. Which plugins are switched off lives in the database.
"""

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points

import sqlalchemy as sa

from ..extensions import db
from ..models import PluginState, utcnow
from ..ops import audit
from .base import Action, Plugin

log = logging.getLogger("soloist.plugins")

GROUP = "soloist.plugins"
BUILTIN = ("webhooks", "sitemap", "housekeeping")


@dataclass(frozen=True)
class Broken:
    """A plugin that could not be loaded, and why."""

    name: str
    source: str
    error: str


@dataclass
class _Loaded:
    plugins: dict[str, Plugin]
    broken: dict[str, Broken]
    sources: dict[str, str]


_loaded: _Loaded | None = None
_loads = 0  # how many times the plugins were loaded in this process
_registered: dict[str, Plugin] = {}


def register(plugin: Plugin) -> None:
    """Add a plugin from code (an embedding app, a test) and reload the registry."""
    _registered[plugin.name] = plugin
    reload()


def unregister(name: str) -> None:
    """Remove a plugin added with register()."""
    _registered.pop(name, None)
    reload()


def reload() -> None:
    """Forget what was loaded; the next lookup loads everything again."""
    global _loaded
    _loaded = None


def _load() -> _Loaded:
    """Load every plugin once; a second thread loading at the same moment gets the same
    plugin objects (Python imports each module once), so the race needs no lock."""
    global _loaded, _loads
    found = _loaded
    if found is None:
        _loads += 1
        found = _Loaded({}, {}, {})
        for name in BUILTIN:
            module = f"{__package__}.{name}"
            _add(found, name, f"built in ({module})",
                 lambda m=module: importlib.import_module(m).plugin)
        for ep in entry_points(group=GROUP):
            _add(found, ep.name, f"entry point {ep.value}", ep.load)
        for plugin in _registered.values():
            _add(found, plugin.name, "registered in code", lambda p=plugin: p)
        _loaded = found
    return found


def _add(loaded: _Loaded, name: str, source: str, loader: Callable) -> None:
    try:
        found = loader()
        plugin = found() if callable(found) and not isinstance(found, Plugin) else found
        if not isinstance(plugin, Plugin):
            raise TypeError(f"{source} gave {type(plugin).__name__}, not a soloist Plugin")
        if plugin.name in loaded.plugins:
            raise ValueError(f"a plugin named {plugin.name!r} is loaded already "
                             f"({loaded.sources[plugin.name]})")
    except Exception as exc:  # a broken plugin must not stop the others
        log.exception("plugin %s (%s) failed to load", name, source)
        loaded.broken[name] = Broken(name, source, f"{type(exc).__name__}: {exc}"[:500])
        return
    loaded.plugins[plugin.name] = plugin
    loaded.sources[plugin.name] = source


def loads() -> int:
    """Return how many times the plugins were loaded in this process (a reload counts)."""
    _load()
    return _loads


def plugins() -> dict[str, Plugin]:
    """Return the loaded plugins by name."""
    return dict(_load().plugins)


def broken() -> dict[str, Broken]:
    """Return the plugins that failed to load, by name."""
    return dict(_load().broken)


def source(name: str) -> str:
    """Return where a loaded plugin came from."""
    return _load().sources.get(name, "")


def disabled_names() -> set[str]:
    """Return the names of plugins switched off in the database."""
    return set(db.session.scalars(sa.select(PluginState.name).where(~PluginState.enabled)))


def enabled_names() -> set[str]:
    """Return the names of the loaded plugins that are switched on (one query)."""
    off = disabled_names()
    return {name for name in _load().plugins if name not in off}


def enabled_plugins() -> dict[str, Plugin]:
    """Return the loaded plugins that are switched on."""
    on = enabled_names()
    return {name: p for name, p in plugins().items() if name in on}


def set_enabled(name: str, enabled: bool, reason: str = "") -> None:
    """Switch a plugin on or off (its timers wait and its hooks get no new events while off).

    reason says why Soloist switched it off itself; switching it on clears it.
    """
    state = db.session.get(PluginState, name)
    if state is None:
        state = PluginState(name=name)
        db.session.add(state)
    state.enabled = enabled
    state.paused_reason = "" if enabled else reason[:500]
    state.updated_at = utcnow()
    # a person's switch; Soloist's own pause (outside a request) is not recorded
    audit.record("plugin.enable" if enabled else "plugin.disable", audit.target("plugin", name))
    db.session.commit()


def paused_reasons() -> dict[str, str]:
    """Return why Soloist paused plugins itself, by name."""
    return dict(db.session.execute(sa.select(PluginState.name, PluginState.paused_reason).where(
        ~PluginState.enabled, PluginState.paused_reason != "")).all())


def find_action(qualified: str, enabled_only: bool = False) -> tuple[Plugin, Action] | None:
    """Return (plugin, action) for 'plugin.action', or None when there is no such action."""
    plugin_name, _, action_name = qualified.partition(".")
    found = (enabled_plugins() if enabled_only else plugins()).get(plugin_name)
    if found is None or action_name not in found.actions:
        return None
    return found, found.actions[action_name]


def action_choices() -> list[tuple[str, Action]]:
    """Return every ('plugin.action', action) of the loaded plugins, sorted."""
    return sorted(
        ((f"{p.name}.{a.name}", a) for p in plugins().values() for a in p.actions.values()),
        key=lambda item: item[0],
    )
