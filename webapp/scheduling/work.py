"""Bookkeeping shared by every key's tick."""

from datetime import datetime

import sqlalchemy as sa

from ..extensions import db
from ..models import LeaderState


def record_work(key: int, now: datetime, result: str) -> None:
    """Record the last unit of work a key's leader did and its result."""
    db.session.execute(
        sa.update(LeaderState)
        .where(LeaderState.key == key)
        .values(last_work_at=now, last_result=result[:500])
    )
    db.session.commit()
