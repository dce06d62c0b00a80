"""Bookkeeping shared by every key's tick."""

from datetime import datetime

import sqlalchemy as sa

from ..extensions import db
from ..models import LeaderState


def record_work(key: int, now: datetime, result: str, *, term: int | None = None,
                holder: str = "") -> None:
    """Record the last unit of work a key's leader did and its result.

    With term (and holder, the lock session's name) it is written only while that is
    still the key's leadership: a deposed leader's late tick cannot overwrite its
    successor's. Without, it is written whoever leads (kept for callers that have no term).
    """
    fenced = [] if term is None else [LeaderState.term == term, LeaderState.holder == holder]
    db.session.execute(
        sa.update(LeaderState)
        .where(LeaderState.key == key, *fenced)
        .values(last_work_at=now, last_result=result[:500])
    )
    db.session.commit()
