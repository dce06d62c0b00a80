"""Record a deploy: the version from the platform's variables, or git, and the time."""

import subprocess
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa

from ...config import release_version
from ...db import database_now
from ...extensions import db
from ...models import Deploy

ROOT = Path(__file__).resolve().parent.parent.parent


def git_version() -> str | None:
    """Return the checkout's short commit, if this is a git checkout with git installed."""
    try:
        found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                               capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() or None if found.returncode == 0 else None


def record_deploy(version: str | None = None) -> Deploy:
    """Record a deploy now, named by version, the platform's variable, git, or "unknown"."""
    source = "given"
    if not version:
        version, source = release_version() or (git_version(), "git")
    if not version:
        version, source = "unknown", "none"
    deploy = Deploy(version=version[:200], source=source, at=database_now())
    db.session.add(deploy)
    db.session.commit()
    return deploy


def recent_deploys(since: datetime, until: datetime) -> list[Deploy]:
    """Return the deploys recorded in [since, until], oldest first."""
    return list(db.session.scalars(
        sa.select(Deploy).where(Deploy.at >= since, Deploy.at <= until)
        .order_by(Deploy.at, Deploy.id)))
