"""Define the column types and clock shared by every model."""

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from ..db import is_sqlite_dialect

# Ids of tables that grow without bound. SQLite autoincrements only an INTEGER
# primary key, so it keeps INTEGER there (64-bit anyway).
BigId = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


class UTCDateTime(sa.TypeDecorator):
    """Store aware datetimes as UTC (timestamptz on PostgreSQL) and read them back aware."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column; attach a time zone")
        value = value.astimezone(UTC)
        # SQLite has no time zones: store naive UTC, process_result_value reattaches it
        return value.replace(tzinfo=None) if is_sqlite_dialect(dialect) else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
