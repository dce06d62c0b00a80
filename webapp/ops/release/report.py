"""What a release did: each migration's time, its waits for a gap, the locks it held, and
the longest the fleet was seen waiting behind it.

A Recorder listens on the migrations' connection while env.py runs them. At every commit
it reads pg_locks for the locks its transaction holds (tables it made itself left out:
nobody waits for those) and pg_stat_activity for the sessions waiting behind them, which
wait until that commit; a statement outside a transaction (an index built concurrently,
a backfill's batch) holds the locks its text takes (plan.locks_of) while it runs.
"""

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import sqlalchemy as sa
from sqlalchemy import event

from ...db import is_sqlite_dialect
from .plan import BLOCKS, locks_of, new_table, strongest

HELD_SQL = """
SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
WHERE l.pid = pg_backend_pid() AND l.granted AND l.locktype = 'relation'
  AND c.relkind IN ('r', 'p') AND c.relnamespace <> 'pg_catalog'::regnamespace
  AND c.relname <> 'alembic_version'
"""
# how long the sessions waiting behind this one have waited so far (they wait until it
# commits): their statement's start, not their wait's, so a long statement counts in full
BEHIND_SQL = """
SELECT coalesce(max(extract(epoch FROM clock_timestamp() - a.query_start)), 0)::float8
FROM pg_stat_activity a
WHERE a.wait_event_type = 'Lock' AND pg_backend_pid() = ANY(pg_blocking_pids(a.pid))
"""


def mode_name(pg_mode: str) -> str:
    """Return pg_locks' RowExclusiveLock as the documentation's ROW EXCLUSIVE."""
    words: list[str] = []
    for char in pg_mode.removesuffix("Lock"):
        if char.isupper() and words:
            words.append(" ")
        words.append(char.upper())
    return "".join(words)


@dataclass
class Lock:
    """A table lock a migration held, and the longest it held it."""

    table: str
    mode: str
    seconds: float

    @property
    def blocks(self) -> str:
        """Return what of the fleet's work waits for this lock ("" for none)."""
        return BLOCKS.get(self.mode, "")


@dataclass
class Step:
    """One migration of a release."""

    revision: str = ""
    title: str = ""
    seconds: float = 0.0
    tries: int = 1
    waited: float = 0.0  # in tries that gave way, and the pauses after them
    locks: list[Lock] = field(default_factory=list)
    behind: float = 0.0  # the longest another session was seen waiting behind it

    def hold(self, table: str, mode: str, seconds: float) -> None:
        """Note that the step held mode on table for seconds (the strongest, the longest)."""
        for lock in self.locks:
            if lock.table == table:
                lock.mode = strongest(lock.mode, mode)
                lock.seconds = max(lock.seconds, seconds)
                return
        self.locks.append(Lock(table, mode, seconds))


@dataclass
class Release:
    """A release's migrations and what they cost the fleet."""

    lock_timeout: float
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0
    left_to_fleet: list[str] = field(default_factory=list)  # backfills the fleet finishes

    @property
    def longest_wait(self) -> float:
        """Return the longest a session of the fleet was seen waiting behind the release."""
        return max((step.behind for step in self.steps), default=0.0)

    @property
    def gave_way(self) -> int:
        """Return how many times a migration gave way to the fleet and was tried again."""
        return sum(step.tries - 1 for step in self.steps)

    def as_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        """Return the report as the release prints it."""
        if not self.steps:
            return [f"No migration to run ({self.seconds:.2f} s)."]
        lines = [f"Migrated in {self.seconds:.2f} s: {len(self.steps)} migration(s); the "
                 f"longest wait seen behind them {self.longest_wait:.2f} s; "
                 f"{self.gave_way} gave way to the fleet (none waits more than "
                 f"{self.lock_timeout:g} s for a lock the fleet could queue behind)."]
        for step in self.steps:
            lines.append(f"  {step.revision}  {step.seconds:6.2f} s  {step.title}")
            if step.tries > 1:
                lines.append(f"        gave way {step.tries - 1} time(s): {step.waited:.2f} s "
                             "waiting for a gap")
            for lock in sorted(step.locks, key=lambda lock: -lock.seconds):
                what = f"blocks {lock.blocks}" if lock.blocks else "blocks neither"
                lines.append(f"        {lock.mode} on {lock.table} for {lock.seconds:.3f} s "
                             f"({what})")
        for backfill in self.left_to_fleet:
            lines.append(f"Left to the fleet (the housekeeping plugin finishes it within "
                         f"minutes; the new code does not need it): {backfill}.")
        return lines


