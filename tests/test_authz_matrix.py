"""Every endpoint x every role x anonymous: allowed or refused as designed; CSRF everywhere.

Built from app.url_map, so an endpoint added later is checked too: it needs a line in
EXPECTED, or it falls back to the role its blueprint's page in the menu declares.
/api (bearer tokens, tested with the API) and static files are left out; /metrics takes
bearer tokens only (tests/test_metrics.py), so every cookie role gets its 401 here.
"""

import json
import re
import urllib.error
import urllib.request

import pytest
import sqlalchemy as sa
from flask import url_for

from tests.harness.cluster import json_answer
from tests.harness.support import (
    PASSWORD,
    Api,
    AuthActions,
    WebSession,
    add_user,
    count,
    make_app,
    post_form,
    serve,
    text,
)
from webapp import menu
from webapp.accounts.tokens import create_token
from webapp.extensions import db
from webapp.models import ApiToken, User, WebhookEndpoint

PUBLIC, SIGNED_IN, BEARER = "public", "signed-in", "bearer token only"
ROLES = [None, "viewer", "contributor", "editor", "admin"]  # None: anonymous

# (endpoint, method) or endpoint -> the least that may use it
EXPECTED = {
    "site.index": PUBLIC, "site.post": PUBLIC, "site.feed": PUBLIC,
    "health.healthz": PUBLIC, "health.readyz": PUBLIC, "favicon.ico": PUBLIC,
    "favicon.robots": PUBLIC,
    "auth.login": PUBLIC, "auth.logout": SIGNED_IN, "auth.settings": SIGNED_IN,
    "auth.create_api_token": SIGNED_IN, "auth.revoke_api_token": SIGNED_IN,
    "auth.end_own_session": SIGNED_IN, "auth.second_factor": PUBLIC,
    "two_factor.index": SIGNED_IN, "two_factor.start": SIGNED_IN, "two_factor.qr": SIGNED_IN,
    "two_factor.confirm": SIGNED_IN, "two_factor.recovery_codes": SIGNED_IN,
    "two_factor.off": SIGNED_IN,
    "passkeys.index": SIGNED_IN, "passkeys.registration_options": SIGNED_IN,
    "passkeys.register": SIGNED_IN, "passkeys.remove": SIGNED_IN,
    "passkeys.sign_in_options": PUBLIC, "passkeys.sign_in": PUBLIC,
    "passkeys.step_up_options": SIGNED_IN, "passkeys.step_up": SIGNED_IN,
    "passkeys.confirm": SIGNED_IN,
    "dashboard.index": "viewer", "dashboard.live": "viewer",
    "posts.index": "contributor", "posts.rows": "contributor", "posts.new": "contributor",
    "posts.edit": "contributor", "posts.panel": "contributor", "posts.preview": "contributor",
    "posts.when": "contributor", "posts.submit": "contributor", "posts.approve": "editor",
    "posts.send_back": "editor", "posts.schedule": "editor", "posts.unpublish_time": "editor",
    "posts.unschedule": "editor", "posts.publish": "editor", "posts.unpublish": "editor",
    "previews.create": "editor", "previews.revoke": "editor", "previews.show": PUBLIC,
    "previews.release": PUBLIC, "previews.release_post": PUBLIC,
    "releases.index": "editor", "releases.create": "editor", "releases.show": "editor",
    "releases.save": "editor", "releases.add": "editor", "releases.change": "editor",
    "releases.remove": "editor", "releases.cancel": "editor", "releases.preview": "editor",
    "releases.revoke_preview": "editor",
    "calendar.index": "editor", "calendar.move": "editor",
    "revisions.history": "editor", "revisions.revision": "editor", "revisions.compare": "editor",
    "revisions.restore": "editor", "revisions.change": "editor",
    "revisions.cancel_change": "editor",
    "autosaves.keep": "contributor", "autosaves.keep_new": "contributor",
    "autosaves.discard": "contributor", "autosaves.discard_new": "contributor",
    "users.index": "admin", "users.create": "admin", "users.role": "admin",
    "users.deactivate": "admin", "users.activate": "admin", "users.reset": "admin",
    "users.access": "admin", "users.end_session": "admin", "users.revoke_token": "admin",
    "users.everywhere": "admin", "users.two_factor_policy": "admin",
    "users.reset_two_factor": "admin",
    "status.index": "viewer", "status.live": "viewer", "status.act": "admin",
    "freezes.index": "admin", "freezes.create": "admin", "freezes.resume": "admin",
    "timers.index": "editor", "timers.detail": "editor", "timers.create": "editor",
    "timers.edit": "editor", "timers.runs": "editor", "timers.run_now": "editor",
    "timers.pause": "editor", "timers.resume": "editor", "timers.delete": "editor",
    "timers.next_runs": "editor",
    "plugins.index": "admin", "plugins.switch": "admin", "plugins.sitemap_xml": PUBLIC,
    "webhooks.index": "admin", "webhooks.create": "admin", "webhooks.switch": "admin",
    "webhooks.delete": "admin", "webhooks.redeliver": "admin", "webhooks.send_test": "admin",
    "metrics.index": BEARER,
    "site_settings.edit": "admin", "site_settings.save": "admin", "site_settings.review": "admin",
    "media.index": "editor", "media.upload": "editor", "media.delete": "editor",
    "media_files.serve": PUBLIC,
}
SAMPLES = {"int": "999999", "string": "nope", "default": "nope", "path": "nope",
           "uuid": "00000000-0000-0000-0000-000000000000", "float": "1.5"}
STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}


def checked_routes(app) -> list[tuple[str, str, str]]:
    """Return (endpoint, method, url) for every rule outside /api and static."""
    routes = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.rule.startswith("/api"):
            continue
        values = {name: _sample(conv) for name, conv in rule._converters.items()}
        url = rule.build(values)[1]
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            routes.append((rule.endpoint, method, url))
    return routes


def _sample(converter) -> str:
    """Return a URL value the converter accepts and that names nothing that exists."""
    if hasattr(converter, "items"):  # any(a, b): the first choice
        return sorted(converter.items)[0]
    names = {"IntegerConverter": "int", "UnicodeConverter": "string", "PathConverter": "path",
             "UUIDConverter": "uuid", "FloatConverter": "float"}
    return SAMPLES[names.get(type(converter).__name__, "default")]


def expected_role(app, endpoint: str, method: str) -> str:
    """Return who may use endpoint with method, from EXPECTED or its blueprint's menu role."""
    for key in ((endpoint, method), endpoint):
        if key in EXPECTED:
            return EXPECTED[key]
    menu_roles = {page.split(".")[0]: role for page, _label, role in menu(app)}
    if endpoint.split(".")[0] in menu_roles:
        return menu_roles[endpoint.split(".")[0]]
    pytest.fail(f"{endpoint} ({method}) is not in the authorisation table: add it to EXPECTED "
                "in tests/test_authz_matrix.py with the least role that may use it")


def may(role: str | None, least: str) -> bool:
    if least == PUBLIC:
        return True
    if role is None or least == BEARER:
        return False
    return least == SIGNED_IN or User.RANK[role] >= User.RANK[least]


def refused(response, role: str | None, least: str = "") -> bool:
    """Return whether the response refuses: sign-in for anonymous, 403 for a signed-in role.

    A bearer-only endpoint answers 401 to a cookie of any role.
    """
    if least == BEARER:
        return response.status_code == 401
    if role is None:
        return sent_to_sign_in(response) or response.status_code == 401
    return response.status_code == 403


def sent_to_sign_in(response) -> bool:
    """Return whether response redirects to the sign-in page to come back afterwards."""
    return (response.status_code in (301, 302, 303)
            and response.location.startswith("/login?next="))


