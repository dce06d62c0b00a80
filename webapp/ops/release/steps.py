"""The shapes a migration is written in, so that it never makes the running fleet wait.

Each helper emits PostgreSQL's non-blocking form, and the plain one on SQLite (one host,
no fleet beside its release). Each may run again: the release tries a migration again
whole when a statement gave way, after the parts outside its transaction committed, so
what is there already is left as it is (offline, `--sql`, the statements are written as
they would run on an empty database).

- `create_index`, `drop_index`: CONCURRENTLY, outside the transaction (writes go on);
- `add_columns`: one ALTER of one table in a transaction of its own, with no default that
  rewrites the table (PostgreSQL 11 stores a constant default in the catalogue);
- `add_foreign_key`, `add_check`: NOT VALID (a short lock, no scan), then VALIDATE in a
  transaction after it (a scan under a lock no read or write waits for);
- `add_unique`: a unique index built concurrently, then the constraint made from it;
- `backfill`: data copied or fixed in small batches, each its own transaction, resumable,
  for a few seconds in the release and finished by the fleet;
- `check_contract`: a contract step's first line, refusing while older code runs, and
  `drop_columns`, its work.
"""

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from flask import current_app

from ...db import is_sqlite_dialect
from .limits import Limits

BATCH = 1000


def _op():
    from alembic import op  # inside a migration only

    return op


def on_postgresql() -> bool:
    """Return whether the migration runs against PostgreSQL (else SQLite)."""
    return not is_sqlite_dialect(_op().get_context().dialect)


def offline() -> bool:
    """Return whether the migration only writes its SQL (`flask db upgrade --sql`)."""
    return _op().get_context().as_sql


def say(comment: str) -> None:
    """Write a comment line into the offline SQL (the plan and the linter read it)."""
    if offline():
        _op().get_context().impl.static_output(f"-- {comment}")


# what steps writes before a statement it runs only where the catalogue says it is still
# to do (PostgreSQL has no ADD CONSTRAINT IF NOT EXISTS): the linter's rule for statements
# that cannot run twice does not apply to it
GUARDED = "squawk-ignore prefer-robust-stmts"


@contextmanager
def outside_transaction() -> Iterator[None]:
    """Run the block outside the migration's transaction, each statement committing alone.

    What the migration did before the block is committed first; on SQLite the block runs
    in the migration's transaction.
    """
    if not on_postgresql():
        yield
        return
    with _op().get_context().autocommit_block():
        yield


@contextmanager
def patient() -> Iterator[None]:
    """Let the block's statements wait for their locks up to the statement timeout.

    Only for statements whose locks no read or write of the fleet waits for (SHARE UPDATE
    EXCLUSIVE: an index built concurrently, a VALIDATE): they wait for the fleet's long
    transactions to end, and nothing queues behind them.
    """
    limits = Limits.of(current_app.config)
    _op().execute(limits.patient_sql())
    try:
        yield
    except BaseException:
        # in a transaction that failed, its rollback takes the setting back with it
        with contextlib.suppress(sa.exc.SQLAlchemyError):
            _op().execute(limits.short_sql())
        raise
    _op().execute(limits.short_sql())


def _scalar(sql: str, **params: object) -> Any:
    return _op().get_bind().execute(sa.text(sql), params).scalar()


def _index_valid(name: str) -> bool | None:
    """Return whether index name is valid, None if there is none (PostgreSQL, online)."""
    return _scalar("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
                   " WHERE c.relname = :name AND c.relkind = 'i'", name=name)


def _constraint_valid(table: str, name: str) -> bool | None:
    """Return whether table's constraint name is validated, None if there is none."""
    return _scalar("SELECT convalidated FROM pg_constraint WHERE conname = :name "
                   "AND conrelid = to_regclass(:table)", name=name, table=table)


def create_index(name: str, table: str, columns: Sequence[str], *, unique: bool = False,
                 where: sa.TextClause | None = None, using: str | None = None,
                 ops: dict | None = None) -> None:
    """Build an index while the fleet writes on: CONCURRENTLY, outside the transaction.

    A build that failed part of the way (it gave way, say) leaves an invalid index: it is
    dropped, concurrently too, and built again.
    """
    op = _op()
    if not on_postgresql():
        op.create_index(name, table, list(columns), unique=unique, sqlite_where=where)
        return
    with outside_transaction(), patient():
        if not offline() and _index_valid(name) is False:
            op.drop_index(name, table_name=table, postgresql_concurrently=True, if_exists=True)
        op.create_index(name, table, list(columns), unique=unique, if_not_exists=True,
                        postgresql_concurrently=True, postgresql_where=where,
                        postgresql_using=using, postgresql_ops=ops or {})


def drop_index(name: str, table: str) -> None:
    """Drop an index while the fleet reads and writes on: CONCURRENTLY, outside the
    transaction."""
    op = _op()
    if not on_postgresql():
        op.drop_index(name, table_name=table)
        return
    with outside_transaction(), patient():
        op.drop_index(name, table_name=table, postgresql_concurrently=True, if_exists=True)


def _column_sql(column: sa.Column) -> str:
    dialect = _op().get_context().dialect
    return str(sa.schema.CreateColumn(column).compile(dialect=dialect))


