"""One purger's sender: claim its due purges, purge them in one go, record the outcome.

webapp.plugins.purges writes and claims the rows; this module sends a claimed batch and
writes what came of it, fenced by the claim, and says when purges are next due (for the
plugin tick's look) and how each purger is doing (status page, metrics).
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from flask import current_app

from ..db import rows_changed
from ..extensions import db
from ..leadership.fence import Lead
from ..models import CachePurge
from ..ops import alerts, replica
from ..site import purgers
from .purges import FAILING_AFTER, LEASE, Batch, claim, mine, still_held, theirs

log = logging.getLogger("soloist.plugins.purges")


def send_purger(name: str, lead: Lead, now: Callable[[], datetime],
                budget: float) -> dict[str, int]:
    """Send one purger's due purges, batch after batch, until none is left, one fails, or
    budget ends; return how many purges were done, retried, failed or found stale."""
    counts = {"done": 0, "retrying": 0, "failed": 0, "stale": 0}
    purger = purgers.configured().get(name)
    start = now()
    while purger is not None and (now() - start).total_seconds() < budget:
        batch = claim(name, now(), lead)
        if batch is None:
            break
        result, count = attempt(batch, purger, now)
        counts[result] += count
        if result != "done":
            break  # the rest waits out the purger's back-off with it
    return counts


def merged(rows: Sequence[tuple[str, bool]]) -> tuple[list[str], bool]:
    """Return the rows' keys, each once and in order, and whether any row purges hard."""
    keys = [key for text, _hard in rows for key in text.split()]
    return list(dict.fromkeys(keys)), any(hard for _keys, hard in rows)


def attempt(batch: Batch, purger: purgers.Purger,
            now: Callable[[], datetime]) -> tuple[str, int]:
    """Purge a claimed batch's keys in as few requests as the purger takes; record it."""
    rows = still_held(batch, now())
    if not rows:
        return "stale", len(batch.ids)
    keys, hard = merged(rows)
    error, wait = "", None
    try:
        purger.purge(keys, hard)
    except purgers.PurgeFailed as exc:
        error, wait = str(exc), exc.retry_after
    except Exception as exc:  # anything else is a failed attempt too, never a stuck batch
        log.exception("purge by %s failed unexpectedly", batch.purger)
        error = f"{type(exc).__name__}: {exc}"
    if error:
        log.info("purge by %s failed: %s", batch.purger, error)
    return record(batch, error, wait, now()), len(rows)


def record(batch: Batch, error: str, wait: float | None, at: datetime) -> str:
    """Write the batch's outcome while the claim holds: done, retrying or failed."""
    if not error:
        done = rows_changed(sa.update(CachePurge).where(mine(batch)).values(
            status="done", done_at=at, claim="", last_error="", next_attempt_at=None))
        db.session.commit()
        return "done" if done else "stale"
    attempts = db.session.scalar(sa.select(sa.func.max(CachePurge.attempts)).where(
        mine(batch))) or 0
    config = current_app.config
    delay = timedelta(seconds=config["RETRY_SECONDS"])
    if wait is not None:  # the cache's own Retry-After (a rate limit), if longer
        delay = max(delay, timedelta(seconds=wait))
    retry_at = at + delay
    # past the caches' own lifetime every copy the purge would drop has expired by itself
    moot = at - timedelta(seconds=config["SITE_SHARED_MAX_AGE_SECONDS"])
    held = rows_changed(sa.update(CachePurge).where(mine(batch)).values(
        status=sa.case((CachePurge.created_at < moot, "failed"), else_="pending"),
        claim="", last_error=error[:500], next_attempt_at=retry_at))
    if held:  # the purger's other waiting purges go with the retry, in the same request
        db.session.execute(sa.update(CachePurge).where(
            CachePurge.purger == batch.purger, CachePurge.status == "pending",
            CachePurge.next_attempt_at < retry_at).values(next_attempt_at=retry_at))
        if attempts == FAILING_AFTER:  # it turns failing: once per failing spell
            alerts.purge_failing(batch.purger, attempts, error[:500], at)
    db.session.commit()
    return "retrying" if held else "stale"


# -- when next, and how each purger is doing -----------------------------------------------

def due_reads(lead: Lead, names: Sequence[str]) -> list[sa.ColumnElement]:
    """Return what due() reads, as scalar subqueries for one SELECT with others' reads."""
    named = CachePurge.purger.in_(list(names))
    pending, sending = CachePurge.status == "pending", CachePurge.status == "sending"
    held = replica.held(CachePurge.replica_lsn)
    return [sa.select(sa.func.min(CachePurge.next_attempt_at)).where(named, pending, ~held)
            .scalar_subquery(),
            sa.select(sa.func.min(CachePurge.claimed_at)).where(named, sending)
            .scalar_subquery(),
            sa.exists().where(named, sending, theirs(lead)),
            sa.select(sa.func.min(CachePurge.created_at)).where(named, pending, held)
            .scalar_subquery()]


def due(values: Sequence, now: datetime) -> tuple[datetime | None, bool]:
    """Return when a purge or a lapsed claim is next due, and whether another leader's waits."""
    first, claimed, earlier_term, held_since = values
    times = [t for t in (first, claimed and claimed + LEASE) if t is not None]
    if held_since is not None:
        times.append(replica.next_look(now, held_since))
    return min(times, default=None), bool(earlier_term)


@dataclass(frozen=True)
class Health:
    """How one purger is doing: its last success, what waits and since when, its last error."""

    name: str
    last_done: datetime | None
    lag_seconds: float | None  # the last done purge: from its event to the cache's yes
    waiting: int
    oldest_waiting: datetime | None
    failed: int
    last_error: str

    def behind(self, now: datetime) -> float:
        """Return how long the oldest waiting purge has waited (0: none waits)."""
        return 0.0 if self.oldest_waiting is None else (
            max((now - self.oldest_waiting).total_seconds(), 0.0))


def health(names: Sequence[str]) -> list[Health]:
    """Return each purger's health: the configured ones and any with rows, by name."""
    waiting = CachePurge.status.in_(("pending", "sending"))
    rows = {r.purger: r for r in db.session.execute(
        sa.select(CachePurge.purger, sa.func.max(CachePurge.done_at).label("last_done"),
                  sa.func.count().filter(waiting).label("waiting"),
                  sa.func.min(CachePurge.created_at).filter(waiting).label("oldest"),
                  sa.func.count().filter(CachePurge.status == "failed").label("failed"))
        .group_by(CachePurge.purger))}
    found = []
    for name in sorted(set(names) | set(rows)):
        row = rows.get(name)
        last = db.session.execute(
            sa.select(CachePurge.done_at, CachePurge.created_at).where(
                CachePurge.purger == name, CachePurge.status == "done")
            .order_by(CachePurge.done_at.desc()).limit(1)).first()
        error = db.session.scalar(sa.select(CachePurge.last_error).where(
            CachePurge.purger == name, CachePurge.last_error != "",
            CachePurge.status != "done").order_by(CachePurge.id.desc()).limit(1)) or ""
        found.append(Health(name, row and row.last_done,
                            (last[0] - last[1]).total_seconds() if last and last[0] else None,
                            row.waiting if row else 0, row and row.oldest,
                            row.failed if row else 0, error))
    db.session.rollback()
    return found
