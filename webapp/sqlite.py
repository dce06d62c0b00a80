"""SQLite settings for the embedded single-host mode."""

from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url


def enable_sqlite_pragmas(engine: Engine) -> None:
    """Use WAL and a busy timeout so several workers share one file without errors."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # noqa: ANN001
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=15000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()


def sqlite_path(url: str) -> Path:
    """Return the database file of a sqlite: URL."""
    database = make_url(url).database
    if not database or database == ":memory:":
        raise ValueError("Soloist's SQLite mode needs a database file, not an in-memory database")
    return Path(database)
