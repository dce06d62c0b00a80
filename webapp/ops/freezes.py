"""Freezes: an admin pauses all publishing, or all timers, with a reason.

The leaders keep their keys and do nothing for a frozen scope: the publish tick
publishes and unpublishes nothing, the plugin tick starts no timer run (hooks and
webhook deliveries go on, so alerts still reach people). On resume the row goes,
the leader is woken, and posts that came due meanwhile follow the policy chosen
when freezing: published at once, or held as drafts for an editor. Timers that
came due follow each timer's own misfire policy.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PLUGINS, PUBLISH
from ..models import Freeze
from ..refusals import Refused
from . import audit

SCOPES = {"publishing": "Publishing", "timers": "Timers"}
ON_RESUME = {"publish": "publish them at once", "hold": "hold them as drafts for an editor"}
KEY_OF = {"publishing": PUBLISH, "timers": PLUGINS}
MAX_REASON = 500


class FreezeError(Refused):
    """A freeze or resume was refused; errors maps a form field (or "form") to why."""


@dataclass(frozen=True)
class Resumed:
    """What a resume did: the freeze it ended and the posts it held back, if any."""

    freeze: Freeze
    held: list[tuple[int, str]]  # (post id, title)
    released: list[tuple[int, str]] = field(default_factory=list)  # due, going out now
    held_releases: list[tuple[int, str]] = field(default_factory=list)  # (release id, name)
    released_releases: list[tuple[int, str]] = field(default_factory=list)  # going out now


def active() -> dict[str, Freeze]:
    """Return the freezes in force, by scope."""
    return {f.scope: f for f in db.session.scalars(sa.select(Freeze))}


def is_frozen(scope: str) -> bool:
    """Return whether scope is frozen now (the ticks ask; one primary-key read)."""
    return db.session.get(Freeze, scope, populate_existing=True) is not None


def holding(scope: str) -> Freeze | None:
    """Return scope's freeze in force, or None (one primary-key read)."""
    return db.session.get(Freeze, scope, populate_existing=True)


def refusal(row: Freeze) -> str:
    """Say why a change a freeze holds was refused, naming the freeze and its reason."""
    return (f"{SCOPES[row.scope]} is frozen (by {row.frozen_by}: {row.reason}): nothing is "
            f"published or unpublished by hand until an admin resumes it. A scheduled time "
            f"waits for the freeze.")


def record_override(row: Freeze, target: str, action: str) -> None:
    """Audit an admin's change that went through row's freeze (the caller commits)."""
    audit.record("freeze.override", target, {"scope": row.scope, "reason": row.reason,
                                             "action": action})


def freeze(scope: str, reason: str, on_resume: str, actor: str) -> Freeze:
    """Pause scope with a reason; refuse a bad choice or a scope frozen already."""
    reason = reason.strip()
    errors = {}
    if scope not in SCOPES:
        errors["scope"] = "Pick publishing or timers."
    if not reason or len(reason) > MAX_REASON:
        errors["reason"] = f"Say why (up to {MAX_REASON} characters): people will see it."
    if scope == "publishing" and on_resume not in ON_RESUME:
        errors["on_resume"] = "Pick what posts that come due meanwhile do on resume."
    if not errors and db.session.get(Freeze, scope) is not None:
        errors["form"] = f"{SCOPES[scope]} is frozen already: resume it first."
    if errors:
        raise FreezeError(errors)
    row = Freeze(scope=scope, reason=reason, frozen_by=actor, frozen_at=database_now(),
                 on_resume=on_resume if scope == "publishing" else "publish")
    db.session.add(row)
    audit.record("freeze.start", audit.target("freeze", None, scope),
                 {"reason": reason, "on_resume": row.on_resume})
    try:
        db.session.commit()
    except sa.exc.IntegrityError:  # another admin froze it a moment ago
        db.session.rollback()
        raise FreezeError({"form": f"{SCOPES[scope]} is frozen already."}) from None
    return row


def resume(scope: str, hold_due: Callable[[datetime], list[tuple[int, str]]],
           now: datetime | None = None,
           came_due: Callable[[datetime], list[tuple[int, str]]] | None = None,
           hold_releases: Callable[[datetime], list[tuple[int, str]]] | None = None,
           releases_due: Callable[[datetime], list[tuple[int, str]]] | None = None,
           ) -> Resumed:
    """End scope's freeze, hold or release what came due, and wake the leader.

    hold_due (posts.hold_due) takes the posts that came due back to drafts when the
    freeze says so, and hold_releases (posts.releases.hold_due) the releases; came_due
    (posts.came_due) and releases_due (posts.releases.came_due) name the posts and the
    releases it lets go otherwise. Passed
    in, because posts write audit rows here, not the other way.
    """
    now = now or database_now()  # first: it ends its transaction, which would drop the lock
    row = db.session.scalar(sa.select(Freeze).where(Freeze.scope == scope).with_for_update())
    if row is None:
        db.session.rollback()
        raise FreezeError({"form": f"{SCOPES.get(scope, scope)} is not frozen."})
    held, released, held_releases, released_releases = [], [], [], []
    if scope == "publishing" and row.on_resume == "hold":
        held = hold_due(now)
        held_releases = hold_releases(now) if hold_releases is not None else []
    elif scope == "publishing" and came_due is not None:
        released = came_due(now)
        released_releases = releases_due(now) if releases_due is not None else []
    detail: dict[str, object] = {"reason": row.reason}
    if held:
        detail["held"] = [pid for pid, _title in held]
    if released:
        detail["released"] = [pid for pid, _title in released]
    if held_releases:
        detail["held_releases"] = [rid for rid, _name in held_releases]
    if released_releases:
        detail["released_releases"] = [rid for rid, _name in released_releases]
    audit.record("freeze.resume", audit.target("freeze", None, scope), detail)
    db.session.delete(row)
    wake_scheduler(KEY_OF[scope].name)
    db.session.commit()
    return Resumed(row, held, released, held_releases, released_releases)
