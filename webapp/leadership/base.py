"""What every leadership backend shares: tokens, errors, identities and who-holds-what records.

Two backends implement the same two interfaces. A *lock session* (one per
process: `pg.PgLockSession`, `files.FileLockSession`) takes and releases keys
and records terms. A *view* (`pg.VIEW`, `files.VIEW`) reads who holds what for
the status page, the ops actions, the dashboard and the CLI.
"""

from dataclasses import dataclass, field
from datetime import datetime

import psycopg

from ..db import identity, parse_identity_parts

__all__ = ["ENDED_DETAIL", "LOCK_ERRORS", "PG_TOKEN", "SQLITE_TOKEN", "BaseLockSession",
           "LockSession", "LockUnavailable", "OpsError", "PollRow", "identity", "is_stale",
           "parse_identity", "process_of", "silence"]


ENDED_DETAIL = ("its lock session ended without releasing the key (killed, cut off or timed "
                "out); shown held until its last heartbeat")


class _Token:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


PG_TOKEN = _Token("PG_TOKEN")
SQLITE_TOKEN = _Token("SQLITE_TOKEN")


class LockUnavailable(Exception):
    """The lock session cannot take locks (no connection, or an unsafe one)."""


# What a lock session raises when its connection or database fails: "not leader", never fatal
LOCK_ERRORS = (psycopg.Error, LockUnavailable, OSError)


class OpsError(Exception):
    """An ops action could not be done; the message says why, for the admin."""


@dataclass
class PollRow:
    """What one poll learned about one key."""

    key: int
    acquired: bool
    heartbeat_age: float | None  # its holder's age by the one rule (None: nobody holds it)
    term: int = 0
    recorded: bool = True  # the age is its term's heartbeat, not its lock session's activity


@dataclass
class LockSession:
    """One process's lock session as a reader sees it (a standby unless it holds a key)."""

    application_name: str
    instance: str
    pid: int | None  # the OS process id, from application_name
    backend_pid: int | None = None  # the PostgreSQL backend (None in SQLite mode)
    client_addr: str | None = None
    backend_start: datetime | None = None
    keys: list[int] = field(default_factory=list)
    version: str = ""  # the code its process runs ("": it recorded none)
    schema: str = ""  # the newest migration that code ships

    @property
    def holder_pid(self) -> int | None:
        """Return the pid leader_state.holder_pid records for this session's terms."""
        return self.backend_pid if self.backend_pid is not None else self.pid


class BaseLockSession:
    """What both lock sessions keep: the instance they belong to and each key's re-entries."""

    def __init__(self, instance: str) -> None:
        self.instance = instance
        self.counts: dict[int, int] = {}  # key -> how many times this session took it
        self.session_name = ""  # the name its open connection carries, once connected

    def wait_for(self, key: int, seconds: float) -> bool | None:
        """Wait up to seconds for key to come free and take it; None: this backend cannot.

        The file backend cannot wait on several things at once, so its standbys poll.
        """
        return None

    def interrupt(self) -> None:
        """End a wait_for in progress from another thread (nothing to end here)."""

    @property
    def name(self) -> str:
        """Return this session's identity (its application_name on PostgreSQL)."""
        return self.session_name or identity(self.instance)


def parse_identity(application_name: str) -> tuple[str, int | None]:
    """Split soloist:<instance>:<pid>[:<boot>:<nonce>] into instance and pid ("", None if
    not ours): for display; a process is told from another by its boot id (process_of)."""
    found = parse_identity_parts(application_name)
    if found is None or found.role != "lock":
        return "", None
    return found.instance, found.pid


def process_of(application_name: str) -> str:
    """Return the boot id of the process an application_name belongs to ("" if unknown)."""
    found = parse_identity_parts(application_name)
    return "" if found is None else found.boot


def is_stale(heartbeat_age: float | None, stale_seconds: float) -> bool:
    """Return whether a holder is silent long enough to evict it; an unknown age is stale.

    A holder's age is never taken for fresh because it is unknown: a key held by a session
    that recorded no heartbeat would otherwise have no judge.
    """
    return heartbeat_age is None or heartbeat_age > stale_seconds


def silence(age: float | None, recorded: bool = True) -> str:
    """Say how long a holder has been silent, in the words of the status page."""
    if age is None:
        return "no sign of life known"
    if recorded:
        return f"heartbeat {age:.1f} s old"
    return f"no heartbeat recorded; its session last did something {age:.1f} s ago"
