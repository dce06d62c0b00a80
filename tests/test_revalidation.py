"""The 304s' own connection: one per worker, and a reader never pays for its failures.

webapp.site.revalidation reads a public page's validators on a connection kept for the purpose
(soloist-site:<instance>:<pid>), without the pool's pre-ping. These tests cut it, share it
between threads, turn it off and send it through PgBouncer, against the real server.
"""

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import psycopg
import pytest

from tests.cluster import wait_for
from tests.pgbouncer import pooled_url, shared_bouncer
from tests.support import make_app, new_post, serve
from webapp import posts
from webapp.extensions import db
from webapp.site import revalidation

LONG_AGO = datetime(2026, 3, 29, 9, 0, tzinfo=UTC)


@pytest.fixture
def hello(app) -> int:
    return new_post(app, "Hello", slug="hello", body="First words.", status="published",
                    published_at=LONG_AGO, updated_at=LONG_AGO)


def site_backends(pg_url: str, instance: str = "pytest") -> list[int]:
    """Return the server pids of the revalidation connections of this test process."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return [pid for (pid,) in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s "
            "AND datname = current_database()",
            (f"soloist-site:{instance}:{__import__('os').getpid()}:%",))]


def etag_of(client, url: str = "/posts/hello") -> str:
    response = client.get(url)
    assert response.status_code == 200
    return response.headers["ETag"]


def test_a_revalidation_connection_cut_by_the_server_costs_readers_nothing(app, hello, pg_url):
    client = app.test_client()
    etag = etag_of(client)
    assert client.get("/posts/hello", headers={"If-None-Match": etag}).status_code == 304
    [first] = site_backends(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (first,))
    wait_for(lambda: first not in site_backends(pg_url), 5, "the server to end the connection")

    def reconnected() -> bool:
        # every answer meanwhile is the right one: the app's own 304, then the reader's
        answer = client.get("/posts/hello", headers={"If-None-Match": etag})
        assert answer.status_code == 304, answer.status_code
        return bool(site_backends(pg_url))

    wait_for(reconnected, 5, "a new revalidation connection", interval=0.05)
    assert site_backends(pg_url) != [first]
    assert client.get("/posts/hello", headers={"If-None-Match": "W/\"old\""}).status_code == 200


def test_a_workers_threads_share_one_revalidation_connection(app, hello, pg_url):
    etag = etag_of(app.test_client())
    with serve(app) as base:
        import urllib.request

        def revalidate(_n: int) -> int:
            request = urllib.request.Request(f"{base}/posts/hello",
                                             headers={"If-None-Match": etag})
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    return answer.status
            except urllib.error.HTTPError as refused:
                return refused.code

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(revalidate, range(200)))
    assert answers == [304] * 200
    assert len(site_backends(pg_url)) == 1


def test_turned_off_revalidations_go_through_the_pool(pg_url, hello):
    app = make_app(pg_url, DB_REVALIDATION_CONNECTION=False)
    client = app.test_client()
    etag = etag_of(client)
    assert client.get("/posts/hello", headers={"If-None-Match": etag}).status_code == 304
    assert site_backends(pg_url) == []
    with app.app_context():
        db.engine.dispose()


def test_disposing_of_the_apps_connections_closes_the_revalidation_one(app, hello, pg_url):
    client = app.test_client()
    client.get("/posts/hello", headers={"If-None-Match": etag_of(client)})
    assert len(site_backends(pg_url)) == 1
    with app.app_context():
        db.engine.dispose()
    wait_for(lambda: site_backends(pg_url) == [], 5, "the revalidation connection to close")


def test_through_a_transaction_pooler_pages_and_304s_keep_working(app, hello, pg_url, tmp_path):
    """Nothing is prepared through PgBouncer 1.18 in transaction mode (it cannot route them).

    One server connection for all the app's: a statement prepared by one client connection
    would collide with, or be missing for, the next.
    """
    with shared_bouncer(tmp_path, "transaction", pool_size=1) as bouncer:
        web = make_app(pooled_url(pg_url, bouncer.port), LOCK_DATABASE_URL=pg_url,
                       DB_WEB_VIA_POOLER=True)
        client = web.test_client()
        etag = wait_for(lambda: _try(lambda: etag_of(client)), 10, "pgbouncer to serve")
        for url in ("/posts/hello", "/", "/feed.xml"):
            current = etag if url == "/posts/hello" else etag_of(client, url)
            for _ in range(12):  # past psycopg's prepare threshold (5) on each connection
                answer = client.get(url, headers={"If-None-Match": current})
                assert answer.status_code == 304, (url, answer.status_code)
                assert client.get(url).status_code == 200
        with web.app_context():
            db.engine.dispose()


def _try(attempt):
    try:
        return attempt()
    except AssertionError:
        return None


def test_through_a_transaction_pooler_several_pool_connections_never_prepare(
        app, hello, pg_url, tmp_path):
    """The web pool's connections share PgBouncer's one server connection: none may prepare."""
    with shared_bouncer(tmp_path, "transaction", pool_size=1) as bouncer:
        web = make_app(pooled_url(pg_url, bouncer.port), LOCK_DATABASE_URL=pg_url,
                       DB_WEB_VIA_POOLER=True, DB_REVALIDATION_CONNECTION=False)
        wait_for(lambda: _try(lambda: etag_of(web.test_client())), 10, "pgbouncer to serve")
        with web.app_context():
            engine = db.engine
            auto = {"isolation_level": "AUTOCOMMIT"}  # each statement its own transaction
            with (engine.connect().execution_options(**auto) as one,
                  engine.connect().execution_options(**auto) as two):  # two pool connections
                for _ in range(8):  # past psycopg's prepare threshold (5) on each
                    for conn in (one, two):
                        assert conn.exec_driver_sql("SELECT count(*) FROM posts").scalar() == 1
            engine.dispose()


def test_a_refused_read_keeps_the_connection_and_odd_addresses_never_reach_it(
        app, hello, pg_url):
    client = app.test_client()
    etag = etag_of(client)
    assert client.get("/posts/hello", headers={"If-None-Match": etag}).status_code == 304
    [backend] = site_backends(pg_url)
    for odd in ("/posts/%00", "/posts/Hello", "/posts/hello%0A", "/posts/" + "a" * 300):
        assert client.get(odd, headers={"If-None-Match": etag}).status_code == 404, odd
    reader = app.extensions[revalidation.EXTENSION]
    with app.app_context(), pytest.raises(psycopg.DataError):
        reader.one(posts.PUBLISHED_POST_VALIDATORS, slug="nul\x00")  # refused by the server
    assert client.get("/posts/hello", headers={"If-None-Match": etag}).status_code == 304
    assert site_backends(pg_url) == [backend]
