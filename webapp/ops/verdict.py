"""The status page's first sentence: all is well, or what is wrong and what Soloist is
doing about it, in the words of someone who only wants posts to go out on time.

Built from the same snapshot as the rest of the page (who holds each key, how old its
heartbeat is, who stands by) and the freezes in force; status/_verdict.html words it.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from ..leadership.status import ENDS, KeyStatus, Snapshot
from ..models import Freeze

# what stops when nobody leads a key, said as a reader of the page would
JOBS = {"publish": "publishing", "plugins": "timers and webhooks"}
# what a freeze holds (a timers freeze lets hooks and webhooks go on)
FROZEN_JOB = {"publishing": "publishing", "timers": "timers"}


@dataclass(frozen=True)
class Problem:
    """One thing that keeps posts or timers from going out, and what happens next.

    kind: "paused" (an admin froze it), "no_leader" (no process does it), "stuck" (the
    process doing it stopped moving). within_s: the most it takes Soloist to put it right
    by itself; None when it cannot (a freeze waits for an admin, no process is running).
    """

    kind: str
    job: str
    since: datetime | None = None
    by: str = ""
    reason: str = ""
    within_s: float | None = None
    instance: str = ""
    on_resume: str = ""  # a publishing freeze: what posts that came due do on resume


def problems(snap: Snapshot, freezes: dict[str, Freeze], poll_s: float) -> list[Problem]:
    """Return what is wrong now, publishing first; empty when posts go out on time."""
    found = [Problem("paused", FROZEN_JOB[scope], f.frozen_at, f.frozen_by, f.reason,
                     on_resume=f.on_resume or "")
             for scope, f in sorted(freezes.items()) if scope in FROZEN_JOB]
    for status in snap.keys:
        problem = _leadership(status, snap, poll_s)
        if problem is not None:
            found.append(problem)
    return sorted(found, key=lambda p: p.job != "publishing")  # stable: freezes first


def _leadership(status: KeyStatus, snap: Snapshot, poll_s: float) -> Problem | None:
    """Return the key's problem: nobody leads it, or its leader stopped moving."""
    job = JOBS.get(status.key.name, status.key.name)
    # someone to take over: a standby's lock session, or (one host) the other workers
    takes_over = poll_s if status.standbys or snap.single_host else None
    holder = status.holder
    if holder is None:
        return Problem("no_leader", job, since=_last_end(snap, status.key.name),
                       within_s=takes_over)
    if not holder.stale:
        return None
    age = holder.heartbeat_age_s or 0.0
    return Problem("stuck", job, since=snap.as_of - timedelta(seconds=age),
                   within_s=takes_over, instance=holder.session.instance or "")


def _last_end(snap: Snapshot, name: str) -> datetime | None:
    """Return when the key's last leader went, from the history (None: never led)."""
    return next((c.at for c in snap.history if c.name == name and c.kind in ENDS), None)
