"""The dependencies pyproject.toml allows are ones Soloist works with."""

import tomllib
from importlib.metadata import version

from packaging.requirements import Requirement

from tests.cluster import ROOT


def _requirement(name: str) -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == name]
    assert len(found) == 1, f"{name} is required {len(found)} times"
    return found[0]


def test_no_psycopg_that_drops_a_notify_can_be_installed():
    # psycopg 3.2.0 to 3.2.3 lose a NOTIFY that arrives while another statement runs: a
    # standby would miss the handover and an editor's wake-up (fixed in 3.2.4)
    allowed = _requirement("psycopg").specifier
    assert not [v for v in ("3.2.0", "3.2.1", "3.2.2", "3.2.3") if allowed.contains(v)]
    assert allowed.contains(version("psycopg")), f"installed psycopg {version('psycopg')}"
