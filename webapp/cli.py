"""Flask commands: `flask --app webapp <command>`."""

import secrets
import sys

import click
import sqlalchemy as sa
from flask import Flask, current_app, g
from flask.cli import with_appcontext

from .accounts.emails import EmailError, clean_email, normalise
from .accounts.tokens import create_token, revoke_tokens
from .accounts.users import user_target
from .extensions import bind_migrations, db
from .leadership.cli import leaders_command
from .media.cli import add_webp_command
from .models import User
from .ops import audit
from .ops.budget_cli import budget_command
from .ops.deploys.cli import record_deploy_command
from .ops.release.cli import release_command
from .timezones import is_zone


def init_app(app: Flask) -> None:
    """Register the commands on app."""
    app.cli.add_command(ensure_admin)
    app.cli.add_command(create_user)
    app.cli.add_command(create_token_command)
    app.cli.add_command(revoke_tokens_command)
    app.cli.add_command(leaders_command)
    app.cli.add_command(release_command)
    app.cli.add_command(record_deploy_command)
    app.cli.add_command(budget_command)
    app.cli.add_command(add_webp_command)
    app.cli.add_command(migrations)


class MigrationCommands(click.Group):
    """Flask-Migrate's commands, imported (with Alembic) when one is looked up."""

    def _commands(self) -> click.Group:
        from flask_migrate.cli import db as commands

        return commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self._commands().list_commands(ctx)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self._commands().get_command(ctx, name)


@click.group("db", cls=MigrationCommands)
@click.option("-d", "--directory", default=None,
              help='Migration script directory (default is "migrations")')
@click.option("-x", "--x-arg", multiple=True,
              help="Additional arguments consumed by custom env.py scripts")
@with_appcontext
def migrations(directory: str | None, x_arg: tuple[str, ...]) -> None:
    """Perform database migrations (Flask-Migrate)."""
    bind_migrations(current_app)  # before any subcommand runs, in the app's context
    g.directory, g.x_arg = directory, x_arg  # as Flask-Migrate's own group does


@click.command("ensure-admin")
@click.option("--email", default="admin@example.com", show_default=True)
@click.option("--print-password", is_flag=True,
              help="Print the one-time password even when the output is no terminal.")
@click.option("--url", default=None, metavar="URL",
              help="The address of a server that answers now (make run waits for it): "
                   "'Soloist is running: open URL/login'. Default: 'Sign in at SITE_URL'.")
def ensure_admin(email: str, print_password: bool, url: str | None) -> None:
    """Create an admin user if there is none, printing its one-time password in a terminal.

    The password is shown once and only opens the page that sets a new one. Where the
    output is no terminal (a deploy log such as Heroku's postdeploy, a CI log, a pipe),
    whoever reads the log later could sign in first: no admin is made there, and the
    output says how to make one from a terminal (or --print-password says print anyway).
    Either way the output ends with a box: where to sign in, and the password if made.
    """
    site = current_app.config.get("SITE_URL")
    where = (f"Soloist is running: open {url.rstrip('/')}/login" if url else
             f"Sign in at {site.rstrip('/')}/login" if site else "")
    exists = db.session.scalar(sa.select(User.id).where(User.role == "admin").limit(1))
    if exists is not None:
        click.echo("An admin user exists already.")
        return _box(where, [])
    try:
        email = clean_email(email)
    except EmailError as exc:
        raise click.BadParameter(str(exc), param_hint="--email") from None
    if not (print_password or sys.stdout.isatty()):
        click.echo(NO_TERMINAL)
        return _box(where, [])
    password = secrets.token_urlsafe(12)
    user = User(email=email, role="admin", active=True, timezone="",  # browser's at sign-in
                must_change_password=True)
    user.set_password(password)
    _add_user(user)
    _box(where, [f"Sign in as:         {email}", f"One-time password:  {password}",
               "It works once: signing in asks you to choose your own."])


def _box(where: str, lines: list[str]) -> None:
    """Print where to sign in and lines, last and framed."""
    lines = [where, *lines] if where else lines
    if not lines:
        return
    width = max(len(line) for line in lines)
    click.echo("\n┌─" + "─" * width + "─┐")
    for line in lines:
        click.echo(f"│ {line.ljust(width)} │")
    click.echo("└─" + "─" * width + "─┘")


NO_TERMINAL = (
    "No admin user yet, and none made here: this output is no terminal, and a one-time "
    "password printed into a log is readable by whoever reads the log. Make the admin from "
    "a terminal, where the password is shown to you alone: `flask --app webapp ensure-admin` "
    "(on Heroku: `heroku run flask --app webapp ensure-admin`).")


@click.command("create-user")
@click.argument("email")
@click.option("--role", type=click.Choice(User.ROLES), default="editor", show_default=True)
@click.password_option("--password", prompt_required=False, default=None)
@click.option("--timezone", "zone", default="",
              help="IANA zone, e.g. Europe/Paris (default: the browser's at first sign-in)")
def create_user(email: str, role: str, password: str | None, zone: str) -> None:
    """Create a user (prompts for the password unless --password is given)."""
    try:
        email = clean_email(email)
    except EmailError as exc:
        raise click.BadParameter(str(exc), param_hint="EMAIL") from None
    if db.session.scalar(sa.select(User.id).where(User.email == email)) is not None:
        raise click.ClickException(f"a user with email {email} exists already")
    if zone and not is_zone(zone):
        raise click.BadParameter(f"unknown time zone {zone!r}", param_hint="--timezone")
    if not password:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    user = User(email=email, role=role, active=True, timezone=zone)
    user.set_password(password)
    _add_user(user)
    click.echo(f"Created {role} {email}.")


def _add_user(user: User) -> None:
    """Store a new user, recorded in the audit log as made from the command line."""
    audit.from_shell()
    db.session.add(user)
    db.session.flush()
    audit.record("user.create", user_target(user), {"email": user.email, "role": user.role})
    db.session.commit()


def _user(email: str) -> User:
    user = db.session.scalar(sa.select(User).where(User.email == normalise(email)))
    if user is None:
        raise click.ClickException(f"no user has the email {email}")
    return user


@click.command("create-token")
@with_appcontext
@click.argument("email")
@click.option("--label", default="", help="What the token is for, e.g. 'deploy script'.")
@click.option("--days", type=click.IntRange(1, 3650), default=None,
              help="Expire the token after this many days (default: never).")
@click.option("--dangerous-actions", is_flag=True, default=False,
              help="Let the token do the dangerous actions (adding webhook endpoints), which "
                   "an everyday token may not.")
def create_token_command(email: str, label: str, days: int | None,
                         dangerous_actions: bool) -> None:
    """Create an API token for a user; print it once, on the last line."""
    user = _user(email)
    if not user.active:
        raise click.ClickException(f"{user.email} is deactivated; activate the user first")
    audit.from_shell()
    token = create_token(user, label, days, dangerous_actions)
    click.echo(f"Created an API token for {user.email} (acts with the role {user.role}"
               f"{', dangerous actions included' if dangerous_actions else ''}).")
    click.echo("It is shown once and stored only as a hash: copy it now. Send it as")
    click.echo("'Authorization: Bearer <token>'.")
    click.echo(token)


@click.command("revoke-tokens")
@with_appcontext
@click.argument("email")
def revoke_tokens_command(email: str) -> None:
    """Revoke every API token of a user."""
    user = _user(email)
    audit.from_shell()
    revoked = revoke_tokens(user, "revoked from the command line")
    if revoked:
        audit.record("token.revoke", user_target(user), {"revoked": revoked})
    db.session.commit()
    click.echo(f"Revoked {revoked} API token(s) of {user.email}.")
