"""`flask --app webapp add-webp`: WebP copies for the files stored before uploads made them."""

import click
from flask.cli import with_appcontext

from .store import add_webp


@click.command("add-webp")
@with_appcontext
def add_webp_command() -> None:
    """Make the WebP copies of every file stored without them (one file a transaction;
    safe while the site serves and editors upload). Pages offer them from their next
    render."""
    done = add_webp()
    click.echo(f"{done} file{'' if done == 1 else 's'} given WebP copies.")
