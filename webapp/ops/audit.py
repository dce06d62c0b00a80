"""The audit log: every change a person or a token makes, recorded in the change's transaction.

To audit a change, call record() after the last check that can refuse it and before the
commit that writes it:

    post.title = new_title
    audit.record("post.edit", audit.target("post", post.id, post.title),
                 {"title": [old_title, new_title]})
    db.session.commit()

record() only adds a row to db.session: the caller's commit writes the change and its
row together, and a refused change (an exception, a rollback) leaves none. Who did it,
from which address and how come from the request: the signed-in user ("web"), or the API
token's user and the token's id ("api"). Outside a request a command that changes things
says so first with from_shell() ("cli", as the system user running it); any other work
outside a request is Soloist's own (the scheduler publishing, pausing a hung plugin) and
is not a person's change, so record() writes nothing for it. detail says what changed, as
JSON: never a password, a token or a webhook secret (record() refuses keys that name one).

The log also holds every sign-in decision (auth.ok, auth.wrong, auth.throttled,
auth.refused, and session.start for a sign-in that succeeds), written by
webapp.accounts.throttle: who (or the name tried), from where, which browser and method.
"""

import getpass
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from flask import g, has_request_context, request
from flask_login import current_user

from ..extensions import db
from ..models import AuditEvent, User, utcnow
from ..timefmt import iso, when

# every action recorded today, for the filters' suggestions (record() takes any name)
ACTIONS = (
    "post.create", "post.edit", "post.schedule", "post.unpublish_time", "post.unschedule",
    "post.publish", "post.unpublish", "post.restore", "post.change_schedule", "post.change_edit",
    "post.change_cancel", "post.submit", "post.approve", "post.return", "site.review",
    "preview.create", "preview.revoke",
    "timer.create", "timer.edit", "timer.pause", "timer.resume", "timer.run", "timer.delete",
    "plugin.enable", "plugin.disable",
    "webhook.create", "webhook.enable", "webhook.disable", "webhook.delete",
    "webhook.redeliver", "webhook.test",
    "user.invite", "user.create", "user.role", "user.deactivate", "user.activate",
    "user.reset_password", "user.sign_out_everywhere", "user.settings", "user.password",
    "session.start", "session.end", "token.create", "token.revoke",
    "leader.step_down", "leader.evict", "freeze.start", "freeze.resume",
    "media.upload", "media.delete",
    # the authentication log (webapp.accounts.throttle): a sign-in that succeeds is its
    # session.start; these are every other decision on a secret or a passkey
    "auth.ok", "auth.wrong", "auth.throttled", "auth.refused",
)
SECRET_WORDS = ("password", "secret", "token", "hash")  # never a key of detail
ACTION_FILTER = re.compile(r"^[a-z][a-z_]*(\.[a-z_]*)?$")
MAX_TARGET = 300


@dataclass(frozen=True)
class Actor:
    """Who a change is recorded for: the user (if any), their name, how, and from where."""

    user_id: int | None
    name: str
    via: str
    token_id: int | None = None
    address: str = ""


def from_shell() -> None:
    """Mark the rest of this command's changes as made from the command line."""
    g.audit_shell = True


def request_address() -> str:
    """Return the address the audit log records for this request."""
    return (request.remote_addr or "")[:64]  # ProxyFix applied the router's hops


def _actor(user: User | str | None) -> Actor | None:
    """Return who is acting now, or None for Soloist's own work (no request, no command)."""
    if not has_request_context():
        if not g.get("audit_shell"):
            return None
        return Actor(None, f"{getpass.getuser()} (shell)", "cli", address="local")
    address = request_address()
    if isinstance(user, str):  # a sign-in for an account that does not exist: the name tried
        return Actor(None, user, "web", address=address)
    api_user = g.get("api_user")
    if api_user is not None:
        return Actor(api_user.id, api_user.email, "api",
                     getattr(api_user, "api_token_id", None), address)
    found = current_user if user is None and current_user.is_authenticated else user
    return Actor(getattr(found, "id", None), found.email if found else "", "web",
                 address=address)


def record(action: str, target: str = "", detail: dict | None = None, *,
           actor: User | str | None = None) -> AuditEvent | None:
    """Add an audit row for a change to the current transaction (the caller commits).

    actor names the user when nobody is signed in yet (signing in), or the name typed for
    an account that does not exist; otherwise the request says who. Returns the row, or
    None for Soloist's own work (see the module).
    """
    who = _actor(actor)
    if who is None:
        return None
    refused = [key for key in detail or {} if any(w in key.lower() for w in SECRET_WORDS)]
    if refused:
        raise ValueError(f"an audit detail must not carry secrets: {refused}")
    if has_request_context() and g.get("step_up_proof"):  # a dangerous action: how proved
        detail = {**(detail or {}), "proof": g.step_up_proof}
    event = AuditEvent(at=utcnow(), actor_id=who.user_id, actor=who.name[:254], via=who.via,
                       token_id=who.token_id, address=who.address, action=action,
                       target=target[:MAX_TARGET],
                       detail=json.dumps(detail or {}, ensure_ascii=False, default=_plain))
    db.session.add(event)
    return event


