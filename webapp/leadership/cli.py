"""The `flask leaders` command: who leads each key, from pg_locks (or the lock files)."""

import json

import click
from flask.cli import with_appcontext

from .status import Snapshot, leaders_json, snapshot


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
            age = ("" if h.recorded else "none; session idle ") + (
                f"{h.heartbeat_age_s:.1f}s ago" + (" STALE" if h.stale else ""))
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
