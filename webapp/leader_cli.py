"""The leader view's flask commands: `leaders`, `create-token`, `revoke-tokens`."""

import json

import click
import sqlalchemy as sa
from flask.cli import with_appcontext

from .apitokens import create_token, revoke_tokens
from .extensions import db
from .models import User
from .status import Snapshot, leaders_json, snapshot


def _user(email: str) -> User:
    user = db.session.scalar(sa.select(User).where(User.email == email.strip().lower()))
    if user is None:
        raise click.ClickException(f"no user has the email {email}")
    return user


@click.command("create-token")
@with_appcontext
@click.argument("email")
@click.option("--label", default="", help="What the token is for, e.g. 'deploy script'.")
def create_token_command(email: str, label: str) -> None:
    """Create an API token for a user; print it once, on the last line."""
    user = _user(email)
    if not user.active:
        raise click.ClickException(f"{user.email} is deactivated; activate the user first")
    token = create_token(user, label)
    click.echo(f"Created an API token for {user.email} (acts with the role {user.role}).")
    click.echo("It is shown once and stored only as a hash: copy it now. Send it as")
    click.echo("'Authorization: Bearer <token>'.")
    click.echo(token)


@click.command("revoke-tokens")
@with_appcontext
@click.argument("email")
def revoke_tokens_command(email: str) -> None:
    """Revoke every API token of a user."""
    user = _user(email)
    click.echo(f"Revoked {revoke_tokens(user)} API token(s) of {user.email}.")


@click.command("leaders")
@with_appcontext
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as GET /api/leaders does).")
def leaders_command(as_json: bool) -> None:
    """Show which process leads each scheduler key, from pg_locks (or the lock files)."""
    snap = snapshot(history_size=0)
    if as_json:
        click.echo(json.dumps(leaders_json(snap), indent=2))
        return
    click.echo(table(snap))


def table(snap: Snapshot) -> str:
    """Return the per-key leadership table, plain text."""
    headers = ["KEY", "HEX", "DECIMAL", "HOLDER", "TERM", "HELD SINCE (UTC)", "HEARTBEAT",
               "STANDBYS"]
    rows = [headers]
    for k in snap.keys:
        h = k.holder
        age = "-"
        if h and h.heartbeat_age_s is not None:
            age = f"{h.heartbeat_age_s:.1f}s ago" + (" STALE" if h.stale else "")
        rows.append([
            k.key.name, k.key.hex, str(k.key.value),
            h.session.application_name if h else "(nobody)",
            str(h.term) if h and h.term else "-",
            h.since.strftime("%Y-%m-%d %H:%M:%S") if h and h.since else "-",
            age, str(len(k.standbys)) if not snap.single_host else "-",
        ])
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    mode = ("single-host (SQLite file locks)" if snap.single_host
            else f"{len(snap.sessions)} lock session(s) connected")
    lines.append(f"as of {snap.as_of:%Y-%m-%d %H:%M:%S} UTC; {mode}")
    return "\n".join(lines)


COMMANDS = [create_token_command, revoke_tokens_command, leaders_command]
