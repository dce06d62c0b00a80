"""Behind a real Varnish with the handbook's VCL (docs/soloist.vcl), Soloist's pages are
cached, and a purge of their surrogate keys makes the next reader get a fresh copy: hard (a
takedown, never served again) and soft (served stale once while it is fetched again)."""

import threading
import urllib.request

import pytest
from werkzeug.serving import make_server

from tests.harness.cluster import free_port, wait_for
from tests.harness.edge import VCL, Varnish, varnish_or_skip
from tests.harness.support import new_post, read_whole
from webapp.site import purgers


@pytest.fixture(scope="module")
def varnish():
    """Run a throwaway varnishd with the handbook's VCL, its origin a port of our choice."""
    origin = free_port()
    cache = Varnish([origin])
    try:
        yield {"url": cache.url, "origin": origin, "cache": cache}
    finally:
        cache.close()


@pytest.fixture
def behind(app, varnish):
    """Serve app on the port Varnish's backend names; yield Varnish's URL and a purger."""
    server = make_server("127.0.0.1", varnish["origin"], read_whole(app), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    wait_for(lambda: varnish["cache"].read("/healthz").status == 200, 10,
             "Soloist through Varnish")
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
