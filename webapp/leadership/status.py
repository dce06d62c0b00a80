"""Who leads each scheduler key, read the way ops would: pg_locks, not anyone's memory.

The status page, its fragment, GET /api/leaders and `flask leaders` all read one
Snapshot built here: which lock session holds each key (pg_locks joined with
pg_stat_activity, current database only), which stand by, each key's term and
heartbeat (leader_state) and the recent leadership changes (leader_events). In
SQLite mode the same shape comes from the lock files of the one host.
"""

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime

import sqlalchemy as sa
from flask import current_app

from ..extensions import db
from ..models import LeaderEvent, LeaderState
from ..timefmt import iso
from . import current_view
from .base import LockSession, is_stale
from .keys import KEYS, SchedulerKey
from .pg_sql import HELD_SQL

HISTORY_SIZE = 50
LOOKBACK = 10  # extra events read per key to find when the oldest shown terms began
ENDS = ("released", "lost", "evicted", "ended")


@dataclass
class Holder:
    """The lock session holding a key, with its term and heartbeat."""

    session: LockSession
    term: int | None = None
    since: datetime | None = None
    heartbeat_at: datetime | None = None
    heartbeat_age_s: float | None = None  # its age by the rule its eviction uses
    stale: bool = False
    recorded: bool = False  # the age is its term's heartbeat, not its session's activity


@dataclass
class Age:
    """How long a key's holder has been silent, and whether by its own recorded heartbeat."""

    pid: int | None  # the holder's backend (its OS pid on one host)
    recorded: bool
    seconds: float | None


@dataclass
class KeyStatus:
    """One scheduler key: who holds it, who stands by, and its last unit of work."""

    key: SchedulerKey
    holder: Holder | None
    standbys: list[LockSession]
    last_work_at: datetime | None = None
    last_result: str = ""
    step_down_requested: bool = False


@dataclass
class Change:
    """One entry of the leadership history."""

    key: int
    name: str
    kind: str
    term: int
    holder: str
    detail: str
    at: datetime
    held_for_s: float | None = None
    ongoing: bool = False
    without_leader_s: float | None = None  # an "acquired": how long the key had no leader


@dataclass
class Snapshot:
    """Everything the leader view shows, as of one moment of the database clock."""

    mode: str  # "postgresql" or "sqlite"
    as_of: datetime
    stale_seconds: float
    keys: list[KeyStatus]
    sessions: list[LockSession]
    history: list[Change]

    @property
    def single_host(self) -> bool:
        """Return whether leadership is between the workers of one host (SQLite mode)."""
        return self.mode == "sqlite"


SHARED_SECONDS = 1.0


def shared_snapshot(max_age: float = SHARED_SECONDS) -> Snapshot:
    """Return a full snapshot at most max_age seconds old, shared by this process's pollers.

    Every open status page asks for the same picture every 2 s; reading pg_locks once
    a second per worker instead of once per poll keeps the page cheap with many
    viewers. It is still the database's picture (never a worker's own memory), and
    the page shows its "as of" time. Ops actions always read afresh.
    """
    cache = current_app.extensions.setdefault("soloist_status_snapshot", {})
    found = cache.get("snap")  # one atomic read and one atomic write: no lock needed
    if found and time.monotonic() - found[0] < max_age:
        return found[1]
    snap = snapshot()
    cache["snap"] = (time.monotonic(), snap)
    return snap


def snapshot(history_size: int = HISTORY_SIZE) -> Snapshot:
    """Read the leadership of every key now, in a few cheap queries."""
    # No rollback here: it would expire the signed-in user and cost the page a reload.
    view = current_view()
    now, sessions = view.now(), view.sessions([k.value for k in KEYS.values()])
    states = {s.key: s for s in db.session.scalars(sa.select(LeaderState))}
    ages = holder_ages(view.mode, sessions, states, now)
    history = _history(history_size)
    stale = current_app.config["LEADER_STALE_SECONDS"]
    keys = [_key_status(k, sessions, states.get(k.value), ages.get(k.value), stale)
            for k in KEYS.values()]
    _held_for(history, keys, now)
    return Snapshot(view.mode, now, stale, keys, sessions, history)


