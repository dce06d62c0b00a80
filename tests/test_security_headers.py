"""Every response carries the security headers: pages, fragments, files, JSON, feeds, errors."""

from datetime import UTC, datetime

import pytest

from tests.harness.support import make_app, new_post
from webapp.headers import CONTENT_SECURITY_POLICY, STRICT_TRANSPORT_SECURITY
from webapp.plugins import sitemap

EXPECTED = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def assert_secured(response) -> None:
    for name, value in EXPECTED.items():
        assert response.headers.get(name) == value, name


def test_the_policy_allows_no_inline_code_no_eval_and_no_framing():
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["default-src"] == directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY and "data:" not in CONTENT_SECURITY_POLICY
    assert directives["object-src"] == directives["base-uri"] == "'none'"
    assert directives["frame-ancestors"] == "'none'" and directives["form-action"] == "'self'"


@pytest.mark.parametrize("path", ["/admin/", "/admin/posts/", "/status/", "/settings"])
def test_signed_in_pages_carry_the_security_headers(auth, path):
    response = auth.client("admin").get(path)
    assert response.status_code == 200
    assert_secured(response)


def test_a_polled_fragment_carries_the_security_headers(auth):
    response = auth.client("viewer").get("/status/live", headers={"HX-Request": "true"})
    assert response.status_code == 200 and "<html" not in response.get_data(as_text=True)
    assert_secured(response)


@pytest.mark.parametrize("path", ["/static/js/soloist.js", "/static/css/soloist.css"])
def test_static_files_carry_the_security_headers(client, path):
    response = client.get(path)
    assert response.status_code == 200
    assert_secured(response)
    response.close()


def test_public_pages_feed_and_sitemap_carry_the_security_headers(app, client):
    new_post(app, "Out there", status="published", published_at=datetime.now(UTC))
    with app.app_context():
        sitemap.rebuild(datetime.now(UTC))
    for path in ("/", "/posts/out-there", "/feed.xml", "/sitemap.xml", "/login", "/healthz"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert_secured(response)


def test_a_json_api_answer_carries_the_security_headers(api):
    response = api("GET", "/api/posts", role="viewer")
    assert response.status_code == 200
    assert_secured(response)


@pytest.mark.parametrize("path", ["/no-such-page", "/api/no-such-thing", "/admin/users/"])
def test_error_answers_carry_the_security_headers(auth, path):
    response = auth.client("viewer").get(path)
    assert response.status_code in (403, 404)
    assert_secured(response)


def test_a_redirect_to_sign_in_carries_the_security_headers(client):
    response = client.get("/admin/posts/")
    assert response.status_code == 302
    assert_secured(response)


def test_hsts_is_sent_over_https_only(client):
    assert "Strict-Transport-Security" not in client.get("/").headers
    secure = client.get("/", base_url="https://localhost")
    assert secure.headers["Strict-Transport-Security"] == STRICT_TRANSPORT_SECURITY
    assert_secured(secure)


def test_hsts_follows_the_routers_forwarded_proto_only_when_the_router_is_trusted(pg_url):
    https, path = {"X-Forwarded-Proto": "https"}, "/static/css/soloist.css"  # no database
    behind_router = make_app(pg_url, TRUST_PROXY_HOPS=1).test_client()
    with behind_router.get(path, headers=https) as response:
        assert response.headers["Strict-Transport-Security"] == STRICT_TRANSPORT_SECURITY
    with behind_router.get(path) as response:
        assert "Strict-Transport-Security" not in response.headers
    direct = make_app(pg_url, TRUST_PROXY_HOPS=0).test_client()  # no router: a forged header
    with direct.get(path, headers=https) as response:
        assert "Strict-Transport-Security" not in response.headers


def test_a_header_the_view_set_on_purpose_is_kept(pg_url):
    app = make_app(pg_url)

    @app.get("/framed-on-purpose")
    def framed():
        return "ok", {"X-Frame-Options": "SAMEORIGIN",
                      "Content-Security-Policy": "frame-ancestors 'self'"}

    response = app.test_client().get("/framed-on-purpose")
    assert response.headers.getlist("X-Frame-Options") == ["SAMEORIGIN"]
    assert response.headers.getlist("Content-Security-Policy") == ["frame-ancestors 'self'"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
