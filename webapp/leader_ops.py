"""Ops actions on a key's leader: ask it to step down, or evict a stuck one.

Both are recorded in the leadership history with who did it, and both refuse
to act when leadership has moved since the admin looked (the confirmation
names the holder it is about).
"""

import sqlalchemy as sa

from .extensions import db
from .filelocks import read_holder
from .locks import ADVISORY, KEY_SQL, evict_sql
from .models import LeaderEvent, LeaderState
from .scheduling.keys import KEYS, SchedulerKey
from .scheduling.work import database_now, wake_scheduler
from .sqlite import sqlite_path


class OpsError(Exception):
    """An ops action could not be done; the message says why, for the admin."""


HOLDER_SQL = sa.text(f"""
SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE {ADVISORY} AND {KEY_SQL} = :key
""")

# The holder the admin confirmed, by name; the standbys are woken at once.
EVICT_SQL = evict_sql("a.application_name = %(expected)s", notify=True)


def current_holder(key: SchedulerKey) -> str | None:
    """Return the application_name of the lock session holding key now, if any."""
    if db.session.get_bind().dialect.name == "postgresql":
        return db.session.scalar(HOLDER_SQL, {"key": key.value})
    found = read_holder(sqlite_path(db.engine.url.render_as_string(hide_password=False)),
                        key.value)
    return (found or {}).get("application_name")


def _check_holder(key: SchedulerKey, expected: str) -> str:
    holder = current_holder(key)
    if holder is None:
        raise OpsError(f"Nobody leads the {key.name} key right now; nothing was done.")
    if not expected:
        raise OpsError("The confirmation did not say which holder it was about; open the "
                       "action again from the status page. Nothing was done.")
    if holder != expected:
        raise OpsError(f"Leadership of the {key.name} key moved to {holder} since you looked; "
                       "nothing was done.")
    return holder


def request_step_down(key: SchedulerKey, expected: str, by: str) -> str:
    """Ask key's holder to release at its next check and wake it; return the holder."""
    try:
        now = database_now()  # first: it ends the read transaction it opens
        holder = _check_holder(key, expected)
        term = db.session.scalar(
            sa.update(LeaderState).where(LeaderState.key == key.value)
            .values(step_down_requested=True).returning(LeaderState.term))
        db.session.add(LeaderEvent(key=key.value, kind="step_down", term=term or 0,
                                   holder=holder, detail=f"by {by}"[:500], at=now))
        wake_scheduler(key.name)  # delivered at commit: the holder re-verifies at once
        db.session.commit()
    except BaseException:
        db.session.rollback()
        raise
    return holder


def evict(key: SchedulerKey, expected: str, by: str) -> str:
    """Terminate the lock session of key's holder (PostgreSQL only); return the holder."""
    if db.session.get_bind().dialect.name != "postgresql":
        raise OpsError("Single-host (SQLite) mode has no lock sessions to evict: a stuck "
                       "worker keeps its file lock until it exits, so restart it.")
    if not expected:
        raise OpsError("Say which holder to evict.")
    params = {"key": key.value, "expected": expected, "detail": f"by {by}"[:500],
              "ours": [k.value for k in KEYS.values()]}
    try:
        row = db.session.connection().exec_driver_sql(EVICT_SQL, params).first()
        db.session.commit()
    except sa.exc.DBAPIError as exc:
        db.session.rollback()
        raise OpsError(f"PostgreSQL refused to end that session: {exc.orig}") from exc
    if row is None:
        _check_holder(key, expected)  # explains what changed
        raise OpsError(f"{expected} no longer holds the {key.name} key; nothing was done.")
    return row[0]
