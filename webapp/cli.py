"""Flask commands: `flask --app webapp <command>`."""

import secrets

import click
import sqlalchemy as sa
from flask import Flask

from .extensions import db
from .models import User


def init_app(app: Flask) -> None:
    """Register the commands on app."""
    app.cli.add_command(ensure_admin)
    app.cli.add_command(create_user)


@click.command("ensure-admin")
@click.option("--email", default="admin@example.com", show_default=True)
def ensure_admin(email: str) -> None:
    """Create an admin user if there is none, printing its password once."""
    exists = db.session.scalar(sa.select(User.id).where(User.role == "admin").limit(1))
    if exists is not None:
        click.echo("An admin user exists already.")
        return
    password = secrets.token_urlsafe(12)
    user = User(email=email.lower(), role="admin", active=True)
    user.set_password(password)
    db.session.add(user)
    db.session.commit()
    click.echo(f"Created admin user {email} with password: {password}")
    click.echo("This password is shown once; change it after signing in.")


@click.command("create-user")
@click.argument("email")
@click.option("--role", type=click.Choice(User.ROLES), default="editor", show_default=True)
@click.password_option("--password", prompt_required=False, default=None)
def create_user(email: str, role: str, password: str | None) -> None:
    """Create a user (prompts for the password unless --password is given)."""
    email = email.strip().lower()
    if "@" not in email:
        raise click.BadParameter("not an email address", param_hint="EMAIL")
    if db.session.scalar(sa.select(User.id).where(User.email == email)) is not None:
        raise click.ClickException(f"a user with email {email} exists already")
    if not password:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    user = User(email=email, role=role, active=True)
    user.set_password(password)
    db.session.add(user)
    db.session.commit()
    click.echo(f"Created {role} {email}.")
