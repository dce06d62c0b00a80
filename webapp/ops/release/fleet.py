"""The code the fleet runs, read from its lock sessions, and the contract steps it allows.

Every process records its version and schema (the newest migration its code ships) when
its lock session connects (webapp.leadership); a lock session that recorded none runs
code from before versions were recorded, older than any contract step can allow.
"""

from ...extensions import MIGRATIONS
from ...leadership import current_view
from ...leadership.base import LockSession
from ...leadership.keys import KEYS
from .limits import ReleaseError


def lock_sessions() -> list[LockSession]:
    """Return every lock session of the fleet, with the version each recorded."""
    return current_view().sessions([key.value for key in KEYS.values()])


def revision_order(scripts=None) -> list[str]:
    """Return the revisions of the migrations (of an Alembic ScriptDirectory, by default
    the app's), oldest first."""
    from alembic.script import ScriptDirectory  # with a release only

    scripts = scripts or ScriptDirectory(str(MIGRATIONS))
    return [script.revision for script in reversed(list(scripts.walk_revisions()))]


def older_code(required: str, order: list[str],
               sessions: list[LockSession] | None = None) -> list[LockSession]:
    """Return the lock sessions whose code is older than migration required (or unknown),
    by the order of the migrations (revision_order)."""
    rank = {revision: index for index, revision in enumerate(order)}
    need = rank.get(required, len(order))
    found = lock_sessions() if sessions is None else sessions
    return [s for s in found if rank.get(s.schema, -1) < need]


def describe(session: LockSession) -> str:
    """Name a lock session and the code it runs, for a message."""
    who = f"{session.instance or session.application_name} (pid {session.pid})"
    if not session.schema:
        return f"{who}, which recorded no version (code from before versions were recorded)"
    return f"{who} on version {session.version}, schema {session.schema}"


def refuse_older_code(required: str, order: list[str], step: str = "") -> None:
    """Raise ReleaseError naming the lock sessions that run code older than required."""
    older = older_code(required, order)
    if older:
        raise ReleaseError(contract_refused(required, older, step))


def contract_refused(required: str, older: list[LockSession], step: str = "") -> str:
    """Say why a contract step may not run yet, and what to do."""
    which = f"migration {step}" if step else "a pending migration"
    return (f"{which} is a contract step: it drops what code older than migration {required} "
            f"reads, and {len(older)} lock session(s) still run such code: "
            f"{'; '.join(describe(s) for s in older)}. Nothing was changed. Let the release "
            f"that brought {required} finish its rolling restart (every instance on it or "
            "later, as the status page's Version column shows), then release again.")
