"""Passkeys in Chromium, with the DevTools protocol's virtual authenticator standing in for
a device: register one under Settings, sign in with it alone; a challenge is used once."""

import re
from contextlib import contextmanager

import sqlalchemy as sa

from tests.harness.support import PASSWORD, add_user, serve, sign_in_page
from webapp.extensions import db
from webapp.models import AuditEvent, Passkey, WebAuthnChallenge


def _authenticator(context, page) -> None:
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
        "hasUserVerification": True, "isUserVerified": True,
        "automaticPresenceSimulation": True}})


@contextmanager
def with_a_passkey(app, browser, email: str, role: str, name: str = ""):
    """Serve app on localhost, sign email in at Chromium with a virtual authenticator and
    register a passkey (named name) under Settings; yield the page."""
    from playwright.sync_api import expect

    add_user(app, email, role)
    with serve(app) as url:
        url = url.replace("127.0.0.1", "localhost")  # a relying party id is a name, not an IP
        app.config["SITE_URL"] = url
        context = browser.new_context(base_url=url)
        try:
            page = context.new_page()
            _authenticator(context, page)
            sign_in_page(page, email)
            page.goto("/settings/passkeys")
            if name:
                page.fill("#passkey-name", name)
            page.click("[data-passkey-register]")
            expect(page.locator(".passkeys")).to_contain_text(name or "Passkey",
                                                              timeout=15_000)
            yield page
        finally:
            context.close()


def test_a_passkey_is_registered_and_then_signs_in_alone(app, browser):
    from playwright.sync_api import expect

    with with_a_passkey(app, browser, "pk@example.com", "editor", "Test laptop") as page:
        page.click("text=Sign out")
        page.wait_for_url("**/login")
        page.click("[data-passkey-signin]")
        page.wait_for_url(re.compile(r".*/admin/$"), timeout=15_000)
        expect(page.locator("body")).to_contain_text("pk@example.com")
    with app.app_context():
        key = db.session.scalar(sa.select(Passkey))
        assert key.name == "Test laptop" and key.last_used_at is not None
        assert db.session.scalar(sa.select(sa.func.count()).select_from(WebAuthnChallenge)) == 0
        actions = list(db.session.scalars(sa.select(AuditEvent.action)))
        assert "user.passkey_add" in actions and actions.count("session.start") == 2


def test_an_answer_to_an_unknown_or_used_challenge_is_refused(app):
    client = app.test_client()
    forged = {"rawId": "AAAA", "response": {
        "clientDataJSON": "eyJjaGFsbGVuZ2UiOiJub3Qtb3VycyJ9"}}  # {"challenge":"not-ours"}
    answer = client.post("/login/passkey", json={"credential": forged},
                         headers={"X-CSRFToken": _csrf(client)})
    assert answer.status_code == 401
    assert "used already or is unknown" in answer.get_json()["error"]
    assert client.get("/admin/").status_code == 302  # not signed in


def _csrf(client) -> str:
    page = client.get("/login").get_data(as_text=True)
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def test_with_a_passkey_the_password_is_followed_by_the_passkey(app, browser):
    """A second step after the password: an account with a passkey needs it as well."""
    with with_a_passkey(app, browser, "two@example.com", "admin") as page:
        page.click("text=Sign out")
        page.wait_for_url("**/login")
        page.fill("#f-email", "two@example.com")
        page.fill("#f-password", PASSWORD)
        page.click("button.primary")
        page.wait_for_url("**/login/code")
        base = page.url.split("/login")[0]
        assert page.request.get(base + "/admin/", max_redirects=0).status == 302
        page.click("[data-passkey-signin]")
        page.wait_for_url(re.compile(r".*/admin/$"), timeout=15_000)


def test_a_passkey_confirms_a_dangerous_action_and_the_form_goes_on(app, browser):
    from playwright.sync_api import expect

    try:
        with with_a_passkey(app, browser, "ops@example.com", "admin") as page:
            app.config["STEP_UP_MINUTES"] = 0.02  # 1.2 s: the sign-in is old news soon
            page.wait_for_timeout(1_500)  # the age of the sign-in is what is under test
            page.goto("/admin/freeze/")
            page.fill("textarea[name=reason], input[name=reason]", "embargo until noon")
            page.locator("form[action$='/admin/freeze/'] button").first.click()
            expect(page.locator("#step-up")).to_contain_text("Confirm it is you")
            page.click("[data-passkey-signin]")
            expect(page.locator("body")).to_contain_text("embargo until noon", timeout=15_000)
    finally:
        app.config["STEP_UP_MINUTES"] = 10.0
    with app.app_context():
        from webapp.models import Freeze

        assert db.session.scalar(sa.select(Freeze.reason)) == "embargo until noon"


def test_adding_a_passkey_asks_a_stale_session_to_confirm_it_is_you_first(app, auth):
    import time

    client = auth.client("editor", email="late@example.com")
    with client.session_transaction() as sess:
        sess["proved_at"] = time.time() - 11 * 60
    app.config["SITE_URL"] = "http://localhost:5000"
    page = client.get("/settings/passkeys").get_data(as_text=True)
    assert "Confirm it is you" in page and "data-passkey-register" not in page
    refused = client.post("/settings/passkeys/options", headers={"X-CSRFToken": _csrf_of(page)})
    assert refused.status_code == 401 and "Confirm it is you first" in refused.get_json()["error"]


def _csrf_of(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