def holder_ages(mode: str, sessions: list[LockSession],
                states: Mapping[int, LeaderState | sa.Row], now: datetime) -> dict[int, Age]:
    """Return each held key's holder, whether its term is recorded, and its age.

    On PostgreSQL by the very expression the standbys evict with (pg_sql.LAST_SIGN_SQL):
    its heartbeat, else what its lock session last did. On one host: its heartbeat, else
    when it took the lock file.
    """
    if mode == "postgresql":
        rows = db.session.execute(HELD_SQL, {"keys": [k.value for k in KEYS.values()]})
        return {key: Age(pid, recorded, None if age is None else max(age, 0.0))
                for key, pid, recorded, age in rows}
    found = {}
    for session in sessions:
        for key in session.keys:
            state = states.get(key)
            recorded = bool(state and state.heartbeat_at
                            and state.holder_pid == session.holder_pid)
            at = state.heartbeat_at if recorded and state else session.backend_start
            found[key] = Age(session.holder_pid, recorded,
                             None if at is None else max((now - at).total_seconds(), 0.0))
    return found


def _key_status(key: SchedulerKey, sessions: list[LockSession], state: LeaderState | None,
                age: Age | None, stale: float) -> KeyStatus:
    holding = next((s for s in sessions if key.value in s.keys), None)
    standbys = [s for s in sessions if key.value not in s.keys
                and s.application_name.startswith("soloist:")]
    holder = _holder(holding, state, age, stale) if holding else None
    if state is None:
        return KeyStatus(key, holder, standbys)
    return KeyStatus(key, holder, standbys, state.last_work_at, state.last_result or "",
                     bool(state.step_down_requested))


def _holder(session: LockSession, state: LeaderState | None, age: Age | None,
            stale: float) -> Holder:
    if age is None or age.pid != session.holder_pid:
        return Holder(session)  # it changed hands between the two reads: the next one says
    if not age.recorded or state is None:  # it has recorded no term (yet), or outlived one
        return Holder(session, heartbeat_age_s=age.seconds, stale=is_stale(age.seconds, stale))
    return Holder(session, state.term, state.acquired_at, state.heartbeat_at, age.seconds,
                  is_stale(age.seconds, stale), recorded=True)


def _history(limit: int) -> list[Change]:
    """Return the last limit changes, each end of a term with how long the term lasted.

    One index range per key (leader_events has an index on key, at), merged; a few
    older events per key are read too so the oldest shown end finds its start.
    """
    if limit <= 0:
        return []
    per_key = []
    for key in KEYS.values():
        recent = (sa.select(LeaderEvent.id).where(LeaderEvent.key == key.value)
                  .order_by(LeaderEvent.at.desc(), LeaderEvent.id.desc())
                  .limit(limit + LOOKBACK).subquery())
        per_key.append(sa.select(recent.c.id))
    events = db.session.scalars(
        sa.select(LeaderEvent).where(LeaderEvent.id.in_(sa.union_all(*per_key)))
        .order_by(LeaderEvent.at.desc(), LeaderEvent.id.desc())
    ).all()
    began: dict[tuple[int, int], datetime] = {}
    gaps: dict[int, float] = {}  # event id of an "acquired" -> seconds since the last end
    last_end: dict[int, datetime] = {}
    for event in reversed(events):  # oldest first: the latest start of a term wins
        if event.kind == "acquired":
            began[(event.key, event.term)] = event.at
            if event.key in last_end:
                gaps[event.id] = max(0.0, (event.at - last_end.pop(event.key)).total_seconds())
        elif event.kind in ENDS:
            last_end.setdefault(event.key, event.at)  # the first end of a term: it went then
    # one row per event: an evicted holder's own "lost" (written when it thaws) and an
    # "ended" for the same term tell the eviction again
    evicted = {(e.key, e.term) for e in events if e.kind == "evicted"}
    shown = [e for e in events if not (e.kind in ("lost", "ended") and (e.key, e.term) in evicted)]
    changes = []
    for event in shown[:limit]:
        start = began.get((event.key, event.term))
        held = (event.at - start).total_seconds() if start and event.kind in ENDS else None
        known = next((k for k in KEYS.values() if k.value == event.key), None)
        changes.append(Change(event.key, known.name if known else hex(event.key), event.kind,
                              event.term, event.holder, in_words(event.kind, event.detail),
                              event.at, held, without_leader_s=gaps.get(event.id)))
    return changes


