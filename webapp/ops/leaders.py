"""Ops actions on a key's leader: ask it to step down, or evict a stuck one.

Both are recorded in the leadership history with who did it, and both refuse
to act when leadership has moved since the admin looked (the confirmation
names the holder it is about).
"""

import sqlalchemy as sa

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership import current_view
from ..leadership.base import OpsError
from ..leadership.keys import KEYS, SchedulerKey
from ..models import LeaderEvent, LeaderState
from . import audit

__all__ = ["OpsError", "current_holder", "evict", "request_step_down"]


def current_holder(key: SchedulerKey) -> str | None:
    """Return the application_name of the lock session holding key now, if any."""
    return current_view().holder_of(key.value)


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


def _target(key: SchedulerKey) -> str:
    return f"{key.name} key"


def request_step_down(key: SchedulerKey, expected: str, by: str) -> str:
    """Ask key's holder to release at its next check and wake it; return the holder."""
    try:
        now = database_now()  # first: it ends the read transaction it opens
        holder = _check_holder(key, expected)
        # for the holder the admin saw only: one that took the key meanwhile is not asked
        term = db.session.scalar(
            sa.update(LeaderState)
            .where(LeaderState.key == key.value, LeaderState.holder == holder,
                   LeaderState.holder_pid.is_not(None))
            .values(step_down_requested=True).returning(LeaderState.term))
        if term is None:
            raise OpsError(f"Leadership of the {key.name} key moved since you looked (its "
                           f"record no longer names {holder}); nothing was done.")
        db.session.add(LeaderEvent(key=key.value, kind="step_down", term=term,
                                   holder=holder, detail=f"by {by}"[:500], at=now))
        audit.record("leader.step_down", _target(key), {"holder": holder, "term": term})
        wake_scheduler(key.name)  # delivered at commit: the holder re-verifies at once
        db.session.commit()
    except BaseException:
        db.session.rollback()
        raise
    return holder


def evict(key: SchedulerKey, expected: str, by: str) -> str:
    """Terminate the lock session of key's holder (PostgreSQL only); return the holder."""
    view = current_view()
    if view.can_evict and not expected:
        raise OpsError("Say which holder to evict.")
    # added first, written by the eviction's own commit; dropped when nothing was evicted
    audit.record("leader.evict", _target(key), {"holder": expected})
    try:
        evicted = view.evict(key.value, expected, f"by {by}"[:500],
                             [k.value for k in KEYS.values()])
    except BaseException:
        db.session.rollback()
        raise
    if evicted is None:
        _check_holder(key, expected)  # explains what changed
        raise OpsError(f"{expected} no longer holds the {key.name} key; nothing was done.")
    return evicted
