"""A passkey proves the person, not only a touch: registration and sign-in require user
verification (a PIN, a fingerprint, a face), so a security key stolen without its PIN opens
nothing, alone or as the step after a password. The answers come from a software
authenticator (tests/harness/authenticator.py) posted to the app, as an attacker's client would."""

import json

import pytest
import sqlalchemy as sa

from tests.harness.authenticator import SoftKey
from tests.harness.support import csrf_token, post_form, text
from webapp.extensions import db
from webapp.models import AuditEvent, Passkey

SITE = "http://localhost"  # the test client's own origin: the relying party is "localhost"
EMAIL = "key@example.com"


@pytest.fixture
def site_url(app):
    app.config["SITE_URL"] = SITE


def _send(client, path: str, body: dict | None = None, page: str = "/login"):
    """POST JSON with the CSRF header the page's script sends."""
    return client.post(path, json=body, headers={"X-CSRFToken": csrf_token(client, page)})


def _register(client, key: SoftKey, verified: bool = True):
    options = _send(client, "/settings/passkeys/options", page="/settings/passkeys")
    assert options.status_code == 200, text(options)
    credential = key.registration(options.get_json(), verified=verified)
    return _send(client, "/settings/passkeys", {"credential": credential, "name": "Key"},
                 page="/settings/passkeys")


def _sign_in(client, key: SoftKey, verified: bool):
    options = _send(client, "/login/passkey/options").get_json()
    return _send(client, "/login/passkey", {"credential": key.assertion(options, verified)})


@pytest.fixture
def key(app, auth, site_url) -> SoftKey:
    """A passkey of EMAIL's, registered with user verification, as a phone makes one."""
    made = SoftKey(SITE)
    client = auth.client("admin", email=EMAIL)
    assert _register(client, made).status_code == 200
    return made


def test_the_options_ask_every_authenticator_to_verify_the_person(app, auth, site_url):
    client = auth.client("editor")
    options = _send(client, "/settings/passkeys/options", page="/settings/passkeys")
    assert options.get_json()["authenticatorSelection"]["userVerification"] == "required"
    signed_out = app.test_client()
    assert _send(signed_out, "/login/passkey/options").get_json()["userVerification"] \
        == "required"


def test_a_passkey_made_without_user_verification_is_not_kept(app, auth, site_url):
    client = auth.client("editor")
    refused = _register(client, SoftKey(SITE), verified=False)
    assert refused.status_code == 422
    assert "verif" in refused.get_json()["error"]
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Passkey)) == 0


def test_a_key_that_only_proves_a_touch_does_not_sign_in(app, key):
    thief = app.test_client()
    refused = _sign_in(thief, key, verified=False)
    assert refused.status_code == 401
    assert "verif" in refused.get_json()["error"]
    assert thief.get("/admin/").status_code == 302  # not signed in
    owner = app.test_client()
    assert _sign_in(owner, key, verified=True).status_code == 200
    assert owner.get("/admin/").status_code == 200
    refused, started = _decisions(app)
    assert (refused.action, refused.actor) == ("auth.refused", EMAIL)  # whose key it was
    assert {k: v for k, v in json.loads(refused.detail).items() if k != "reason"} == {
        "for": "sign-in", "method": "passkey", "device": None}
    assert "did not verify you" in json.loads(refused.detail)["reason"]
    assert json.loads(started.detail)["method"] == "passkey"


def _decisions(app) -> list[AuditEvent]:
    """Return the sign-in decisions logged since the key was added."""
    with app.app_context():
        return list(db.session.scalars(sa.select(AuditEvent).where(
            AuditEvent.action.startswith("auth.") | (AuditEvent.action == "session.start"),
            AuditEvent.id > db.session.scalar(sa.select(AuditEvent.id).where(
                AuditEvent.action == "user.passkey_add"))).order_by(AuditEvent.id)))


def test_a_key_that_only_proves_a_touch_is_no_second_factor(app, auth, key):
    thief = app.test_client()  # has the password, and the key without its PIN
    first = auth.login(email=EMAIL, client=thief)
    assert first.status_code == 303 and first.location.endswith("/login/code")
    refused = _sign_in(thief, key, verified=False)
    assert refused.status_code == 401
    assert thief.get("/admin/").status_code == 302
    assert _sign_in(thief, key, verified=True).status_code == 200  # with the PIN, at last
    assert [(row.action, json.loads(row.detail).get("for"), json.loads(row.detail)["method"])
            for row in _decisions(app)] == [
        ("auth.ok", "sign-in", "password"), ("auth.refused", "second step", "passkey"),
        ("session.start", None, "password + passkey")]


def test_a_key_that_only_proves_a_touch_confirms_no_dangerous_action(app, auth, key):
    import time

    client = app.test_client()
    assert _sign_in(client, key, verified=True).status_code == 200
    with client.session_transaction() as sess:
        sess["proved_at"] = time.time() - 11 * 60
    options = _send(client, "/settings/step-up/passkey/options", page="/settings").get_json()
    refused = _send(client, "/settings/step-up/passkey",
                    {"credential": key.assertion(options, verified=False)}, page="/settings")
    assert refused.status_code == 401
    asked = post_form(client, "/admin/freeze/", {"scope": "publishing", "on_resume": "hold",
                                                  "reason": "embargo"})
    assert asked.status_code == 401 and "Confirm it is you" in text(asked)
