"""The authentication log: every sign-in decision is a row of the audit log (who, or the
name tried, from where, which browser, which method, what came of it), never the secret;
it outlives the failures the throttle forgets, ages out with the rest of the log, and is
read on the audit page and from /api/audit, filtered by outcome."""

import json
import time
from datetime import timedelta

import pyotp
import sqlalchemy as sa

from tests.harness.support import PASSWORD, add_user, post_form, text
from webapp.extensions import db
from webapp.models import AuditEvent, LoginFailure, User, utcnow
from webapp.plugins import housekeeping

EMAIL = "ada@example.com"
STRANGER = "203.0.113.9"
GUESSES = ("hunter2", "letmein!", "password1")


def _rows(app, since: int = 0) -> list[AuditEvent]:
    with app.app_context():
        return list(db.session.scalars(sa.select(AuditEvent).where(AuditEvent.id > since)
                                       .order_by(AuditEvent.id)))


def _detail(row: AuditEvent) -> dict:
    return json.loads(row.detail)


def test_three_wrong_passwords_then_the_right_one_are_four_entries(app, auth, api):
    ada = add_user(app, EMAIL)
    browser = app.test_client()
    for guess in GUESSES:
        assert auth.login(email=EMAIL, password=guess, client=browser).status_code == 401
    assert auth.login(email=EMAIL, client=browser).status_code == 302
    mine = [row for row in _rows(app) if row.actor == EMAIL]
    assert [row.action for row in mine] == ["auth.wrong"] * 3 + ["session.start"]
    for row in mine[:3]:
        assert (row.actor_id, row.address, row.via) == (ada, "127.0.0.1", "web")
        assert row.target == f"user {ada} “{EMAIL}”"
        assert _detail(row) == {"for": "sign-in", "method": "password", "device": None}
    start = _detail(mine[3])
    assert start["method"] == "password" and start["known_device"] is False
    for row in _rows(app):  # never a secret, tried or right
        assert not any(secret in f"{row.actor}{row.target}{row.detail}"
                       for secret in (*GUESSES, PASSWORD))
    with app.app_context():  # the throttle forgets her failures; the log keeps them
        assert db.session.scalar(sa.select(sa.func.count()).select_from(LoginFailure)) == 0
    found = api("GET", "/api/audit?action=auth.wrong", role="admin").get_json()["events"]
    assert [(e["actor"], e["detail"]["method"]) for e in found] == [(EMAIL, "password")] * 3


def test_a_name_that_is_no_account_is_logged_as_typed(app, auth):
    answer = post_form(app.test_client(), "/login", {"email": "nobody@example.com",
                                                     "password": "guess"},
                       environ_base={"REMOTE_ADDR": STRANGER})
    assert answer.status_code == 401
    (row,) = _rows(app)
    assert (row.action, row.actor, row.actor_id, row.target, row.address) == (
        "auth.wrong", "nobody@example.com", None, "", STRANGER)


def test_a_two_step_sign_in_logs_each_step_and_says_how_it_was_proved(app, auth):
    add_user(app, EMAIL)
    with app.test_request_context():
        from webapp.accounts import totp

        user = db.session.scalar(sa.select(User).where(User.email == EMAIL))
        secret = totp.start(user)
        totp.confirm(user, pyotp.TOTP(secret).now())
    browser = app.test_client()
    assert auth.login(email=EMAIL, client=browser).status_code == 303
    assert post_form(browser, "/login/code", {"code": "000000"}).status_code == 401
    code = pyotp.TOTP(secret).at(time.time() + 30)
    assert post_form(browser, "/login/code", {"code": code}).status_code == 302
    rows = _rows(app)
    assert [(r.action, _detail(r).get("for"), _detail(r).get("method")) for r in rows] == [
        ("auth.ok", "sign-in", "password"), ("auth.wrong", "second step", "totp"),
        ("session.start", None, "password + totp")]
    assert _detail(rows[0])["then"] == "second step"
    assert code not in json.dumps([r.detail for r in rows])


def test_a_run_of_throttled_tries_is_one_entry_per_failure(app, auth):
    add_user(app, EMAIL)
    stranger = app.test_client()

    def guess() -> int:
        return auth.login(email=EMAIL, password="guess", client=stranger,
                          address=STRANGER).status_code

    assert [guess() for _ in range(5)] == [401] * 5
    with app.app_context():  # four more failures on the account: the next wait is 16 s
        db.session.add_all(LoginFailure(email=EMAIL, address="198.51.100.1") for _ in range(4))
        db.session.commit()
    assert {guess() for _ in range(20)} == {429}
    throttled = [r for r in _rows(app) if r.action == "auth.throttled"]
    assert len(throttled) == 1 and 15 <= _detail(throttled[0])["wait"] <= 16
    with app.app_context():  # the wait passes (the failures older), one more guess
        db.session.execute(sa.update(LoginFailure).values(at=utcnow() - timedelta(seconds=20)))
        db.session.commit()
    assert guess() == 401
    assert {guess() for _ in range(5)} == {429}
    assert [r.action for r in _rows(app)].count("auth.throttled") == 2


def test_a_throttled_code_on_a_settings_page_is_logged_with_its_door(app, auth):
    add_user(app, EMAIL)
    browser = auth.client(email=EMAIL)
    with app.test_request_context():
        from webapp.accounts import totp

        user = db.session.scalar(sa.select(User).where(User.email == EMAIL))
        totp.confirm(user, pyotp.TOTP(totp.start(user)).now())
    mark = max(r.id for r in _rows(app))
    for _ in range(6):
        post_form(browser, "/settings/two-factor/off", {"code": "654321"})
    rows = _rows(app, mark)
    assert [(r.action, _detail(r)["for"]) for r in rows] == [
        ("auth.wrong", "two-factor off")] * 5 + [("auth.throttled", "two-factor off")]
    assert _detail(rows[0])["device"] == 1  # her own browser, by its device cookie


def test_the_log_outlives_the_failures_and_ages_out_with_the_rest(app, auth):
    add_user(app, EMAIL)
    assert auth.login(email=EMAIL, password="guess").status_code == 401
    with app.app_context():
        now = utcnow()
        kept = housekeeping.trim(now + timedelta(days=2))
        assert kept["login failures"] == 1 and kept["audit events"] == 0
        assert housekeeping.trim(now + timedelta(days=366))["audit events"] == 1


def test_the_audit_page_shows_sign_in_decisions_filtered_by_outcome(app, auth):
    add_user(app, EMAIL)
    auth.login(email=EMAIL, password="guess", client=app.test_client(), address=STRANGER)
    admin = auth.client("admin")
    everything = text(admin.get("/admin/audit/"))
    assert all(f'class="badge">{action}<' in everything
               for action in ("auth.wrong", "session.start"))
    assert 'href="/admin/audit/?action=auth.wrong"' in everything  # one click to the outcome
    wrong = text(admin.get("/admin/audit/?action=auth.wrong"))
    assert 'class="badge">auth.wrong<' in wrong and 'class="badge">session.start<' not in wrong
    assert EMAIL in wrong and STRANGER in wrong and "sign-in" in wrong and "password" in wrong