def add_columns(table: str, *columns: sa.Column) -> None:
    """Add columns to a table in one statement and one short transaction of their own.

    One ACCESS EXCLUSIVE lock of one table, held for a change of the catalogue only (a
    default that is not volatile is stored there, not written into every row: the linter
    refuses one that is), never while waiting for another table's: the release holds no
    lock the fleet could deadlock with.
    """
    _alter_alone(table, [f"ADD COLUMN IF NOT EXISTS {_column_sql(c)}" for c in columns],
                 lambda batch: [batch.add_column(column) for column in columns])


def _alter_alone(table: str, clauses: list[str], on_sqlite: Callable) -> None:
    """ALTER TABLE table with clauses, one statement committed alone (PostgreSQL), or
    on_sqlite(batch) in Alembic's batch mode."""
    op = _op()
    if not on_postgresql():
        with op.batch_alter_table(table, schema=None) as batch:
            on_sqlite(batch)
        return
    with outside_transaction():
        op.execute(f"ALTER TABLE {table} {', '.join(clauses)}")


def add_foreign_key(name: str, table: str, referent: str, columns: Sequence[str],
                    remote: Sequence[str], ondelete: str | None = None) -> None:
    """Add a foreign key NOT VALID in the migration's transaction (SHARE ROW EXCLUSIVE on
    both tables until it commits, no scan), then VALIDATE it in the next (a scan under a
    lock no read or write waits for)."""
    op = _op()
    if not on_postgresql():
        with op.batch_alter_table(table, schema=None) as batch:
            batch.create_foreign_key(name, referent, list(columns), list(remote),
                                     ondelete=ondelete)
        return
    if offline() or _constraint_valid(table, name) is None:
        say(GUARDED)
        op.create_foreign_key(name, table, referent, list(columns), list(remote),
                              ondelete=ondelete, postgresql_not_valid=True)
    _validate(table, name)


def add_check(name: str, table: str, condition: str) -> None:
    """Add a check constraint NOT VALID (ACCESS EXCLUSIVE until it commits, no scan), then
    VALIDATE it in the next transaction."""
    op = _op()
    if not on_postgresql():
        with op.batch_alter_table(table, schema=None) as batch:
            batch.create_check_constraint(name, sa.text(condition))
        return
    if offline() or _constraint_valid(table, name) is None:
        say(GUARDED)
        op.create_check_constraint(name, table, sa.text(condition), postgresql_not_valid=True)
    _validate(table, name)


def commit_and_begin() -> None:
    """Commit what the migration did so far and go on in a new transaction (PostgreSQL)."""
    with outside_transaction():
        pass


def _validate(table: str, name: str) -> None:
    """VALIDATE a constraint added NOT VALID in the migration's transaction, in a new one
    (the addition committed first, its locks let go)."""
    commit_and_begin()
    if offline() or _constraint_valid(table, name) is False:
        with patient():
            say(GUARDED)
            _op().execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")


def add_unique(name: str, table: str, columns: Sequence[str]) -> None:
    """Add a unique constraint from a unique index built concurrently: the constraint, in
    the migration's transaction, takes ACCESS EXCLUSIVE to adopt the index, not to build it."""
    op = _op()
    if not on_postgresql():
        with op.batch_alter_table(table, schema=None) as batch:
            batch.create_unique_constraint(name, list(columns))
        return
    create_index(name, table, columns, unique=True)
    if offline() or _constraint_valid(table, name) is None:
        say(GUARDED)
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE USING INDEX {name}")


def backfill(name: str, sql: str, *, table: str, key: str = "id",
             batch: int = BATCH) -> None:
    """Run sql over table's rows in key order, batch rows at a time, each batch committed
    alone, outside the migration's transaction; on PostgreSQL for RELEASE_BACKFILL_SECONDS at
    most, the rest left to the fleet (webapp.ops.release.backfills), which finishes it.

    name says what the backfill does (the release's report and the timer's runs show it).
    sql takes :after and :upto (the batch is after < key <= upto) and must leave alone the
    rows it did already (NOT EXISTS …), so that a batch stopped part of the way can run
    again; and the code must not need it done (docs/deploying.md).
    """
    from . import backfills  # the models, with a migration only

    op = _op()
    with outside_transaction():
        say(f"backfill: {table} in batches of {batch} by {key} ({name}; the release runs it "
            "for RELEASE_BACKFILL_SECONDS at most, the fleet finishes it)")
        if offline():
            op.execute(sa.text(sql).bindparams(after=0, upto=batch))
            return
        bind = op.get_bind()
        begun = backfills.begin(bind, name, sql, table, key, batch)
        if begun is None:
            return
        seconds = Limits.of(current_app.config).backfill_seconds if on_postgresql() else None
        if not backfills.run_for(bind, begun, seconds):
            config = op.get_context().config
            recorder = config.attributes.get("recorder") if config is not None else None
            if recorder is not None:
                recorder.left_to_fleet(begun.said())


def check_contract(required: str) -> None:
    """Refuse to go on while any lock session runs code older than migration required.

    A contract step (a migration that drops what older code reads) declares `contract =
    "<revision>"`, the first migration whose code no longer reads it, and calls this first.
    """
    say(f"contract: runs only while every process runs code of {required} or later")
    if offline():
        return
    from .fleet import refuse_older_code, revision_order

    refuse_older_code(required, revision_order(_op().get_context().environment_context.script))


def drop_columns(table: str, *names: str) -> None:
    """Drop columns in one statement and one short transaction of their own: a contract
    step's work (declare `contract` and call check_contract first)."""
    _alter_alone(table, [f"DROP COLUMN IF EXISTS {name}" for name in names],
                 lambda batch: [batch.drop_column(name) for name in names])
