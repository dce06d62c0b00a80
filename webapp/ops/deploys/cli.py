"""`flask --app webapp record-deploy` (the release command, which records one too, is in
webapp.ops.release.cli)."""

import click
from flask.cli import with_appcontext

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
