"""`flask --app webapp release`: the release phase (the Procfile's `release:` line)."""

import click
from flask import current_app
from flask.cli import with_appcontext

from ...db import is_postgres
from ...extensions import bind_migrations
from ..deploys.record import record_deploy
from . import plan
from .fleet import contract_refused, older_code, revision_order
from .limits import Limits, ReleaseError
from .report import Recorder


@click.command("release")
@with_appcontext
@click.option("--version", "version", default=None, help="As for record-deploy.")
@click.option("--dry-run", is_flag=True,
              help="Print the migrations to run, their statements and the locks each takes; "
                   "change nothing.")
def release_command(version: str | None, dry_run: bool) -> None:
    """Run the release phase: migrate the database, report what it cost, record the deploy.

    Each migration runs in its own transaction and gives way to the running fleet rather
    than make it wait (docs/deploying.md); a contract step is refused while a process runs
    code older than it allows.
    """
    bind_migrations(current_app)
    config = current_app.extensions["migrate"].migrate.get_config()
    limits = Limits.of(current_app.config)
    try:
        start, migrations = plan.pending(config)
        refusal = contract_refusal(migrations, config)
    except ReleaseError as exc:
        raise click.ClickException(str(exc)) from None
    if dry_run:
        for line in plan.describe(start, migrations, limits):
            click.echo(line)
        if not is_postgres():
            click.echo("\nSQLite: each migration runs once, in one transaction that holds the "
                       "database's single write lock (one host, no fleet beside the release).")
        if refusal is not None:
            click.echo(f"\nRefused now: {refusal}")
        return
    if refusal is not None:
        raise click.ClickException(refusal)
    release = migrate(config, limits)
    for line in release.lines():
        click.echo(line)
    deploy = record_deploy(version, release)
    click.echo(f"Migrated and recorded deploy {deploy.version} (from {deploy.source}).")


def contract_refusal(migrations: list[plan.Migration], config) -> str | None:
    """Say why a pending contract step may not run now (None: it may, or there is none)."""
    from alembic.script import ScriptDirectory  # with a release only

    contracts = [(m.contract, m.revision) for m in migrations if m.contract]
    order = revision_order(ScriptDirectory.from_config(config)) if contracts else []
    for contract, revision in contracts:
        older = older_code(contract, order)
        if older:
            return contract_refused(contract, older, revision)
    return None


def migrate(config, limits: Limits):
    """Upgrade to the newest migration, measured; on failure print what ran, then why."""
    from alembic import command  # with a release only

    recorder = Recorder(limits.lock_timeout)
    config.attributes["recorder"] = recorder
    try:
        command.upgrade(config, "heads")
    except ReleaseError as exc:
        for line in recorder.finish().lines():
            click.echo(line)
        raise click.ClickException(str(exc)) from None
    return recorder.finish()
