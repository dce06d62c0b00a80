"""Who leads each scheduler key, read the way ops would: pg_locks, not anyone's memory.

The status page, its fragment, GET /api/leaders and `flask leaders` all read one
Snapshot built here: which lock session holds each key (pg_locks joined with
pg_stat_activity, current database only), which stand by, each key's term and
heartbeat (leader_state) and the recent leadership changes (leader_events). In
SQLite mode the same shape comes from the lock files of the one host.
"""

import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

import sqlalchemy as sa
from flask import current_app

from .extensions import db
from .filelocks import read_holder
from .locks import ADVISORY, KEY_SQL
from .models import LeaderEvent, LeaderState
from .scheduling.keys import KEYS, SchedulerKey
from .sqlite import sqlite_path

HISTORY_SIZE = 50
LOOKBACK = 10  # extra events read per key to find when the oldest shown terms began
ENDS = ("released", "lost", "evicted")

SESSIONS_SQL = sa.text(f"""
SELECT a.pid, a.application_name, host(a.client_addr), a.backend_start,
       coalesce(array_agg({KEY_SQL} ORDER BY {KEY_SQL}) FILTER (WHERE l.pid IS NOT NULL),
                '{{}}') AS keys
FROM pg_stat_activity a
LEFT JOIN pg_locks l ON l.pid = a.pid AND {ADVISORY} AND {KEY_SQL} = ANY(CAST(:keys AS bigint[]))
WHERE a.datname = current_database()
  AND (a.application_name LIKE 'soloist:%' OR l.pid IS NOT NULL)
GROUP BY a.pid, a.application_name, a.client_addr, a.backend_start
ORDER BY a.application_name, a.pid
""")


@dataclass
class LockSession:
    """One process's lock session (a standby unless it holds a key)."""

    application_name: str
    instance: str
    pid: int | None  # the OS process id, from application_name
    backend_pid: int | None = None  # the PostgreSQL backend (None in SQLite mode)
    client_addr: str | None = None
    backend_start: datetime | None = None
    keys: list[int] = field(default_factory=list)


@dataclass
class Holder:
    """The lock session holding a key, with its term and heartbeat."""

    session: LockSession
    term: int | None = None
    since: datetime | None = None
    heartbeat_at: datetime | None = None
    heartbeat_age_s: float | None = None
    stale: bool = False


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


def parse_identity(application_name: str) -> tuple[str, int | None]:
    """Split soloist:<instance>:<pid> into instance and pid ("", None if not ours)."""
    prefix, _, rest = application_name.partition(":")
    instance, _, pid = rest.rpartition(":")
    if prefix != "soloist" or not instance or not (pid.isascii() and pid.isdigit()):
        return "", None
    return instance, int(pid)


def is_postgres() -> bool:
    """Return whether the app runs on PostgreSQL (else the single-host SQLite mode)."""
    return db.engine.dialect.name == "postgresql"


SHARED_SECONDS = 1.0
_shared_lock = threading.Lock()


def shared_snapshot(max_age: float = SHARED_SECONDS) -> Snapshot:
    """Return a full snapshot at most max_age seconds old, shared by this process's pollers.

    Every open status page asks for the same picture every 2 s; reading pg_locks once
    a second per worker instead of once per poll keeps the page cheap with many
    viewers. It is still the database's picture (never a worker's own memory), and
    the page shows its "as of" time. Ops actions always read afresh.
    """
    cache = current_app.extensions.setdefault("soloist_status_snapshot", {})
    with _shared_lock:
        found = cache.get("snap")
        if found and time.monotonic() - found[0] < max_age:
            return found[1]
    snap = snapshot()
    with _shared_lock:
        cache["snap"] = (time.monotonic(), snap)
    return snap


def snapshot(history_size: int = HISTORY_SIZE) -> Snapshot:
    """Read the leadership of every key now, in a few cheap queries."""
    # statement_timestamp(), not now(): correct even inside a longer transaction. No
    # rollback here: it would expire the signed-in user and cost the page a reload.
    if is_postgres():
        now = db.session.scalar(sa.text("SELECT statement_timestamp()"))
        sessions, mode = _pg_sessions(), "postgresql"
    else:
        now, sessions, mode = datetime.now(UTC), _file_sessions(), "sqlite"
    states = {s.key: s for s in db.session.scalars(sa.select(LeaderState))}
    history = _history(history_size)
    stale = current_app.config["LEADER_STALE_SECONDS"]
    keys = [_key_status(k, sessions, states.get(k.value), now, stale, mode)
            for k in KEYS.values()]
    _held_for(history, keys, now)
    return Snapshot(mode, now, stale, keys, sessions, history)