def in_words(kind: str, detail: str) -> str:
    """Say a leadership event's detail as ops would: a dropped connection is not a crash."""
    if kind == "lost" and ("server closed the connection" in detail
                           or "terminat" in detail or "connection failed" in detail):
        return ("its lock session was cut off (the database ended the connection, or the "
                "network did); it stopped leading at once")
    return detail


def _held_for(history: list[Change], keys: list[KeyStatus], now: datetime) -> None:
    """Say how long each acquired term lasted, or that it still runs."""
    ended = {(c.key, c.term): c.at for c in history if c.kind in ENDS}
    current = {k.key.value: k.holder.term for k in keys if k.holder and k.holder.term}
    for change in history:
        if change.kind != "acquired":
            continue
        end = ended.get((change.key, change.term))
        if end is not None:
            change.held_for_s = (end - change.at).total_seconds()
        elif current.get(change.key) == change.term:
            change.held_for_s, change.ongoing = (now - change.at).total_seconds(), True


def leader_summary(key: SchedulerKey, now: datetime) -> dict | None:
    """Return key's last recorded holder, term and heartbeat age (None if never led).

    A holder with no heartbeat (it released the key) counts as stale like an old one.
    """
    state = db.session.get(LeaderState, key.value)
    if state is None or not state.holder:
        return None
    age = (now - state.heartbeat_at).total_seconds() if state.heartbeat_at else None
    stale = is_stale(age, current_app.config["LEADER_STALE_SECONDS"])
    return {"holder": state.holder, "term": state.term, "age": age, "stale": stale,
            "last_result": state.last_result, "last_work_at": state.last_work_at}


def find_key(name: str) -> SchedulerKey | None:
    """Return the registered key called name (or written as its hex or decimal value)."""
    if name in KEYS:
        return KEYS[name]
    return next((k for k in KEYS.values() if name in (k.hex, str(k.value))), None)


def session_json(session: LockSession) -> dict:
    """Return a lock session as JSON-ready data."""
    data = asdict(session)
    data["backend_start"] = iso(session.backend_start)
    data["keys"] = [f"0x{k & 0xFFFFFFFFFFFFFFFF:x}" for k in session.keys]
    return data


def holder_json(holder: Holder | None) -> dict | None:
    """Return a holder as JSON-ready data."""
    if holder is None:
        return None
    data = session_json(holder.session)
    data.pop("keys")
    age = holder.heartbeat_age_s
    data.update(since=iso(holder.since), term=holder.term, stale=holder.stale,
                heartbeat_age_s=None if age is None else round(age, 3),
                heartbeat_recorded=holder.recorded)
    return data


def leaders_json(snap: Snapshot) -> list[dict]:
    """Return the per-key leadership list that the API and `flask leaders --json` print."""
    return [
        {"name": k.key.name, "key": k.key.value, "key_hex": k.key.hex,
         "purpose": k.key.purpose, "holder": holder_json(k.holder),
         "standbys": [session_json(s) for s in k.standbys],
         "last_work_at": iso(k.last_work_at), "last_result": k.last_result,
         "step_down_requested": k.step_down_requested}
        for k in snap.keys
    ]
