"""Leadership: who leads each scheduler key, taken with advisory locks (or file locks).

The seed's API lives here: `try_acquire_leader(session, key) -> token | None`,
`release_leader(session, token, key)`, `with_scheduler_leader_lock(session, key,
fn)` and the tokens `PG_TOKEN` and `SQLITE_TOKEN`. Each process has one lock
session (`lock_session`), shared by every key; `current_view()` reads who holds
what for the status page, the ops actions, the dashboard and the CLI, with the version
each process recorded. It imports only the bottom of the house (config, db, extensions,
models, version): ops, posts, plugins and the scheduler build on it.
"""

import logging
import os

from flask import current_app

from ..db import client_keepalives, is_postgres, is_sqlite_url, server_options
from .base import LOCK_ERRORS, PG_TOKEN, SQLITE_TOKEN
from .files import VIEW as FILE_VIEW
from .files import FileLockSession
from .pg import VIEW as PG_VIEW
from .pg import PgLockSession

log = logging.getLogger("soloist.locks")

__all__ = ["PG_TOKEN", "SQLITE_TOKEN", "close_all_sessions", "current_view", "lock_session",
           "release_leader", "try_acquire_leader", "with_scheduler_leader_lock"]

_sessions: dict[tuple[int, str], PgLockSession | FileLockSession] = {}


def lock_session(url: str, instance: str, options: str = "", keepalives: dict | None = None,
                 allow_pooler: bool = False) -> PgLockSession | FileLockSession:
    """Return this process's lock session for url, creating it after a fork.

    options are libpq options for the PostgreSQL connection (the server's timeouts and
    keepalives), keepalives the client's (db.client_keepalives); allow_pooler accepts a
    session-mode pooler (LOCK_ALLOW_POOLER).
    """
    key = (os.getpid(), url)
    found = _sessions.get(key)
    if found is None:
        made = FileLockSession(url, instance) if is_sqlite_url(url) else PgLockSession(
            url, instance, options, keepalives, allow_pooler)
        # setdefault is atomic: two threads asking at once get the same (unopened) session
        found = _sessions.setdefault(key, made)
    return found


def current_view():
    """Return the reader of who holds what for the app's database."""
    return PG_VIEW if is_postgres() else FILE_VIEW


def _session_for(session) -> PgLockSession | FileLockSession:
    bind = session.get_bind()
    url = bind.url.render_as_string(hide_password=False)
    if not is_sqlite_url(url):
        url = current_app.config["LOCK_DATABASE_URL"]
    config = current_app.config
    return lock_session(url, config["INSTANCE_NAME"], server_options(config),
                        client_keepalives(config), config["LOCK_ALLOW_POOLER"])


def try_acquire_leader(session, key: int):
    """Try to take key on this process's lock session; return a token, or None if not leader.

    Fails closed: any error while acquiring means "not leader", never "SQLite".
    """
    try:
        locks = _session_for(session)
        if not locks.connected:
            locks.connect()
        return locks.token if locks.try_lock(key) else None
    except LOCK_ERRORS as exc:
        log.warning("could not try the lock for key %#x (%s): not leader", key, exc)
        return None


def release_leader(session, token, key: int) -> bool:
    """Release one level of key taken with try_acquire_leader; log a failed unlock as lost."""
    if token is None:
        return False
    try:
        released = _session_for(session).unlock(key)
    except LOCK_ERRORS as exc:
        log.warning("lost leadership of key %#x: unlock failed (%s)", key, exc)
        return False
    if not released:
        log.warning("lost leadership of key %#x: the lock was no longer held at unlock", key)
    return released


def with_scheduler_leader_lock(session, key: int, fn):
    """Run fn() only if this process leads key; return its result, or None if not leader."""
    token = try_acquire_leader(session, key)
    if token is None:
        return None
    try:
        return fn()
    finally:
        release_leader(session, token, key)


def close_all_sessions() -> None:
    """Close every lock session this process opened (tests and shutdown)."""
    found = list(_sessions.values())
    _sessions.clear()
    for session in found:
        session.close()