def _plain(value: Any) -> str:
    """Write times (and anything else JSON lacks) as text."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def target(kind: str, ident: int | str | None, name: str = "") -> str:
    """Name what a change was made to: post 12 “Hello”, user 3 “ada@example.com”."""
    text = f"{kind} {ident}" if ident is not None else kind
    return f"{text} “{name}”" if name else text


def changes(before: dict, after: dict) -> dict[str, list]:
    """Return {field: [old, new]} for each field whose value differs."""
    return {key: [before.get(key), value] for key, value in after.items()
            if before.get(key) != value}


def text_size(text: str) -> str:
    """Describe a long text by its size: a body is summarised, never copied into the log."""
    return f"{len(text):,} character{'' if len(text) == 1 else 's'}"


# -- reading the log ---------------------------------------------------------------------

class FilterError(ValueError):
    """A filter the log cannot apply; field names it (actor, action, from, to, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Filters:
    """Which events to show: by whom (part of the email), what (an action or its
    prefix such as "post."), and when (since inclusive, until exclusive, aware UTC)."""

    actor: str = ""
    action: str = ""
    since: datetime | None = None
    until: datetime | None = None


def check_filters(actor: str, action: str, since: datetime | None,
                  until: datetime | None) -> Filters:
    """Return the filters, or raise FilterError naming the first bad one."""
    actor, action = actor.strip().lower(), action.strip().lower()
    if len(actor) > 254 or "\x00" in actor:
        raise FilterError("actor", "Type at most 254 characters of an email (no NUL).")
    if action and (len(action) > 40 or not ACTION_FILTER.match(action)):
        raise FilterError("action", "Type an action such as post.publish, or the start of one "
                                    "such as post. (lower-case letters, _ and one dot).")
    if since is not None and until is not None and until <= since:
        raise FilterError("to", "The end of the period must come after its start.")
    return Filters(actor, action, since, until)


def _conditions(filters: Filters) -> list:
    found = []
    if filters.actor:
        found.append(AuditEvent.actor.icontains(filters.actor, autoescape=True))
    if filters.action.endswith("."):
        found.append(AuditEvent.action.startswith(filters.action, autoescape=True))
    elif "." in filters.action:
        found.append(AuditEvent.action == filters.action)
    elif filters.action:  # a bare prefix: "post" means post.*
        found.append(AuditEvent.action.startswith(filters.action + ".", autoescape=True))
    if filters.since is not None:
        found.append(AuditEvent.at >= filters.since)
    if filters.until is not None:
        found.append(AuditEvent.at < filters.until)
    return found


def list_events(filters: Filters, limit: int = 50,
                before: int | None = None) -> tuple[list[AuditEvent], int | None]:
    """Return up to limit events newest first (older than the event before, if given),
    and the cursor of the next page (None on the last)."""
    query = sa.select(AuditEvent).where(*_conditions(filters))
    if before is not None:
        mark = db.session.get(AuditEvent, before) if 0 < before < 2**63 else None
        if mark is None:
            raise FilterError("before", "No event has that id: start again from the first "
                                        "page.")
        query = query.where(sa.or_(AuditEvent.at < mark.at,
                                   sa.and_(AuditEvent.at == mark.at, AuditEvent.id < mark.id)))
    rows = list(db.session.scalars(
        query.order_by(AuditEvent.at.desc(), AuditEvent.id.desc()).limit(limit + 1)))
    more = len(rows) > limit
    return rows[:limit], rows[limit - 1].id if more else None


def detail_of(event: AuditEvent) -> dict:
    """Return an event's detail as a dict ({} if it cannot be read)."""
    try:
        value = json.loads(event.detail or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def event_json(event: AuditEvent) -> dict:
    """Return one event as the API shows it (times in UTC ISO 8601)."""
    return {"id": event.id, "at": iso(event.at), "actor": event.actor, "via": event.via,
            "token_id": event.token_id, "address": event.address, "action": event.action,
            "target": event.target, "detail": detail_of(event)}


def detail_lines(event: AuditEvent) -> list[tuple[str, str]]:
    """Return an event's detail as (field, "old → new" or value) lines for a page."""
    lines = []
    for key, value in detail_of(event).items():
        if isinstance(value, list) and len(value) == 2:
            value = f"{_shown(value[0])} → {_shown(value[1])}"
        lines.append((key, _shown(value)))
    return lines


def _shown(value: Any) -> str:
    """Say a detail's value: a moment (stored as ISO 8601) in the reader's zone, like the
    When column, never a raw stamp."""
    if value is None:
        return "—"
    if isinstance(value, str):
        moment = _moment(value)
        return value if moment is None else when(moment)
    return json.dumps(value, ensure_ascii=False)


STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?([+-]\d\d:\d\d|Z)")


def _moment(text: str) -> datetime | None:
    if not STAMP.fullmatch(text):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