@pytest.fixture
def open_app(app, pg_url):
    """The test app without CSRF checks (they have their own test below), emptied first."""
    permissive = make_app(pg_url, WTF_CSRF_ENABLED=False)
    yield permissive
    from webapp.extensions import db

    with permissive.app_context():
        db.engine.dispose()


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r or "anonymous")
def test_every_endpoint_allows_or_refuses_each_role_as_designed(open_app, role):
    wrong = []
    for endpoint, method, url in checked_routes(open_app):
        client = open_app.test_client()
        if role is not None:
            AuthActions(client).login(role)  # afresh: /logout ends the session
        response = client.open(url, method=method, data={})
        least = expected_role(open_app, endpoint, method)
        allowed = may(role, least)
        if response.status_code == 500:
            wrong.append(f"{method} {url}: 500")
        elif allowed and response.status_code == 403:
            wrong.append(f"{method} {url}: refused (403), should be allowed")
        elif allowed and role is not None and sent_to_sign_in(response):
            wrong.append(f"{method} {url}: sent to sign in, should be allowed")
        elif not allowed and not refused(response, role, least):
            wrong.append(f"{method} {url}: answered {response.status_code}, should be refused")
    assert not wrong, f"as {role or 'anonymous'}:\n" + "\n".join(wrong)


def test_the_table_covers_every_endpoint_it_names(open_app):
    known = {endpoint for endpoint, _method, _url in checked_routes(open_app)}
    stale = {key for key in EXPECTED if (key if isinstance(key, str) else key[0]) not in known}
    assert not stale, f"EXPECTED names endpoints that no longer exist: {sorted(stale)}"


@pytest.mark.parametrize("role", ROLES[1:])
def test_the_menu_shows_each_role_the_pages_it_may_open_and_no_other(open_app, role):
    client = open_app.test_client()
    AuthActions(client).login(role)
    page = text(client.get("/admin/"))
    nav = page.split('<nav class="nav" aria-label="Main">')[1].split("</nav>")[0]
    shown = set(re.findall(r'href="([^"]+)"', nav))
    with open_app.test_request_context():
        pages = {url_for(endpoint) for endpoint, _label, _role in menu(open_app)}
    opens = {url for url in pages if client.get(url).status_code == 200}
    assert shown == opens
    assert len(shown) == {"viewer": 2, "contributor": 3, "editor": 6, "admin": len(pages)}[role]


@pytest.mark.parametrize("role", [None, "admin"], ids=["anonymous", "admin"])
def test_every_state_changing_request_without_the_csrf_token_is_refused(app, client, auth, role):
    if role:
        auth.login(role, email="admin@example.com")
    changing = [(e, m, u) for e, m, u in checked_routes(app) if m in STATE_CHANGING]
    assert changing, "no state-changing endpoints found"
    for _endpoint, method, url in changing:
        response = client.open(url, method=method, data={"title": "x", "role": "viewer"})
        assert response.status_code == 400, f"{method} {url} answered {response.status_code}"
        assert "The form expired or was not sent from Soloist" in text(response)


def test_htmx_requests_send_the_token_in_a_header_and_that_is_accepted(client, auth):
    auth.login("editor", email="ed@example.com")
    page = text(client.get("/admin/posts/new"))
    token = page.split('hx-headers=\'{"X-CSRFToken": "')[1].split('"')[0]
    response = client.post("/admin/posts/preview", data={"body": "*hi*"},
                           headers={"X-CSRFToken": token, "HX-Request": "true"})
    assert response.status_code == 200 and "<em>hi</em>" in text(response)
    forged = client.post("/admin/posts/preview", data={"body": "*hi*"},
                         headers={"X-CSRFToken": "forged", "HX-Request": "true"})
    assert forged.status_code == 400


EDITOR_BLUEPRINTS = ("site", "auth", "dashboard", "posts", "calendar", "users")


def test_an_id_too_big_for_the_database_is_404_not_500(open_app):
    wrong = []
    for rule in open_app.url_map.iter_rules():
        if rule.endpoint.split(".")[0] not in EDITOR_BLUEPRINTS or "int" not in rule.rule:
            continue
        values = {name: "99999999999999999999" if type(conv).__name__ == "IntegerConverter"
                  else _sample(conv) for name, conv in rule._converters.items()}
        url = rule.build(values)[1]
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            client = open_app.test_client()
            AuthActions(client).login("admin")
            status = client.open(url, method=method, data={}).status_code
            if status != 404:
                wrong.append(f"{method} {url}: {status}")
    assert not wrong, "an id no row can have should be 404:\n" + "\n".join(wrong)


