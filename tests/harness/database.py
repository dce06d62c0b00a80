"""The test database between tests: every table emptied and its ids restarted, cheaply."""

from contextlib import contextmanager
from functools import cache

import sqlalchemy as sa

from webapp.extensions import db

# DELETE, children first, then every sequence back to 1: what TRUNCATE ... RESTART IDENTITY
# did, at a tenth of its cost (28 ms against 143 ms a test: TRUNCATE makes new files)
RESTART_SEQUENCES = sa.text(
    "SELECT setval(c.oid::regclass, 1, false) FROM pg_class c "
    "WHERE c.relkind = 'S' AND c.relnamespace = 'public'::regnamespace")


@cache
def _children_first() -> tuple[list[sa.Table], sa.TextClause]:
    """Return the app's tables, children first, and the query naming those with a row."""
    tables = list(reversed(db.metadata.sorted_tables))
    filled = " UNION ALL ".join(f"SELECT {i} WHERE EXISTS (SELECT 1 FROM \"{table.name}\")"
                                for i, table in enumerate(tables))
    return tables, sa.text(filled)


def empty_every_table() -> None:
    """Empty every table of the app's database and restart its ids, in one transaction.

    Only the tables that have a row are emptied (a test fills a few of the 29), found in one
    statement: emptying an empty database takes 7.6 ms (1.4 ms of this process's CPU)
    against 11.2 ms (4.0 ms) for a DELETE on each table, connection included.
    """
    tables, filled = _children_first()
    for i in sorted(db.session.scalars(filled)):
        db.session.execute(tables[i].delete())
    db.session.execute(RESTART_SEQUENCES)
    db.session.commit()


@contextmanager
def emptied(app):
    """Empty app's tables for a test, then close the connections the test left.

    Closed, not kept for the next test: a test may leave session settings (a SET), a
    revalidation connection or an advisory lock on them.
    """
    with app.app_context():
        empty_every_table()
    yield app
    with app.app_context():
        db.session.remove()
        db.engine.dispose()
