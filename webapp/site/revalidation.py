"""The read behind a public page's 304: one connection per worker, its statements prepared.

httpcache.RevalidateFirst answers a reader's matching conditional GET before Flask runs,
from one read. Through the app's pool that read cost a checkout, the pool's pre-ping (a
round trip of its own) and SQLAlchemy's statement and row machinery: 0.53 ms of CPU in
the worker for a 304, where the read itself costs 0.07 ms (0.19 ms this way). So on
PostgreSQL each worker keeps one connection for these reads
(soloist-site:<instance>:<pid>, opened by the first one, in autocommit, taken by its
threads in turn) and runs the views' own SQLAlchemy statements, compiled once and
prepared on the server.

No pre-ping: a read that fails (the server restarted, the connection was cut) closes the
connection and raises, and the request goes to the app, which answers it through its pool
as it always would. The next read connects again, at most once a second after a failure.
A statement the server refuses on a sound connection keeps the connection. A thread that
would wait over a second for the connection, or a read while it waits to reconnect, hands
the request to the app too (Unavailable). Through a transaction-mode pooler nothing is
prepared: the next statement may reach another server connection.

DB_REVALIDATION_CONNECTION=false reads through the pool instead: one connection fewer per
worker, for a database plan that cannot spare it.
"""

import contextlib
import os
import queue
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

import psycopg
import sqlalchemy as sa
from flask import Flask, current_app
from psycopg.rows import namedtuple_row
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

from ..db import (
    autocommit_connection,
    conninfo,
    current_nonce,
    is_sqlite_url,
    pg_connect_args,
    read_only_server,
)
from ..extensions import db

RETRY_SECONDS = 1.0  # after a failed read or connect, the app answers until then
WAIT_SECONDS = 1.0  # longest a thread waits for the connection before the app answers
ROLE = "site"
EXTENSION = "soloist.revalidation"  # app.extensions: the worker's Reader
_DIALECT = PGDialect_psycopg()
Connection = psycopg.Connection[NamedTuple]  # its rows are named tuples (namedtuple_row)


def init_app(app: Flask) -> None:
    """Give a PostgreSQL app's worker its Reader, closed with the app's other connections."""
    if not app.config["DB_REVALIDATION_CONNECTION"] or is_sqlite_url(
            app.config["SQLALCHEMY_DATABASE_URI"]):
        return
    reader = app.extensions[EXTENSION] = Reader(app.config)
    with app.app_context():
        sa.event.listen(db.engine, "engine_disposed", lambda _engine: reader.close())


def read(stmt: sa.Select, **params: Any) -> Any:
    """Return stmt's one row (or None) for a 304: on the worker's Reader, else on the pool.

    Raises Unavailable when the app should answer the request itself.
    """
    reader = current_app.extensions.get(EXTENSION)
    if reader is not None:
        return reader.one(stmt, **params)
    with autocommit_connection() as conn:  # SQLite, or DB_REVALIDATION_CONNECTION=false
        return conn.execute(stmt, params).one_or_none()


class Unavailable(Exception):
    """The read cannot be made now (reconnecting, or the connection busy): let the app answer."""


class Reader:
    """A pool of one: the worker's connection for revalidation reads, its threads in turn."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.conninfo = conninfo(config["SQLALCHEMY_DATABASE_URI"])  # every host of it
        self.config = config
        self.prepare = not config["DB_WEB_VIA_POOLER"]
        self._slot: queue.Queue[Connection | None] = queue.Queue(maxsize=1)
        self._slot.put(None)  # the connection once made; a thread takes it, reads, puts it back
        self._pid = 0
        self._nonce = ""
        self._close_when_back = False  # close() found the connection in use
        self._retry_at = 0.0
        self._compiled: dict[sa.Select, tuple[str, dict]] = {}

    def one(self, stmt: sa.Select, **params: Any) -> Any:
        """Return stmt's one row (None: no row), times as UTC, or raise.

        Raises Unavailable when the app should answer instead, psycopg.Error when the read
        failed (the connection is dropped then if it broke).
        """
        sql, defaults = self._compile(stmt)
        try:
            conn = self._slot.get(timeout=WAIT_SECONDS)
        except queue.Empty:
            raise Unavailable("the revalidation connection is busy") from None
        try:
            conn = self._connected(conn)
            row = conn.execute(sql, {**defaults, **params}, prepare=self.prepare).fetchone()
        except psycopg.Error:
            if conn is None or conn.closed or conn.broken:  # not a refused statement
                self._dropped(conn)
                conn = None
            raise
        finally:
            if self._close_when_back and conn is not None:  # close() could not wait for it
                self._close_when_back = False
                with contextlib.suppress(psycopg.Error):
                    conn.close()
                conn = None
            self._slot.put(conn)
        if row is None:
            return None
        return row._make(v.astimezone(UTC) if isinstance(v, datetime) else v for v in row)

    def _compile(self, stmt: sa.Select) -> tuple[str, dict]:
        if stmt not in self._compiled:
            compiled = stmt.compile(dialect=_DIALECT)
            self._compiled[stmt] = (str(compiled), dict(compiled.params))
        return self._compiled[stmt]

    def _connected(self, conn: Connection | None) -> Connection:
        """Return conn if this process can read on it, else a new connection (or raise)."""
        if conn is not None and not conn.closed and self._pid == os.getpid():
            if not read_only_server(conn) and self._nonce == current_nonce():
                return conn  # (a forked child never reads on its parent's socket)
            conn.close()  # a standby now, or made under the process's previous nonce
        if time.monotonic() < self._retry_at:
            raise Unavailable("reconnecting after a failure")
        self._nonce = current_nonce()
        conn = psycopg.connect(self.conninfo, autocommit=True, row_factory=namedtuple_row,
                               **pg_connect_args(self.config, ROLE))
        self._pid = os.getpid()
        if read_only_server(conn):  # a standby: the app's pool finds the primary instead
            conn.close()
            raise psycopg.OperationalError("the revalidation connection reached a standby")
        return conn

    def _dropped(self, conn: Connection | None) -> None:
        """Close conn after a failed read or connect; try again a second later at the earliest."""
        self._retry_at = time.monotonic() + RETRY_SECONDS
        if conn is not None and self._pid == os.getpid():
            with contextlib.suppress(psycopg.Error):  # already broken: closing is all that is left
                conn.close()

    def close(self) -> None:
        """Close the connection (the app's engine disposed of; a worker's exit closes it too).

        A read that holds it for over WAIT_SECONDS closes it when it is done.
        """
        try:
            conn = self._slot.get(timeout=WAIT_SECONDS)
        except queue.Empty:
            self._close_when_back = True  # the read holding it closes it when done
            return
        try:
            if conn is not None and self._pid == os.getpid():
                conn.close()
        finally:
            self._slot.put(None)
