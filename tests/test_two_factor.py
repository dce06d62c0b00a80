"""TOTP two-factor sign-in: enrolment with a QR code, codes computed here with pyotp, single
use, recovery codes, the sign-in limits, and a rotated SECRET_KEY."""

import re
import time

import pyotp
import sqlalchemy as sa

from tests.harness.support import post_form, text
from webapp.extensions import db
from webapp.models import RecoveryCode, User

EMAIL = "ada@example.com"


def enrol(app, auth) -> tuple[object, str, list[str]]:
    """Sign ada in, switch two-factor on through the pages; return her client, the secret
    and the recovery codes shown."""
    client = auth.client("editor", email=EMAIL)
    assert post_form(client, "/settings/two-factor/start").status_code == 303
    page = text(client.get("/settings/two-factor/"))
    secret = re.search(r'<code class="totp-key">([A-Z2-7]+)</code>', page).group(1)
    qr = client.get("/settings/two-factor/qr.svg")
    assert qr.mimetype == "image/svg+xml" and b"<svg" in qr.data and b"<script" not in qr.data
    assert qr.headers["Cache-Control"] == "no-store"
    wrong = post_form(client, "/settings/two-factor/confirm", {"code": "000000"})
    assert wrong.status_code == 422 and "does not match" in text(wrong)
    code = pyotp.TOTP(secret).now()
    done = post_form(client, "/settings/two-factor/confirm", {"code": code})
    assert done.status_code == 200 and done.headers["Cache-Control"] == "no-store"
    codes = re.findall(r"<li>([a-z2-9]{5}-[a-z2-9]{5})</li>", text(done))
    assert len(codes) == 10
    return client, secret, codes


def sign_in(auth, app, code: str | None, address: str = "127.0.0.1"):
    """Sign ada in from a fresh browser: the password, then code; return (client, answer)."""
    client = app.test_client()
    first = auth.login(email=EMAIL, client=client, address=address)
    assert first.status_code == 303 and first.location.endswith("/login/code")
    assert client.get("/admin/").status_code == 302  # no session before the code
    if code is None:
        return client, first
    return client, post_form(client, "/login/code", {"code": code},
                             environ_base={"REMOTE_ADDR": address})


def test_two_factor_is_on_only_once_a_code_confirms_it_and_its_secret_is_encrypted(app, auth):
    _client, secret, _codes = enrol(app, auth)
    with app.app_context():
        stored = db.session.scalar(sa.select(User.totp_secret).where(User.email == EMAIL))
        hashes = list(db.session.scalars(sa.select(RecoveryCode.code_hash)))
    assert stored and secret not in stored and len(hashes) == 10
    later = pyotp.TOTP(secret).at(time.time() + 30)  # next step's: the enrolment used now's
    _, answer = sign_in(auth, app, later)
    assert answer.status_code == 302 and answer.location.endswith("/admin/")


def test_a_code_is_accepted_once_and_a_wrong_one_counts_like_a_wrong_password(app, auth):
    _client, secret, _codes = enrol(app, auth)
    code = pyotp.TOTP(secret).at(time.time() + 30)
    _, first = sign_in(auth, app, code)
    assert first.status_code == 302
    _, replayed = sign_in(auth, app, code)
    assert replayed.status_code == 401 and "used already" in text(replayed)
    answers = []
    for _ in range(6):  # a stranger who has the password, not the phone
        client = app.test_client()
        first = auth.login(email=EMAIL, client=client, address="203.0.113.7")
        answers.append(first.status_code if first.status_code == 429 else post_form(
            client, "/login/code", {"code": "123456"},
            environ_base={"REMOTE_ADDR": "203.0.113.7"}).status_code)
    # counted like wrong passwords (the replay above was the account's first failure)
    assert answers[:4] == [401] * 4 and answers[4:] == [429, 429]


def test_a_recovery_code_signs_in_once(app, auth):
    _client, _secret, codes = enrol(app, auth)
    client, answer = sign_in(auth, app, codes[0].upper())
    assert answer.status_code == 302
    assert "9 left" in text(client.get("/admin/"))
    _, again = sign_in(auth, app, codes[0])
    assert again.status_code == 401


