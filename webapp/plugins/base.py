"""The plugin API: a plugin declares actions, default timers and hooks.

    plugin = Plugin("greeter", "Greeter", "Says hello on a timer.")

    @plugin.action("hello", params=[Param("name", "str", default="world")])
    def hello(ctx, name):
        return f"hello {name}"            # shown as the run's result

    plugin.default_timer("hourly", "hello", every=(1, "hours"))

    @plugin.hook("on_publish")
    def published(event):                 # event.key names what happened: stay idempotent by it
        ...
"""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..timezones import is_zone
from .schedules import UNITS, check_cron

if TYPE_CHECKING:  # the plugin API stays free of the database
    from ..leadership.fence import Lead

HOOKS = ("on_publish", "on_unpublish", "on_update")
TOPIC_HOOKS = {"post.published": "on_publish", "post.unpublished": "on_unpublish",
               "post.updated": "on_update"}  # a live post's text changed
PARAM_TYPES = ("str", "int", "float", "bool")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ValidationError(ValueError):
    """Input Soloist cannot use; errors maps each field to a message to show next to it."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        self.field = next(iter(self.errors))
        super().__init__(f"{self.field}: {self.errors[self.field]}")


@dataclass(frozen=True)
class Param:
    """One parameter of an action: name, type (str, int, float, bool), default, help."""

    name: str
    type: str = "str"
    default: Any = None
    required: bool = False
    help: str = ""
    minimum: float | None = None

    def parse(self, raw: Any) -> Any:
        """Return raw as this parameter's type; raise ValueError with a readable reason."""
        if self.type == "bool":
            return _parse_bool(self.name, raw)
        if self.type in ("int", "float"):
            return self._parse_number(raw)
        return str(raw)

    def _parse_number(self, raw: Any) -> float | int:
        kind = int if self.type == "int" else float
        try:
            if isinstance(raw, bool) or (kind is int and isinstance(raw, float)):
                raise ValueError
            value = kind(str(raw).strip())
        except ValueError:
            word = "a whole number" if kind is int else "a number"
            raise ValueError(f"{self.name} must be {word}") from None
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{self.name} must be at least {self.minimum:g}")
        return value


def _parse_bool(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise ValueError(f"{name} must be true or false")


@dataclass
class Action:
    """A named callable a timer can run: func(ctx, **params) -> optional result text."""

    name: str
    func: Callable[..., Any]
    params: tuple[Param, ...] = ()
    help: str = ""

    def clean(self, raw: Mapping[str, Any] | None) -> dict[str, Any]:
        """Return params checked against the schema; raise ValidationError on 'params'."""
        raw = dict(raw or {})
        known = {p.name for p in self.params}
        unknown = sorted(set(raw) - known)
        if unknown:
            allowed = ", ".join(sorted(known)) or "none"
            raise ValidationError({"params": f"unknown parameter {unknown[0]} "
                                             f"(this action takes: {allowed})"})
        clean: dict[str, Any] = {}
        for param in self.params:
            if param.name not in raw or raw[param.name] in ("", None):
                if param.required:
                    raise ValidationError({"params": f"{param.name} is required"})
                if param.default is not None:
                    clean[param.name] = param.default
                continue
            try:
                clean[param.name] = param.parse(raw[param.name])
            except ValueError as exc:
                raise ValidationError({"params": str(exc)}) from None
        return clean


@dataclass(frozen=True)
class DefaultTimer:
    """A timer a plugin wants to exist; created once, then editable (pause, schedule)."""

    key: str
    action: str
    name: str
    schedule: dict
    timezone: str = "UTC"
    params: dict = field(default_factory=dict)
    misfire: str = "skip"
    grace_seconds: int = 60
    max_runtime_seconds: int = 300


@dataclass
class RunContext:
    """What an action is told about the run it is part of."""

    app: Any
    run_id: int
    timer_id: int
    scheduled_for: datetime
    started_at: datetime
    holder: str  # the lock session name of the leader that claimed it
    deadline: float  # time.monotonic() past which the run counts as timed out
    # the plugin key's leadership that claimed the run: what it claims is fenced by it
    lead: "Lead | None" = None
    # the scheduler's sleep, lent to an action that must wait (for a standby, say): plugin
    # code never sleeps on its own (a bounded wait, and the scheduler's to give)
    pause: Callable[[float], None] | None = None

    def time_left(self) -> float:
        """Return the seconds left before the maximum runtime."""
        return self.deadline - time.monotonic()


@dataclass(frozen=True)
class HookEvent:
    """An outbox event handed to a hook; id is stable across redeliveries.

    key names what happened (the outbox row's dedupe_key): unlike id, a sequence number,
    it stays the same when a lossy failover makes the database redo the event.
    """

    id: int
    topic: str
    post_id: int | None
    payload: dict
    created_at: datetime
    key: str | None = None


class Plugin:
    """A named bundle of actions, default timers and hooks."""

    def __init__(self, name: str, title: str = "", description: str = "") -> None:
        self.name = name
        self.title = title or name
        self.description = description
        self.actions: dict[str, Action] = {}
        self.hooks: dict[str, Callable[[HookEvent], Any]] = {}
        self.default_timers: list[DefaultTimer] = []

    def action(self, name: str | None = None, params: list[Param] | tuple = (),
               help: str = "") -> Callable:  # noqa: A002
        """Register the decorated function as an action."""

        def decorator(func: Callable) -> Callable:
            action_name = name or func.__name__
            self.actions[action_name] = Action(action_name, func, tuple(params),
                                               help or (func.__doc__ or "").strip())
            return func

        return decorator

    def hook(self, name: str) -> Callable:
        """Register the decorated function as the on_publish, on_unpublish or on_update hook."""
        if name not in HOOKS:
            raise ValueError(f"unknown hook {name!r}; hooks are {', '.join(HOOKS)}")

        def decorator(func: Callable) -> Callable:
            self.hooks[name] = func
            return func

        return decorator

    def default_timer(self, key: str, action: str, *, name: str = "",
                      every: tuple[int, str] | None = None, cron: str | None = None,
                      timezone: str = "UTC", **options: Any) -> None:
        """Ask for a timer running action every (n, unit) or on a cron schedule."""
        if (every is None) == (cron is None):
            raise ValueError("give exactly one of every=(n, unit) or cron=")
        problem = check_cron(cron) if cron else None
        if every and (every[1] not in UNITS or int(every[0]) < 1):
            problem = f"every must be (n >= 1, one of {', '.join(UNITS)}), not {every!r}"
        if problem or not is_zone(timezone):
            raise ValueError(f"default timer {key!r}: {problem or 'unknown zone ' + timezone}")
        schedule = ({"kind": "every", "every": every[0], "unit": every[1]} if every
                    else {"kind": "cron", "cron": cron})
        self.default_timers.append(DefaultTimer(key, action, name or f"{self.title}: {action}",
                                                schedule, timezone, **options))

    def __repr__(self) -> str:
        return f"<Plugin {self.name}>"
