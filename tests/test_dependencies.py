"""The dependencies pyproject.toml allows are ones Soloist works with."""

import tomllib
from importlib.metadata import version

from packaging.requirements import Requirement

from tests.harness.cluster import ROOT


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


def test_no_nh3_that_leaves_markup_raw_in_an_attribute_can_be_installed():
    # nh3 before 0.3.7 writes < and > raw in attribute values: an image's title moved into
    # its caption carried markup to readers (webapp.site.markdown escapes it again as well)
    allowed = _requirement("nh3").specifier
    assert not [v for v in ("0.2.21", "0.3.0", "0.3.6") if allowed.contains(v)]
    assert allowed.contains(version("nh3")), f"installed nh3 {version('nh3')}"
    import nh3

    assert nh3.clean('<img title="<b>">', tags={"img"}, attributes={"img": {"title"}}) == \
        '<img title="&lt;b&gt;">'
