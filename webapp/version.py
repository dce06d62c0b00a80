"""Which code this process runs: its version, and the newest migration it ships.

The version is the platform's (SOURCE_VERSION, HEROKU_RELEASE_VERSION, RENDER_GIT_COMMIT,
FLY_IMAGE_REF: the variables the release records), else the git commit of a checkout, else
the package's own (pyproject.toml). The schema, the newest migration in `migrations/`, is
known wherever the code is: it is what a release compares before a contract step.
"""

import subprocess
from functools import cache
from importlib import metadata

from .config import release_version
from .extensions import MIGRATIONS

ROOT = MIGRATIONS.parent


def git_version() -> str | None:
    """Return the checkout's short commit, if this is a git checkout with git installed."""
    try:
        found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                               capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() or None if found.returncode == 0 else None


@cache
def code_version() -> tuple[str, str]:
    """Return this code's version and where it was read: a variable's name, git or package."""
    found = release_version()
    if found:
        return found
    commit = git_version()
    if commit:
        return commit, "git"
    try:
        return metadata.version("soloist"), "package"
    except metadata.PackageNotFoundError:
        return "unknown", "none"


@cache
def schema_head() -> str:
    """Return the revision of the newest migration this code ships ("" if it has none here).

    Revisions are the four digits that start each file's name, so the newest sorts last
    (tests/test_migration_lint.py checks it against Alembic's own head).
    """
    names = sorted(path.name.split("_", 1)[0]
                   for path in (MIGRATIONS / "versions").glob("[0-9]*_*.py"))
    return names[-1] if names else ""
