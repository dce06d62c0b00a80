"""Bookkeeping shared by every scheduler's ticks."""

from datetime import datetime

import sqlalchemy as sa

from ..extensions import db
from ..locks import WAKE_CHANNEL
from ..models import LeaderState


def record_work(key: int, now: datetime, result: str) -> None:
    """Record the last unit of work a key's leader did and its result."""
    db.session.execute(
        sa.update(LeaderState)
        .where(LeaderState.key == key)
        .values(last_work_at=now, last_result=result[:500])
    )
    db.session.commit()


def wake_scheduler(name: str) -> None:
    """NOTIFY the leaders (delivered when the current transaction commits; PostgreSQL only)."""
    if db.session.get_bind().dialect.name == "postgresql":
        db.session.execute(sa.text("SELECT pg_notify(:channel, :name)"),
                           {"channel": WAKE_CHANNEL, "name": name})


def database_now() -> datetime:
    """Return the database clock (the app's clock on SQLite, which is the same host)."""
    from datetime import UTC

    if db.session.get_bind().dialect.name == "postgresql":
        value = db.session.scalar(sa.text("SELECT now()"))
        db.session.rollback()
        return value
    return datetime.now(UTC)
