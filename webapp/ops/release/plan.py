"""What each pending migration will run, and the locks each of its statements takes.

The SQL is the migrations' own, emitted by Alembic's offline mode (`flask db upgrade
--sql` writes the same): every statement in order, each marked as inside the
migration's transaction or outside one (an index built concurrently, a constraint
validated, a backfill's batch). The lock of each statement is read from its text, as
PostgreSQL's documentation gives them ("Explicit Locking"); the report names the locks a
release held from pg_locks itself.
"""

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...db import is_postgres
from ...extensions import db
from .limits import Limits, ReleaseError

# PostgreSQL's table lock modes, weakest first, and what of the fleet's work waits for each
MODES = ["ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE",
         "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"]
BLOCKS = {"SHARE": "writes", "SHARE ROW EXCLUSIVE": "writes", "EXCLUSIVE": "writes",
          "ACCESS EXCLUSIVE": "reads and writes"}
BOOKKEEPING = "alembic_version"
RUNNING = re.compile(r"^-- Running upgrade (\S*) -> (\S+)", re.M)

NAME = r'"?([A-Za-z_][\w$]*)"?'
TABLE = rf'(?:ONLY\s+)?(?:{NAME}\.)?{NAME}'


def strongest(*modes: str) -> str:
    """Return the strongest of lock modes."""
    return max(modes, key=MODES.index)


def _references(sql: str) -> dict[str, str]:
    found = re.findall(rf"REFERENCES\s+{TABLE}", sql, re.I)
    return {table: "SHARE ROW EXCLUSIVE" for _schema, table in found}


def _alter_table(table: str, rest: str) -> dict[str, str]:
    """Return the locks of ALTER TABLE table <rest>."""
    upper = rest.upper()
    if re.match(r"\s*VALIDATE\s+CONSTRAINT", upper):
        return {table: "SHARE UPDATE EXCLUSIVE"}
    if re.search(r"\bADD\s+CONSTRAINT\s+\S+\s+FOREIGN\s+KEY", upper):
        return {table: "SHARE ROW EXCLUSIVE", **_references(rest)}
    return {table: "ACCESS EXCLUSIVE", **_references(rest)}


# (pattern, locks of a match): the first pattern that matches a statement's start wins
PATTERNS = [
    (rf"CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+{TABLE}",
     lambda m, sql: {m.group(2): "SHARE UPDATE EXCLUSIVE"}),
    (rf"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+{TABLE}",
     lambda m, sql: {m.group(2): "SHARE"}),
    (r"DROP\s+INDEX\s+CONCURRENTLY\s+(?:IF\s+EXISTS\s+)?(\S+)",
     lambda m, sql: {f"the table of {m.group(1)}": "SHARE UPDATE EXCLUSIVE"}),
    (r"DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?(\S+)",
     lambda m, sql: {f"the table of {m.group(1)}": "ACCESS EXCLUSIVE"}),
    (rf"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{TABLE}",
     lambda m, sql: {**_references(sql), m.group(2): "ACCESS EXCLUSIVE"}),
    (rf"ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?{TABLE}(.*)",
     lambda m, sql: _alter_table(m.group(2), m.group(3))),
    (rf"DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?{TABLE}",
     lambda m, sql: {m.group(2): "ACCESS EXCLUSIVE"}),
    (rf"INSERT\s+INTO\s+{TABLE}",
     lambda m, sql: {**_read(sql), m.group(2): "ROW EXCLUSIVE"}),
    (rf"UPDATE\s+{TABLE}", lambda m, sql: {**_read(sql), m.group(2): "ROW EXCLUSIVE"}),
    (rf"DELETE\s+FROM\s+{TABLE}", lambda m, sql: {**_read(sql), m.group(2): "ROW EXCLUSIVE"}),
    (rf"TRUNCATE\s+(?:TABLE\s+)?{TABLE}", lambda m, sql: {m.group(2): "ACCESS EXCLUSIVE"}),
]
COMPILED = [(re.compile(pattern, re.I | re.S), locks) for pattern, locks in PATTERNS]


def _read(sql: str) -> dict[str, str]:
    return {table: "ACCESS SHARE" for _schema, table in
            re.findall(rf"\b(?:FROM|JOIN)\s+{TABLE}", sql, re.I)}


def strip_comments(sql: str) -> str:
    """Return sql without its -- comments (a marker line before a statement, say)."""
    return "\n".join(line for line in sql.splitlines()
                     if not line.lstrip().startswith("--")).strip()


def locks_of(sql: str) -> dict[str, str]:
    """Return the table locks a statement takes: {table: mode}; {} for one that takes none
    of a table (SET, CREATE EXTENSION, a SELECT of the catalogue), Alembic's own left out."""
    text = strip_comments(sql)
    for pattern, locks in COMPILED:
        match = pattern.match(text)
        if match:
            found = locks(match, text)
            found.pop(BOOKKEEPING, None)
            return found
    return {}


def new_table(sql: str) -> str | None:
    """Return the table a CREATE TABLE statement makes, else None."""
    match = COMPILED[4][0].match(strip_comments(sql))
    return match.group(2) if match else None


@dataclass
class Statement:
    """One statement of a migration, inside its transaction or not."""

    sql: str
    transaction: int  # which of the run's transactions it is in; 0: outside one
    note: str = ""  # the comment line before it (a backfill's batch says what it is)
    patient: bool = False  # it waits for its lock up to the statement timeout (steps.patient)

    @property
    def in_transaction(self) -> bool:
        return self.transaction > 0

    @property
    def locks(self) -> dict[str, str]:
        return locks_of(self.sql)


