"""Small SQL helpers the plugin modules share."""

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..extensions import db


def dialect() -> str:
    """Return the name of the database dialect in use ('postgresql' or 'sqlite')."""
    return db.session.get_bind().dialect.name


def insert_ignoring_conflicts(model, keys: list[str]) -> sa.Insert:  # noqa: ANN001
    """Return INSERT … ON CONFLICT (keys) DO NOTHING: the row is written at most once."""
    insert = postgresql.insert if dialect() == "postgresql" else sqlite.insert
    return insert(model).on_conflict_do_nothing(index_elements=keys)


def for_update_skip_locked(query: sa.Select) -> sa.Select:
    """Lock the selected rows on PostgreSQL, skipping rows another leader holds."""
    if dialect() == "postgresql":
        return query.with_for_update(skip_locked=True)
    return query
