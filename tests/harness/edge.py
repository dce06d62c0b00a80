"""A real Varnish in front of Soloist, for the tests and bench/edge.py: Debian's varnishd
with the handbook's VCL (docs/soloist.vcl), its origin one instance or a fleet's
instances in turn (vmod directors' round robin), purges switched off and on again as a
CDN API goes down and comes back, and what readers got (a hit or the origin's answer).
"""

import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness.cluster import free_port, wait_for

VARNISHD = shutil.which("varnishd") or "/usr/sbin/varnishd"
VARNISHADM = shutil.which("varnishadm") or "/usr/bin/varnishadm"
VARNISHSTAT = shutil.which("varnishstat") or "/usr/bin/varnishstat"
VCL = Path(__file__).resolve().parents[2] / "docs" / "soloist.vcl"
BACKEND = 'backend soloist {\n    .host = "127.0.0.1";\n    .port = "8000";\n}\n'
# a CDN API that is down: every purge answered 503, the copies still served
PURGES_DOWN = ('sub vcl_recv {\n    if (req.method == "PURGE") {\n'
               '        return (synth(503, "Purges are down."));\n    }\n}\n\n')


def varnish_or_skip() -> None:
    """Skip without varnishd and xkey (make system-deps installs them); fail instead on CI."""
    if Path(VARNISHD).exists() and list(Path("/usr/lib").glob("*/varnish/vmods/libvmod_xkey.so")):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("CI needs Varnish with varnish-modules (make system-deps)")
    pytest.skip("varnishd with varnish-modules' xkey is not installed (make system-deps)")


def vcl(origins: list[int], purges: bool = True) -> str:
    """Return the handbook's VCL with its backend the origins' ports, taken in turn."""
    text = VCL.read_text()
    assert BACKEND in text, "docs/soloist.vcl's backend changed: update tests/harness/edge.py"
    backends = "".join(BACKEND.replace("soloist", f"soloist{n}").replace("8000", str(port))
                       + "\n" for n, port in enumerate(origins))
    adds = "".join(f"    fleet.add_backend(soloist{n});\n" for n in range(len(origins)))
    fleet = ("import directors;\n\n" + backends + "sub vcl_init {\n    new fleet = "
             f"directors.round_robin();\n{adds}}}\n\n"
             + (PURGES_DOWN if not purges else ""))
    return (text.replace(BACKEND, fleet) + "\nsub vcl_recv {\n"
            "    set req.backend_hint = fleet.backend();\n}\n")


@dataclass
class Read:
    """One reader's GET through Varnish: its status, body and whether Varnish had a copy."""

    status: int
    body: str
    hit: bool


class Varnish:
    """A throwaway varnishd on a free port (its home readable by all: varnishd run as root
    reads the VCL as its own user), in front of origins (ports)."""

    def __init__(self, origins: list[int], grace: int = 60) -> None:
        varnish_or_skip()
        self.origins, self.port = origins, free_port()
        self.home = Path(tempfile.mkdtemp(prefix="soloist-varnish-"))
        self.home.chmod(0o755)
        (self.home / "soloist.vcl").write_text(vcl(origins))
        self.switches = 0
        with (self.home / "log").open("w") as log:  # varnishd keeps it open; we read the file
            self.process = subprocess.Popen(
                [VARNISHD, "-F", "-a", f"127.0.0.1:{self.port}", "-f",
                 str(self.home / "soloist.vcl"), "-n", str(self.home / "n"), "-s", "malloc,64m",
                 "-p", f"default_grace={grace}"], stdout=subprocess.DEVNULL, stderr=log)
        wait_for(lambda: self._listening() or self.process.poll() is not None, 30,
                 "varnishd to listen")
        assert self.process.poll() is None, (self.home / "log").read_text()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def purger(self) -> str:
        """Return the CACHE_PURGE entry that purges this Varnish."""
        return f"varnish+http://127.0.0.1:{self.port}"

    def _listening(self) -> bool:
        try:
            urllib.request.urlopen(self.url + "/healthz", timeout=2).close()
        except urllib.error.HTTPError:
            return True  # Varnish answers (a 503 while no origin listens)
        except OSError:
            return False
        return True

    def _admin(self, *args: str) -> str:
        return subprocess.run([VARNISHADM, "-n", str(self.home / "n"), *args], check=True,
                              capture_output=True, text=True, timeout=30).stdout

    def purges(self, on: bool) -> None:
        """Answer purges again (on), or refuse each with a 503 as a CDN API that is down."""
        self.switches += 1
        name = f"v{self.switches}"
        path = self.home / f"{name}.vcl"
        path.write_text(vcl(self.origins, purges=on))
        self._admin("vcl.load", name, str(path))
        self._admin("vcl.use", name)

    def read(self, path: str) -> Read:
        """GET path as a signed-out reader (no cookie, so Varnish may answer from its copy)."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as answer:
                status, body, headers = answer.status, answer.read(), answer.headers
        except urllib.error.HTTPError as exc:
            status, body, headers = exc.code, exc.read(), exc.headers
            exc.close()
        # X-Varnish: this request's id, then the id of the fetch that made the copy (a hit)
        return Read(status, body.decode("utf-8", "replace"),
                    len(headers.get("X-Varnish", "").split()) == 2)

    def counters(self) -> dict[str, int]:
        """Return Varnish's own counters of hits, misses and requests to the origins."""
        found = json.loads(subprocess.run(
            [VARNISHSTAT, "-n", str(self.home / "n"), "-1", "-j"], check=True,
            capture_output=True, text=True, timeout=30).stdout)
        counters = found.get("counters", found)
        return {name: counters.get(f"MAIN.{name}", {}).get("value", 0)
                for name in ("client_req", "cache_hit", "cache_miss", "cache_hitpass",
                             "backend_req")}

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        shutil.rmtree(self.home, ignore_errors=True)