@dataclass
class Migration:
    """One migration as the offline SQL shows it."""

    revision: str
    down: str
    statements: list[Statement] = field(default_factory=list)
    title: str = ""
    contract: str | None = None  # a contract step: the oldest code it allows to run

    def new_tables(self) -> set[str]:
        return {name for s in self.statements if (name := new_table(s.sql))}


class _Reader:
    """Reads offline SQL line by line into migrations (split's state)."""

    def __init__(self) -> None:
        self.found: list[Migration] = []
        self.transaction, self.begun = 0, 0
        self.patient = False
        self.note = ""
        self.buffer: list[str] = []
        self.short = ""  # the session's first lock_timeout: the short one

    def line(self, line: str) -> None:
        running = RUNNING.match(line)
        if running:
            self.found.append(Migration(running.group(2), running.group(1)))
        elif not self.buffer and line.startswith("--"):
            self.note = line[2:].strip()
        elif line.strip() or self.buffer:
            self.buffer.append(line)
            if line.rstrip().endswith(";"):
                self.statement("\n".join(self.buffer).strip().rstrip(";").strip())
                self.buffer = []

    def statement(self, sql: str) -> None:
        keyword = sql.upper()
        if keyword == "BEGIN":
            self.begun += 1
            self.transaction = self.begun
        elif keyword == "COMMIT":
            self.transaction = 0
        elif keyword.startswith("SET LOCK_TIMEOUT"):
            self.short = self.short or keyword
            self.patient = keyword != self.short
        elif self.found:
            self.found[-1].statements.append(
                Statement(sql, self.transaction, self.note, self.patient))
        self.note = ""


def split(sql: str) -> list[Migration]:
    """Split Alembic's offline output into migrations and their statements."""
    reader = _Reader()
    for line in sql.splitlines():
        reader.line(line)
    return reader.found


def offline_sql(config, start: str | None, destination: str = "heads") -> str:
    """Return the SQL Alembic's offline mode emits from start (None: an empty database)."""
    from alembic import command  # with the release only

    buffer = io.StringIO()
    config.output_buffer = buffer
    try:
        command.upgrade(config, f"{start}:{destination}" if start else destination, sql=True)
    finally:
        config.output_buffer = None
    return buffer.getvalue()


def current_revision() -> str | None:
    """Return the migration the database is at (None: an empty database)."""
    from alembic.runtime.migration import MigrationContext  # with the release only

    with db.engine.connect() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
    if len(heads) > 1:
        raise ReleaseError(f"the database is at several heads ({', '.join(heads)}): merge them "
                           "(flask db merge) before a release")
    return heads[0] if heads else None


def pending(config) -> tuple[str | None, list[Migration]]:
    """Return the database's revision and the migrations a release would run from it."""
    from alembic.script import ScriptDirectory  # with the release only

    start = current_revision()
    scripts = ScriptDirectory.from_config(config)
    if is_postgres():
        migrations = split(offline_sql(config, start))
    else:  # Alembic writes no SQLite SQL offline (batch mode reflects the live tables)
        migrations = [Migration(script.revision, _named(script.down_revision))
                      for script in reversed(list(scripts.iterate_revisions(
                          "heads", start or "base")))]
    for migration in migrations:
        script = scripts.get_revision(migration.revision)
        migration.title = (script.doc or "").strip().splitlines()[0]
        migration.contract = getattr(script.module, "contract", None)
    return start, migrations


def lock_words(statement: Statement, made: set[str]) -> str:
    """Say which locks a statement takes and what of the fleet waits for them."""
    locks = statement.locks
    if not locks:
        return "no lock on a table"
    words = []
    for table, mode in sorted(locks.items(), key=lambda item: -MODES.index(item[1])):
        if table in made:
            words.append(f"{mode} on {table}, new: nobody waits")
        else:
            waits = BLOCKS.get(mode, "neither reads nor writes")
            words.append(f"{mode} on {table}: blocks {waits}")
    wait = ("waits for it as long as it must (nothing queues behind it)" if statement.patient
            else "waits for it at most the lock timeout")
    return "; ".join(words) + f"; {wait}"


def _named(down: str | Sequence[str] | None) -> str:
    """Return the revision a migration follows (several, for a merge)."""
    return down if isinstance(down, str) else ", ".join(down or ())


def first_line(sql: str, width: int = 96) -> str:
    line = " ".join(sql.split())
    return line if len(line) <= width else line[:width - 1] + "…"


def describe(start: str | None, migrations: list[Migration], limits: Limits) -> list[str]:
    """Return the plan as `release --dry-run` prints it."""
    lines = [f"The database is at {start or 'no migration (empty)'}: "
             f"{len(migrations)} migration(s) to run."]
    if not migrations:
        return lines
    lines.append(f"Each statement waits at most {limits.lock_timeout:g} s for a lock "
                 "(MIGRATION_LOCK_TIMEOUT_SECONDS), then its migration rolls back and is tried "
                 f"again, up to {limits.retries} times (MIGRATION_LOCK_RETRIES).")
    made: set[str] = set()
    for migration in migrations:
        contract = (f"  [contract step: every process must run code of {migration.contract} "
                    "or later]" if migration.contract else "")
        lines += ["", f"{migration.revision}  {migration.title}{contract}"]
        transaction = None
        for statement in migration.statements:
            if BOOKKEEPING in statement.sql:  # Alembic's note of the revision
                continue
            made |= {name for name in [new_table(statement.sql)] if name}
            if statement.transaction != transaction:
                transaction = statement.transaction
                lines.append("    in a transaction:" if transaction else
                             "    outside a transaction, each statement committed alone:")
            if statement.note and not statement.note.startswith("squawk-ignore"):
                lines.append(f"      -- {statement.note}")
            lines.append(f"      {first_line(statement.sql)}")
            lines.append(f"          {lock_words(statement, made)}")
    return lines
