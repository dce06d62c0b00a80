"""Backfills: data a migration copies or fixes a batch at a time, begun by the release and
finished by the fleet.

The new code must neither need a backfill done (docs/deploying.md) nor wait for it: at
1,000,000 posts the copy into post_revisions took most of a minute of the release, and
the platform starts the new instances only when the release ends. So the release runs a
backfill's batches for RELEASE_BACKFILL_SECONDS at most, notes in release_backfills how far
it went, and ends; the housekeeping plugin's timer "finish the releases' backfills", on the
plugins leader, goes on from there (`finish`), pausing after each batch as long as the
batch took, so the fleet's own work keeps at least half the database's time.

Each batch and the note of how far it went commit together, under the note's row lock
(FOR UPDATE SKIP LOCKED): two leaders' runs never do a batch at once, and a run stopped
anywhere resumes at the next batch. The release's batches commit statement by statement
(it runs outside a transaction): one stopped between a batch and its note does that batch
again, which leaves the rows it did alone (steps.backfill asks that of its SQL).
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import sqlalchemy as sa

from ...extensions import db
from ...models import ReleaseBackfill
from ...models.types import utcnow

log = logging.getLogger("soloist.release")
TABLE = cast(sa.Table, ReleaseBackfill.__table__)


@dataclass
class Backfill:
    """One backfill and how far it went: every row with key <= after is done."""

    name: str
    table: str
    key: str
    statement: str
    batch: int
    after: int
    batches: int = 0

    @classmethod
    def of(cls, row: Any) -> "Backfill":
        """Return the backfill a row of release_backfills notes (a model or a Core row)."""
        return cls(row.name, row.table_name, row.key_column, row.statement, row.batch,
                   row.after_key, row.batches)

    def step(self, conn: sa.Connection) -> bool:
        """Run the next batch on conn and note it; return False when none was left (the
        backfill is noted finished)."""
        bounds = sa.text(f"SELECT max({self.key}) FROM (SELECT {self.key} FROM {self.table} "  # noqa: S608
                         f"WHERE {self.key} > :after ORDER BY {self.key} LIMIT :batch) AS b")
        upto = conn.execute(bounds, {"after": self.after, "batch": self.batch}).scalar()
        note = sa.update(TABLE).where(TABLE.c.name == self.name)
        if upto is None:
            conn.execute(note.values(finished_at=utcnow(), updated_at=utcnow()))
            return False
        conn.execute(sa.text(self.statement), {"after": self.after, "upto": upto})
        conn.execute(note.values(after_key=upto, batches=TABLE.c.batches + 1,
                                 updated_at=utcnow()))
        self.after, self.batches = upto, self.batches + 1
        return True

    def said(self) -> str:
        return f"{self.name}: {self.batches} batch(es) of {self.batch} {self.table}"


def begin(conn: sa.Connection, name: str, statement: str, table: str, key: str,
          batch: int) -> Backfill | None:
    """Note a migration's backfill (once: a release tried again finds its note); return it,
    or None if it is finished."""
    TABLE.create(conn, checkfirst=True)  # before the migration that makes it, from the model
    found = conn.execute(sa.select(TABLE).where(TABLE.c.name == name)).first()
    if found is None:
        first = conn.execute(sa.text(f"SELECT min({key}) FROM {table}")).scalar()  # noqa: S608
        now = utcnow()
        conn.execute(sa.insert(TABLE).values(
            name=name, table_name=table, key_column=key, statement=statement, batch=batch,
            after_key=(first or 1) - 1, batches=0, began_at=now, updated_at=now,
            finished_at=now if first is None else None))
        found = conn.execute(sa.select(TABLE).where(TABLE.c.name == name)).one()
    return None if found.finished_at is not None else Backfill.of(found)


def run_for(conn: sa.Connection, backfill: Backfill, seconds: float | None,
            clock: Callable[[], float] = time.monotonic) -> bool:
    """Run the release's batches for seconds at most (None: to the end); return whether the
    backfill is finished."""
    until = None if seconds is None else clock() + seconds
    while until is None or clock() < until:
        if not backfill.step(conn):
            return True
    log.info("the release leaves the rest of backfill %s to the fleet (%d batches done, up "
             "to %s %s)", backfill.name, backfill.batches, backfill.key, backfill.after)
    return False


def pending() -> list[str]:
    """Return the names of the backfills not finished yet."""
    return list(db.session.scalars(sa.select(TABLE.c.name).where(TABLE.c.finished_at.is_(None))
                                   .order_by(TABLE.c.began_at, TABLE.c.name)))


def finish(more: Callable[[], bool], pause: Callable[[float], None] | None,
           clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Go on with every unfinished backfill, a batch a transaction, while more() says so,
    pausing after each batch as long as it took; return what was done, one line a backfill.

    A backfill another run holds the row of (a leader that was replaced, still running) is
    left to it.
    """
    done = []
    for name in pending():
        backfill, finished = None, False
        while more():
            started = clock()
            row = db.session.execute(
                sa.select(ReleaseBackfill).where(ReleaseBackfill.name == name,
                                                 ReleaseBackfill.finished_at.is_(None))
                .with_for_update(skip_locked=True)).scalar_one_or_none()
            if row is None:  # finished meanwhile, or another run holds it
                db.session.commit()
                if backfill is None:
                    done.append(f"{name}: another run is on it")
                break
            if backfill is None:
                backfill = Backfill.of(row)
                counted = backfill.batches
            backfill.after = row.after_key
            finished = not backfill.step(db.session.connection())
            db.session.commit()
            if finished:
                break
            if pause is not None:
                pause(clock() - started)
        if backfill is not None:
            done.append(f"{backfill.name}: {backfill.batches - counted} batch(es) up to "
                        f"{backfill.key} {backfill.after}"
                        + ("; finished" if finished else "; the next run goes on"))
    return done
