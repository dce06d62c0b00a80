"""The release phase's commands: `flask --app webapp release` and `record-deploy`."""

import click
from flask import current_app
from flask.cli import with_appcontext

from ...extensions import bind_migrations
from .record import record_deploy


@click.command("record-deploy")
@with_appcontext
@click.option("--version", "version", default=None,
              help="Name the version (default: SOURCE_VERSION, HEROKU_RELEASE_VERSION, "
                   "RENDER_GIT_COMMIT, FLY_IMAGE_REF, then git).")
def record_deploy_command(version: str | None) -> None:
    """Record that a version is being deployed now (the status page reports on it)."""
    deploy = record_deploy(version)
    click.echo(f"Recorded deploy {deploy.version} (from {deploy.source}).")


@click.command("release")
@with_appcontext
@click.option("--version", "version", default=None, help="As for record-deploy.")
def release_command(version: str | None) -> None:
    """Run the release phase: migrate the database, then record the deploy."""
    import flask_migrate  # with Alembic, only when a release runs (extensions.bind_migrations)

    bind_migrations(current_app)
    flask_migrate.upgrade()
    deploy = record_deploy(version)
    click.echo(f"Migrated and recorded deploy {deploy.version} (from {deploy.source}).")