def _pg_sessions() -> list[LockSession]:
    rows = db.session.execute(SESSIONS_SQL, {"keys": [k.value for k in KEYS.values()]})
    found = []
    for pid, name, addr, started, keys in rows:
        instance, os_pid = parse_identity(name or "")
        found.append(LockSession(name or "", instance, os_pid, pid, addr, started, list(keys)))
    return found


def _file_sessions() -> list[LockSession]:
    """Build lock sessions from the lock files beside the SQLite database."""
    db_file = sqlite_path(db.engine.url.render_as_string(hide_password=False))
    by_name: dict[str, LockSession] = {}
    for key in KEYS.values():
        found = read_holder(db_file, key.value)
        if not found or not found.get("application_name"):
            continue
        name = found["application_name"]
        session = by_name.setdefault(name, LockSession(
            name, found.get("instance", ""), found.get("pid"),
            backend_start=_parse_stamp(found.get("since"))))
        session.keys.append(key.value)
    return list(by_name.values())


def _parse_stamp(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC) if text else None
    except ValueError:
        return None


def _key_status(key: SchedulerKey, sessions: list[LockSession], state: LeaderState | None,
                now: datetime, stale: float, mode: str) -> KeyStatus:
    holding = next((s for s in sessions if key.value in s.keys), None)
    standbys = [s for s in sessions if key.value not in s.keys
                and s.application_name.startswith("soloist:")]
    holder = _holder(holding, state, now, stale, mode) if holding else None
    if state is None:
        return KeyStatus(key, holder, standbys)
    return KeyStatus(key, holder, standbys, state.last_work_at, state.last_result or "",
                     bool(state.step_down_requested))


def _holder(session: LockSession, state: LeaderState | None, now: datetime, stale: float,
            mode: str) -> Holder:
    # leader_state.holder_pid is the backend pid on PostgreSQL, the OS pid in SQLite mode
    pid = session.backend_pid if mode == "postgresql" else session.pid
    if state is None or state.holder_pid is None or state.holder_pid != pid:
        return Holder(session)  # held by a session that has not recorded its term (yet)
    age = (now - state.heartbeat_at).total_seconds() if state.heartbeat_at else None
    return Holder(session, state.term, state.acquired_at, state.heartbeat_at,
                  None if age is None else max(age, 0.0), age is not None and age > stale)


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
    for event in reversed(events):  # oldest first: the latest start of a term wins
        if event.kind == "acquired":
            began[(event.key, event.term)] = event.at
    changes = []
    for event in events[:limit]:
        start = began.get((event.key, event.term))
        held = (event.at - start).total_seconds() if start and event.kind in ENDS else None
        known = next((k for k in KEYS.values() if k.value == event.key), None)
        changes.append(Change(event.key, known.name if known else hex(event.key), event.kind,
                              event.term, event.holder, event.detail, event.at, held))
    return changes


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


def find_key(name: str) -> SchedulerKey | None:
    """Return the registered key called name (or written as its hex or decimal value)."""
    if name in KEYS:
        return KEYS[name]
    return next((k for k in KEYS.values() if name in (k.hex, str(k.value))), None)


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else None


def session_json(session: LockSession) -> dict:
    """Return a lock session as JSON-ready data."""
    data = asdict(session)
    data["backend_start"] = _iso(session.backend_start)
    data["keys"] = [f"0x{k & 0xFFFFFFFFFFFFFFFF:x}" for k in session.keys]
    return data


def holder_json(holder: Holder | None) -> dict | None:
    """Return a holder as JSON-ready data."""
    if holder is None:
        return None
    data = session_json(holder.session)
    data.pop("keys")
    age = holder.heartbeat_age_s
    data.update(since=_iso(holder.since), term=holder.term, stale=holder.stale,
                heartbeat_age_s=None if age is None else round(age, 3))
    return data


def leaders_json(snap: Snapshot) -> list[dict]:
    """Return the per-key leadership list that the API and `flask leaders --json` print."""
    return [
        {"name": k.key.name, "key": k.key.value, "key_hex": k.key.hex,
         "purpose": k.key.purpose, "holder": holder_json(k.holder),
         "standbys": [session_json(s) for s in k.standbys],
         "last_work_at": _iso(k.last_work_at), "last_result": k.last_result,
         "step_down_requested": k.step_down_requested}
        for k in snap.keys
    ]
