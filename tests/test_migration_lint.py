"""The migrations' linter: the SQL every migration emits, read as Alembic's offline
mode writes it (`flask db upgrade --sql`), refused where it would take a long lock on a big
table. squawk (PyPI squawk-cli) reads each migration's statements; one rule of our own
refuses data changes that read or write an existing table inside the DDL transaction, or
outside it without steps.backfill's batches.

A reviewed exception is a comment in the migration, naming the rule and why it is safe:
`# squawk-ignore <rule>[, <rule>]: <why, in words>` (docs/deploying.md). One with no
reason, or one its migration no longer needs, fails too.
"""

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask_migrate import Migrate

from tests.cluster import ADMIN_URL, ROOT
from tests.support import make_app
from webapp.extensions import db
from webapp.ops.release.plan import BOOKKEEPING, Migration, locks_of, new_table, offline_sql, split

SQUAWK = Path(sys.executable).parent / "squawk"
PG_VERSION = "14"  # the oldest PostgreSQL Soloist runs on (split_part(…, -2) in its SQL)
# rules about the schema's style, not about locks: each a choice made for the whole schema
STYLE = {
    "prefer-bigint-over-int": "int ids: a site's posts and users stay far below 2**31",
    "prefer-identity": "SERIAL is what SQLAlchemy emits for the integer primary keys",
    "prefer-text-field": "varchar limits are the models' validation, kept in the schema",
}
BACKFILL = "backfill-in-batches"  # our own rule
# a contract step declares `contract = "<revision>"` and calls steps.check_contract first:
# its drops are what it is for
CONTRACT = re.compile(r"^contract\s*=", re.M)
CONTRACT_RULES = ("ban-drop-column", "ban-drop-table")
EXCEPTION = re.compile(r"#\s*squawk-ignore\s+([\w-]+(?:\s*,\s*[\w-]+)*)\s*:?\s*(.*)")
MIGRATIONS = ROOT / "migrations"


@dataclass(frozen=True)
class Finding:
    revision: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.revision}: {self.rule}: {self.message}"


def reviewed_exceptions(source: str) -> dict[str, str]:
    """Return the rules a migration's source excuses, each with the reason it gives."""
    found, lines = {}, source.splitlines()
    for index, line in enumerate(lines):
        match = EXCEPTION.search(line)
        if not match:
            continue
        reason = [match.group(2).strip()]
        for following in lines[index + 1:]:
            text = following.strip()
            if not text.startswith("#") or EXCEPTION.search(text):
                break
            reason.append(text.lstrip("#").strip())
        for rule in re.split(r"\s*,\s*", match.group(1)):
            found[rule] = " ".join(part for part in reason if part)
    return found


def migration_text(migration: Migration, preamble: list[str], excused: dict[str, str]) -> str:
    """Return one migration's SQL as it runs: the session's limits, its statements, each
    inside its transaction or outside one; the reviewed exceptions as squawk's ignores."""
    out = [f"-- squawk-ignore-file {rule}" for rule in excused] + [f"{s};" for s in preamble]
    transaction = 0
    for statement in migration.statements:
        if statement.transaction != transaction:
            out += ["COMMIT;"] if transaction else []
            out += ["BEGIN;"] if statement.transaction else []
            transaction = statement.transaction
        out += [f"-- {statement.note}"] if statement.note else []
        out.append(f"{statement.sql};")
    return "\n".join(out + (["COMMIT;"] if transaction else [])) + "\n"


def backfill_findings(migration: Migration) -> list[Finding]:
    """Our rule: a data change touching an existing table runs outside the DDL transaction,
    in steps.backfill's batches (a copy of every post once held posts' lock to its end)."""
    made, found = migration.new_tables(), []
    for statement in migration.statements:
        verb = statement.sql.split(None, 1)[0].upper()
        if verb not in ("INSERT", "UPDATE", "DELETE") or BOOKKEEPING in statement.sql:
            continue
        existing = sorted(set(locks_of(statement.sql)) - made)
        batched = statement.note.startswith("backfill:") and not statement.in_transaction
        if existing and not batched:
            where = "in the DDL transaction" if statement.in_transaction else "in one statement"
            found.append(Finding(migration.revision, BACKFILL,
                                 f"{verb} touching {', '.join(existing)} {where}: write it "
                                 "with steps.backfill (small batches, each committed alone, "
                                 "outside the transaction)"))
    return found


