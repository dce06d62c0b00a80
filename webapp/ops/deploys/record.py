"""Record a deploy: the version from the platform's variables, or git, and the time."""

import json
from datetime import datetime

import sqlalchemy as sa

from ...config import release_version
from ...db import database_now
from ...extensions import db
from ...models import Deploy
from ...version import git_version


def record_deploy(version: str | None = None, release=None) -> Deploy:
    """Record a deploy now, named by version, the platform's variable, git, or "unknown".

    release, when the release command migrated, is its report (webapp.ops.release.report):
    how long it took, the longest the fleet waited behind it, each migration.
    """
    source = "given"
    if not version:
        version, source = release_version() or (git_version(), "git")
    if not version:
        version, source = "unknown", "none"
    deploy = Deploy(version=version[:200], source=source, at=database_now())
    if release is not None:
        deploy.release_seconds = round(release.seconds, 3)
        deploy.release_wait_seconds = round(release.longest_wait, 3)
        deploy.release_report = json.dumps(release.as_dict())
    db.session.add(deploy)
    db.session.commit()
    return deploy


def recent_deploys(since: datetime, until: datetime) -> list[Deploy]:
    """Return the deploys recorded in [since, until], oldest first."""
    return list(db.session.scalars(
        sa.select(Deploy).where(Deploy.at >= since, Deploy.at <= until)
        .order_by(Deploy.at, Deploy.id)))
