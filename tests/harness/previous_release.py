"""The previous release, built from git beside this tree: its code served on HEAD's schema
(tests/test_previous_release.py) and as the old fleet of a deploy (bench/deploy.py).

Expand, deploy, contract: HEAD's release migrates while the previous release's instances
still serve, so every migration HEAD adds must leave that code working. The test names the
release it holds HEAD to in PREVIOUS_RELEASE.
"""

import compileall
import importlib.metadata
import io
import re
import shutil
import subprocess
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from tests.harness.cluster import BIN, ROOT, Instance, flask_cmd, procfile

# The last release that landed: the code a platform still runs while HEAD's release phase
# migrates. Move it forward when a release lands, in the commit that starts the next one:
# set it to the commit that release was built from (`git log -1 --format=%h` on the
# deployed branch, or the platform's SOURCE_VERSION / HEROKU_SLUG_COMMIT), and keep this
# test passing. A contract migration (dropping what this release still reads) can only land
# once PREVIOUS_RELEASE has moved past the last commit that read it.
PREVIOUS_RELEASE = "81e5d96"

COMMIT = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class Release:
    """A release's tree (root) and the bin directory of the venv that runs it."""

    commit: str
    root: Path
    bin_dir: Path
    own_venv: bool  # False: this venv, which meets every requirement of the release

    def env(self, env: dict) -> dict:
        """Return env for one of the release's processes: its tree first on the path."""
        return {**env, "PYTHONPATH": str(self.root),
                "PATH": f"{self.bin_dir}:{env.get('PATH', '')}"}

    def instance(self, name: str, database_url: str, workers: int = 2,
                 log_dir: Path | None = None, **env: str) -> Instance:
        """Return (not started) a gunicorn instance of the release, as its Procfile runs it."""
        return Instance(name, database_url, workers=workers, log_dir=log_dir, root=self.root,
                        bin_dir=self.bin_dir, PYTHONPATH=str(self.root), **env)

    def flask(self, env: dict, *args: str) -> subprocess.CompletedProcess:
        """Run the release's `flask --app webapp ARGS`."""
        return flask_cmd(self.env(env), *args, root=self.root, bin_dir=self.bin_dir)

    def procfile(self, kind: str, env: dict, timeout: float = 600
                 ) -> subprocess.CompletedProcess:
        """Run the release's Procfile command kind (release) to its end, as the platform
        would, and return what it did (its output captured)."""
        return run_procfile(self.root, kind, self.env(env), timeout)


def run_procfile(root: Path, kind: str, env: dict, timeout: float = 600
                 ) -> subprocess.CompletedProcess:
    """Run the Procfile command kind of the tree at root with env; never raise on its exit."""
    return subprocess.run(["bash", "-c", procfile(root)[kind]], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def build(commit: str, dest: Path) -> Release:
    """Extract commit's tree into dest (git archive) and give it a venv; return it.

    The venv is this one when it meets every requirement the release declares (its
    pyproject.toml): extracting then takes 0.1 s, where a venv of its own (uv, bytecode
    compiled, from uv's cache) took 7.5 s and 4.8 s of CPU on a loaded 2-core machine, most
    of this test's time. The release never had a lock file, so a venv built for it would
    hold what this one holds wherever their ranges agree. Only when they part does it get
    its own venv, built with uv.
    """
    if not COMMIT.fullmatch(commit):
        raise ValueError(f"{commit!r} is not a commit id (7 to 40 hex digits)")
    _extract(commit, dest)
    unmet = unmet_requirements(dest / "pyproject.toml")
    bin_dir = _own_venv(dest) if unmet else BIN
    # its processes only read bytecode where PYTHONDONTWRITEBYTECODE is set: compiled once
    # here (0.4 s), not by each of them
    compileall.compile_dir(dest / "webapp", quiet=1)
    return Release(commit, dest, bin_dir, own_venv=bool(unmet))


def _extract(commit: str, dest: Path) -> None:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                             capture_output=True, timeout=60)  # a few MB
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {commit} failed (is the commit in this clone? a "
                           f"shallow clone lacks it: git fetch --unshallow): "
                           f"{archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")


def unmet_requirements(pyproject: Path) -> list[str]:
    """Return the requirements in pyproject's [project] dependencies (and the extras they
    name) that this venv does not meet."""
    lines = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [line for line in lines if not _met(Requirement(line))]


def _met(requirement: Requirement, extra: str = "") -> bool:
    if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
        return True  # not for this platform, or another extra's
    try:
        version = importlib.metadata.version(requirement.name)
    except importlib.metadata.PackageNotFoundError:
        return False
    if not requirement.specifier.contains(version, prereleases=True):
        return False
    needs = [Requirement(line) for line in importlib.metadata.requires(requirement.name) or []]
    return all(_met(need, name) for name in requirement.extras for need in needs
               if need.marker and "extra" in str(need.marker))


def _own_venv(root: Path) -> Path:
    """Build root/.venv with uv (its cache makes it seconds), the release installed in it."""
    uv = BIN / "uv" if (BIN / "uv").exists() else shutil.which("uv")
    if uv is None:
        raise RuntimeError("the previous release needs a venv of its own and uv is missing "
                           "(make install puts it in .venv)")
    venv = root / ".venv"
    python = BIN / "python"
    for args in (["venv", "-q", "--python", str(python), str(venv)],
                 ["pip", "install", "-q", "--compile-bytecode", "--python",
                  str(venv / "bin" / "python"), "-e", str(root)]):
        done = subprocess.run([str(uv), *args], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"uv {' '.join(args[:2])} failed: {done.stderr}")
    return venv / "bin"
