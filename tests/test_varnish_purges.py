"""Behind a real Varnish with the handbook's VCL (docs/soloist.vcl), Soloist's pages are
cached, and a purge of their surrogate keys makes the next reader get a fresh copy: hard (a
takedown, never served again) and soft (served stale once while it is fetched again)."""

import os
import shutil
import subprocess
import tempfile
import threading
import urllib.request
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from tests.cluster import free_port, wait_for
from tests.support import new_post, read_whole
from webapp.site import purgers

VARNISHD = shutil.which("varnishd") or "/usr/sbin/varnishd"
VCL = Path(__file__).resolve().parents[1] / "docs" / "soloist.vcl"


def varnish_or_skip() -> None:
    """Skip without varnishd and xkey (make system-deps installs them); fail instead on CI."""
    if Path(VARNISHD).exists() and list(Path("/usr/lib").glob("*/varnish/vmods/libvmod_xkey.so")):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("CI needs Varnish with varnish-modules (make system-deps)")
    pytest.skip("varnishd with varnish-modules' xkey is not installed (make system-deps)")


@pytest.fixture(scope="module")
def varnish():
    """Run a throwaway varnishd with the handbook's VCL, its backend a port of our choice.

    Its home is readable by all: varnishd run as root reads the VCL as its own user.
    """
    varnish_or_skip()
    home, origin, port = Path(tempfile.mkdtemp(prefix="soloist-varnish-")), free_port(), free_port()
    home.chmod(0o755)
    vcl = home / "soloist.vcl"
    vcl.write_text(VCL.read_text().replace('.port = "8000";', f'.port = "{origin}";'))
    with (home / "log").open("w") as log:  # varnishd keeps it open; we read the file
        process = subprocess.Popen(
            [VARNISHD, "-F", "-a", f"127.0.0.1:{port}", "-f", str(vcl), "-n", str(home / "n"),
             "-s", "malloc,64m", "-p", "default_grace=60"],
            stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _up(url) or process.poll() is not None, 30, "varnishd to listen")
        assert process.poll() is None, (home / "log").read_text()
        yield {"url": url, "origin": origin}
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(home, ignore_errors=True)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code


def _up(url: str) -> bool:
    try:
        urllib.request.urlopen(url + "/healthz", timeout=2)
    except urllib.error.HTTPError:
        return True  # Varnish answers (a 503: no origin yet)
    except OSError:
        return False
    return True


@pytest.fixture
def behind(app, varnish):
    """Serve app on the port Varnish's backend names; yield Varnish's URL and a purger."""
    server = make_server("127.0.0.1", varnish["origin"], read_whole(app), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    wait_for(lambda: _status(varnish["url"] + "/healthz") == 200, 10, "Soloist through Varnish")
    yield varnish["url"], purgers.Varnish("varnish+http://" + varnish["url"][7:])
    server.shutdown()
    thread.join(10)
    server.server_close()


def read(url: str) -> tuple[list[str], str]:
    """Return the X-Varnish ids of a GET (two: a hit, the second the copy's fetch) and body."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.headers["X-Varnish"].split(), answer.read().decode()


def test_a_cached_page_is_fetched_again_after_a_hard_purge_of_its_key(app, behind):
    url, varnish = behind
    post_id = new_post(app, "Cached here", status="published", slug="cached-here")
    page = f"{url}/posts/cached-here"
    first, body = read(page)
    assert len(first) == 1 and "Cached here" in body  # a miss: fetched from Soloist
    hit, _ = read(page)
    assert len(hit) == 2  # a hit: the copy the first read fetched (its fetch's id second)
    varnish.purge([f"post-{post_id}"], hard=True)
    after, _ = read(page)
    assert len(after) == 1  # a miss: the copy is gone, not served stale


def test_a_soft_purge_serves_the_copy_once_while_a_fresh_one_is_fetched(app, behind):
    url, varnish = behind
    new_post(app, "Listed", status="published", slug="listed")
    read(url + "/")
    cached = read(url + "/")[0]
    assert len(cached) == 2  # a hit
    varnish.purge(["home"], hard=False)
    stale = read(url + "/")[0]
    assert stale[1:] == cached[1:]  # the same copy, served once more while it is fetched
    wait_for(lambda: read(url + "/")[0][1:] not in ([], cached[1:]), 10,
             "a fresh copy of the home page after the soft purge")


def test_purges_from_an_address_outside_the_acl_are_refused(varnish):
    varnish_or_skip()
    vcl = VCL.read_text()
    assert 'acl purgers' in vcl and "client.ip !~ purgers" in vcl