def lint(directory: Path, sql: str, tmp_path: Path) -> list[Finding]:
    """Lint every migration of offline sql (its scripts in directory/versions)."""
    if not SQUAWK.exists():
        pytest.fail(f"squawk is not installed ({SQUAWK}): make install (the dev extras)")
    opening = sql.split("-- Running upgrade", 1)[0]  # the session's limits, set once
    preamble = [line.rstrip(";") for line in opening.splitlines() if line.startswith("SET ")]
    sources = {path.name.split("_", 1)[0]: path.read_text()
               for path in (directory / "versions").glob("*.py")}
    findings, excused_by = [], {}
    out = tmp_path / "sql"
    out.mkdir()
    for migration in split(sql):
        source = sources.get(migration.revision, "")
        excused = reviewed_exceptions(source)
        excused_by[migration.revision] = dict(excused)
        if CONTRACT.search(source):
            excused |= {rule: "a contract step" for rule in CONTRACT_RULES}
            if "steps.check_contract(contract)" not in source:
                findings.append(Finding(migration.revision, "contract-unchecked",
                                        "a contract step calls steps.check_contract(contract) "
                                        "before it drops anything"))
        (out / f"{migration.revision}.sql").write_text(
            migration_text(migration, preamble, excused))
        findings += [f for f in backfill_findings(migration) if f.rule not in excused]
    found = subprocess.run([str(SQUAWK), "--reporter", "json", "--pg-version", PG_VERSION,
                            "--exclude", ",".join(STYLE), *sorted(map(str, out.glob("*.sql")))],
                           capture_output=True, text=True, timeout=60, check=False)
    reported = json.loads(found.stdout or "[]")
    findings += [Finding(Path(r["file"]).stem, r["rule_name"], r["message"]) for r in reported]
    return findings + exception_findings(excused_by)


def exception_findings(excused_by: dict[str, dict[str, str]]) -> list[Finding]:
    """A reviewed exception must say why, in words."""
    found = []
    for revision, excused in excused_by.items():
        for rule, reason in excused.items():
            if len(reason.split()) < 5:
                found.append(Finding(revision, "exception-without-reason",
                                     f"squawk-ignore {rule} needs a reason: what makes it safe"))
    return found


def generate(directory: Path, start: str | None = None, destination: str = "heads") -> str:
    """Return the offline SQL of the migrations in directory (no database is reached)."""
    app = make_app(ADMIN_URL)
    Migrate(app, db, directory=str(directory), render_as_batch=True)
    with app.app_context():
        config = app.extensions["migrate"].migrate.get_config()
        return offline_sql(config, start, destination)


@pytest.fixture(scope="module")
def all_sql() -> str:
    return generate(MIGRATIONS)


def test_every_migration_passes_the_linter_or_names_its_reviewed_exception(all_sql, tmp_path):
    assert [str(f) for f in lint(MIGRATIONS, all_sql, tmp_path)] == []


def test_every_reviewed_exception_is_still_needed(all_sql, tmp_path):
    sources = {path.name.split("_", 1)[0]: path.read_text()
               for path in (MIGRATIONS / "versions").glob("*.py")}
    excused = {rev: reviewed_exceptions(text) for rev, text in sources.items()}
    assert {rev: sorted(rules) for rev, rules in excused.items() if rules} == {
        "0009": ["ban-drop-column"], "0025": ["changing-column-type"]}
    # without its exception, each is refused: none is stale
    bare = tmp_path / "bare"
    shutil.copytree(MIGRATIONS, bare)
    for path in (bare / "versions").glob("*.py"):
        path.write_text(path.read_text().replace("squawk-ignore", "reviewed"))
    rules = {(f.revision, f.rule) for f in lint(bare, all_sql, tmp_path)}
    assert rules == {(rev, rule) for rev, found in excused.items() for rule in found}