def test_ids_beyond_64_bits_are_404_on_sqlite_too(sqlite_app):
    huge = "99999999999999999999"
    client = sqlite_app.test_client()
    AuthActions(client).login("admin", email="web-admin@example.com")
    assert client.get(f"/admin/timers/{huge}").status_code == 404
    assert post_form(client, f"/admin/webhooks/{huge}/delete").status_code == 404
    assert post_form(client, f"/admin/webhooks/deliveries/{huge}/redeliver").status_code == 404
    api = Api(sqlite_app)
    assert api("GET", f"/api/webhooks/{huge}/deliveries", role="admin").status_code == 404
    assert api("POST", f"/api/timers/{huge}/run").status_code == 404


def test_a_stale_session_over_http_is_asked_for_proof_before_each_new_way_in(app, api):
    """A session whose last proof is past STEP_UP_MINUTES makes no admin, activates no user
    and mints no token (one that could add a webhook). Over HTTP, from a signed-in browser's
    cookie jar: each asks for the password, and nothing changes until it comes."""
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True  # the hook's address is not resolved
    off = add_user(app, "gone@example.com", "editor", active=False)
    with app.app_context():
        everyday = create_token(db.session.scalar(sa.select(User).where(
            User.email == "admin@example.com")), "deploy script")  # no dangerous actions
    hook = {"url": "http://127.0.0.1:9/hook", "events": "post.published"}
    with serve(app) as url:
        browser = WebSession(url, "admin@example.com")
        app.config["STEP_UP_MINUTES"] = 0  # every proof is too old now, as after lunch
        for path, form in (("/admin/users/", {"email": "new@example.com", "role": "admin"}),
                           (f"/admin/users/{off}/activate", {}),
                           ("/settings/tokens", {"label": "mine", "days": "30"}),
                           ("/admin/webhooks/", hook)):
            status, page = browser.submit(path, form)
            assert status == 401 and "Confirm it is you" in page, (path, status)
        status, answer = _api_post(url + "/api/webhooks", everyday,
                                   {**hook, "events": ["post.published"]})
        assert status == 403 and "made for dangerous actions" in answer["detail"]
        assert count(app, WebhookEndpoint) == 0 and count(app, ApiToken) == 4
        with app.app_context():
            assert not db.session.get(User, off).active
            assert db.session.scalar(sa.select(User).where(User.email == "new@example.com")) \
                is None
        status, page = browser.submit("/admin/users/", {
            "email": "new@example.com", "role": "admin", "step_up_password": PASSWORD})
        assert status == 201 and "new@example.com" in page  # the password proves it again


def _api_post(url: str, token: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    return json_answer(request)


PUBLIC_ANSWERS = ("site.", "health.", "media_files.", "favicon.", "static",
                  "plugins.sitemap_xml", "previews.show", "api.openapi")


def test_every_signed_in_page_fragment_and_api_answer_is_kept_by_no_cache(open_app):
    """What an admin sees (pages, htmx fragments, errors, JSON) stays in no browser cache or
    proxy for whoever uses the computer next; the public site's answers are left alone."""
    api = Api(open_app)
    admin = open_app.test_client()
    AuthActions(admin).login("admin")  # the user Api made
    wrong = []
    for endpoint, method, url in checked_routes(open_app) + _api_reads(open_app):
        if method != "GET" or endpoint.startswith(PUBLIC_ANSWERS):
            continue
        response = api("GET", url, role="admin") if url.startswith("/api/") else admin.get(url)
        if "no-store" not in response.headers.get("Cache-Control", ""):
            wrong.append(f"{url} ({response.status_code}): "
                         f"{response.headers.get('Cache-Control')}")
    assert not wrong, "kept by a cache:\n" + "\n".join(wrong)


def _api_reads(app) -> list[tuple[str, str, str]]:
    return [(rule.endpoint, "GET", rule.build({name: "1" for name in rule.arguments})[1])
            for rule in app.url_map.iter_rules()
            if rule.rule.startswith("/api") and "GET" in rule.methods]