class Recorder:
    """Measures the migrations env.py runs on one connection (runner.run calls it)."""

    def __init__(self, lock_timeout: float, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = clock()
        self.release = Release(lock_timeout)
        self.step = Step()
        self.step_started = self.attempt_started = self.started
        self.transaction_started: float | None = None
        self.statement_started = 0.0
        self.new_tables: set[str] = set()
        self.ending: tuple[str, str] | None = None
        self.busy = False  # reading pg_locks: its own statements are not the migration's

    def attach(self, connection: sa.Connection) -> None:
        """Listen on the migrations' connection."""
        self.postgres = not is_sqlite_dialect(connection.dialect)
        event.listen(connection, "before_cursor_execute", self._before)
        event.listen(connection, "after_cursor_execute", self._after)
        event.listen(connection, "commit", self._commit)
        event.listen(connection, "rollback", self._rollback)

    def applied(self, ctx, step, heads, run_args) -> None:
        """Alembic's on_version_apply: the step's transaction commits next."""
        script = step.up_revision
        title = (script.doc or "").strip().splitlines()[0] if script is not None else ""
        self.ending = (step.up_revision_id or "", title)

    def gave_way(self, pause: float) -> None:
        """A try of the current step gave way; the next starts after pause seconds."""
        now = self.clock()
        self.step.tries += 1
        self.step.waited += now - self.attempt_started + pause
        self.attempt_started = now + pause
        self.transaction_started = None

    def left_to_fleet(self, backfill: str) -> None:
        """A backfill stopped at the release's time for it; the fleet finishes it."""
        self.release.left_to_fleet.append(backfill)

    def finish(self) -> Release:
        """Return the release's report."""
        self.release.seconds = self.clock() - self.started
        return self.release

    def _autocommit(self, conn: sa.Connection) -> bool:
        return conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"

    def _before(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if self.busy:
            return
        now = self.clock()
        self.statement_started = now
        if self.transaction_started is None and not self._autocommit(conn):
            self.transaction_started = now
        made = new_table(statement)
        if made:
            self.new_tables.add(made)

    def _after(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if self.busy or not self.postgres or not self._autocommit(conn):
            return
        seconds = self.clock() - self.statement_started
        for table, mode in locks_of(statement).items():
            if table not in self.new_tables:
                self.step.hold(table, mode, seconds)

    def _commit(self, conn: sa.Connection) -> None:
        if self.busy:
            return
        if self.postgres and not self._autocommit(conn):
            self._read_locks(conn)
        self.transaction_started = None
        if self.ending:
            self.step.revision, self.step.title = self.ending
            now = self.clock()
            self.step.seconds = now - self.step_started
            self.release.steps.append(self.step)
            self.step, self.ending = Step(), None
            self.step_started = self.attempt_started = now

    def _rollback(self, conn: sa.Connection) -> None:
        self.transaction_started = None

    def _read_locks(self, conn: sa.Connection) -> None:
        held_for = self.clock() - (self.transaction_started or self.clock())
        self.busy = True
        try:
            held = conn.exec_driver_sql(HELD_SQL).all()
            behind = conn.exec_driver_sql(BEHIND_SQL).scalar() or 0.0
        except sa.exc.DBAPIError:  # a failed transaction: it rolls back, nothing was held
            return
        finally:
            self.busy = False
        for table, mode in held:
            if table not in self.new_tables:
                self.step.hold(table, mode_name(mode), held_for)
        self.step.behind = max(self.step.behind, behind)