HEAD = max(path.name.split("_", 1)[0] for path in (MIGRATIONS / "versions").glob("[0-9]*.py"))
BAD = f'''"""a fixture: a new migration as it must not be written"""
import sqlalchemy as sa
from alembic import op

revision = '9001'
down_revision = '{HEAD}'
{{exception}}
def upgrade():
    op.create_index('ix_posts_slug_title', 'posts', ['slug', 'title'])
    op.add_column('posts', sa.Column('author_id', sa.Integer(), nullable=True))
    op.create_foreign_key('fk_posts_author', 'posts', 'users', ['author_id'], ['id'])
    op.execute("UPDATE posts SET author_id = 1")
'''
GOOD = f'''"""a fixture: the same migration in the shapes that never stop the fleet"""
import sqlalchemy as sa
from alembic import op

from webapp.ops.release import steps

revision = '9001'
down_revision = '{HEAD}'


def upgrade():
    steps.create_index('ix_posts_slug_title', 'posts', ['slug', 'title'])
    steps.add_columns('posts', sa.Column('author_id', sa.Integer(), nullable=True))
    steps.add_foreign_key('fk_posts_author', 'posts', 'users', ['author_id'], ['id'])
    steps.backfill("UPDATE posts SET author_id = 1 WHERE id > :after AND id <= :upto "
                   "AND author_id IS NULL", table='posts')
'''


def lint_fixture(text: str, tmp_path: Path) -> set[tuple[str, str]]:
    """Return the (revision, rule) the linter finds in a new migration of this text."""
    directory = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, directory)
    (directory / "versions" / "9001_fixture.py").write_text(text)
    sql = generate(directory, HEAD, "9001")
    return {(f.revision, f.rule) for f in lint(directory, sql, tmp_path)}


def test_a_plain_index_a_validated_foreign_key_and_a_backfill_in_the_transaction_are_refused(
        tmp_path):
    assert lint_fixture(BAD.format(exception=""), tmp_path) == {
        ("9001", "require-concurrent-index-creation"),
        ("9001", "adding-foreign-key-constraint"),
        ("9001", "constraint-missing-not-valid"),
        ("9001", BACKFILL)}


def test_the_same_migration_in_the_steps_shapes_passes(tmp_path):
    assert lint_fixture(GOOD, tmp_path) == set()


def test_a_reviewed_exception_lets_its_rule_through_and_one_without_a_reason_does_not(
        tmp_path):
    reviewed = ("# squawk-ignore require-concurrent-index-creation: posts holds a few rows\n"
                "# on every install this fixture stands for, so the build takes a moment\n")
    found = lint_fixture(BAD.format(exception=reviewed), tmp_path / "a")
    assert ("9001", "require-concurrent-index-creation") not in found
    assert ("9001", "adding-foreign-key-constraint") in found
    bare = "# squawk-ignore require-concurrent-index-creation\n"
    found = lint_fixture(BAD.format(exception=bare), tmp_path / "b")
    assert ("9001", "exception-without-reason") in found


def test_the_code_knows_its_newest_migration():
    from alembic.script import ScriptDirectory

    from webapp.version import schema_head

    assert schema_head() == ScriptDirectory(str(MIGRATIONS)).get_current_head() == HEAD


def test_a_new_table_may_be_filled_in_its_own_transaction():
    migration = Migration("x", "y")
    migration.statements = split(
        "-- Running upgrade y -> x\nBEGIN;\nCREATE TABLE t (id int);\n"
        "INSERT INTO t (id) VALUES (1);\nCOMMIT;\n")[0].statements
    assert new_table(migration.statements[0].sql) == "t"
    assert backfill_findings(migration) == []


CONTRACT_STEP = f'''"""a fixture: posts.slug's old twin goes (a contract step)"""
from webapp.ops.release import steps

revision = '9001'
down_revision = '{HEAD}'
{{contract}}

def upgrade():
    {{check}}
    steps.drop_columns('posts', 'legacy_slug')
'''


def test_a_drop_passes_in_a_contract_step_that_checks_the_fleet_and_nowhere_else(tmp_path):
    check = "steps.check_contract(contract)"
    assert lint_fixture(CONTRACT_STEP.format(contract="contract = '0026'", check=check),
                        tmp_path / "a") == set()
    assert lint_fixture(CONTRACT_STEP.format(contract="", check="pass"), tmp_path / "b") == {
        ("9001", "ban-drop-column")}
    assert lint_fixture(CONTRACT_STEP.format(contract="contract = '0026'", check="pass"),
                        tmp_path / "c") == {("9001", "contract-unchecked")}