def test_turning_it_off_takes_a_code_and_then_the_password_alone_signs_in(app, auth):
    client, secret, _codes = enrol(app, auth)
    refused = post_form(client, "/settings/two-factor/off", {"code": "000000"})
    assert refused.status_code == 422
    off = post_form(client, "/settings/two-factor/off",
                    {"code": pyotp.TOTP(secret).at(time.time() + 30)})
    assert off.status_code == 303
    fresh = app.test_client()
    assert auth.login(email=EMAIL, client=fresh).status_code == 302
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(RecoveryCode)) == 0


def test_a_rotated_secret_key_still_opens_the_secret(app, auth):
    _client, secret, _codes = enrol(app, auth)
    old = app.config["SECRET_KEY"]
    app.config["SECRET_KEY"], app.config["SECRET_KEY_FALLBACKS"] = "n" * 43, [old]
    try:
        _, answer = sign_in(auth, app, pyotp.TOTP(secret).at(time.time() + 30))
        assert answer.status_code == 302
        app.config["SECRET_KEY_FALLBACKS"] = []  # re-encrypted with the new key at that code
        with app.test_request_context():
            from webapp.accounts import totp

            ada = db.session.scalar(sa.select(User).where(User.email == EMAIL))
            assert totp._secret(ada) == secret
    finally:
        app.config["SECRET_KEY"], app.config["SECRET_KEY_FALLBACKS"] = old, []


def test_the_code_page_without_a_password_first_sends_to_sign_in(app):
    answer = app.test_client().get("/login/code")
    assert answer.status_code == 303 and answer.location.endswith("/login")


def test_an_admins_password_reset_switches_two_factor_off(app, auth):
    _client, _secret, _codes = enrol(app, auth)
    with app.app_context():
        ada_id = db.session.scalar(sa.select(User.id).where(User.email == EMAIL))
    admin = auth.client("admin", email="root@example.com")
    page = post_form(admin, f"/admin/users/{ada_id}/reset-password")
    password = re.search(r'id="one-time-password">([^<]+)<', text(page)).group(1)
    fresh = app.test_client()
    answer = auth.login(email=EMAIL, password=password, client=fresh)
    assert answer.status_code == 302  # no code asked: two-factor is off
    with app.app_context():
        assert db.session.scalar(sa.select(User.totp_on_at).where(User.id == ada_id)) is None


def test_a_policy_walks_admins_through_enrolment_and_lets_them_do_nothing_else(app, auth):
    root = auth.client("admin", email="root@example.com")
    saved = post_form(root, "/admin/users/two-factor-policy", {"two_factor_required": "admins"})
    assert saved.status_code == 303
    # the admin who set it is under it too: every page sends them to set it up
    for path in ("/admin/", "/admin/users/", "/status/"):
        answer = root.get(path)
        assert answer.status_code == 302 and answer.location.endswith("/settings/two-factor/")
    assert root.get("/settings/two-factor/").status_code == 200
    editor = auth.client("editor", email="ed@example.com")
    assert editor.get("/admin/").status_code == 200  # admins only
    assert post_form(root, "/settings/two-factor/start").status_code == 303
    with app.test_request_context():
        from webapp.accounts import totp

        secret = totp.pending_secret(db.session.scalar(
            sa.select(User).where(User.email == "root@example.com")))
    assert post_form(root, "/settings/two-factor/confirm",
                     {"code": pyotp.TOTP(secret).now()}).status_code == 200
    assert root.get("/admin/").status_code == 200  # enrolled: everything opens again
    refused = post_form(root, "/admin/users/two-factor-policy", {"two_factor_required": "x"})
    assert refused.status_code == 422 and "Pick nobody, admins or everyone" in text(refused)


def test_an_admin_resets_a_lost_phones_two_factor_and_ends_the_users_sessions(app, auth):
    client, _secret, _codes = enrol(app, auth)
    with app.app_context():
        ada_id = db.session.scalar(sa.select(User.id).where(User.email == EMAIL))
    admin = auth.client("admin", email="root@example.com")
    assert "Reset two-factor" in text(admin.get(f"/admin/users/{ada_id}"))
    done = post_form(admin, f"/admin/users/{ada_id}/two-factor/reset")
    assert done.status_code == 303
    assert client.get("/admin/").status_code == 302  # her session ended
    fresh = app.test_client()
    assert auth.login(email=EMAIL, client=fresh).status_code == 302  # password alone
