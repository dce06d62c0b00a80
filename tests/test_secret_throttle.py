"""One throttle for every secret a person types: the password at sign-in and in settings,
a TOTP or recovery code at sign-in's second step, at a step-up, to turn two-factor off or
make new recovery codes. Each counts its wrong tries against the same account, browser
(device cookie) and address, and answers 429 with Retry-After, in words, before the tenth,
keeping what was typed; and a code is spent once, even by two requests at the same time."""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyotp
import pytest
import sqlalchemy as sa

from tests.harness.support import add_user, post_form, text
from webapp.extensions import db
from webapp.models import User

EMAIL = "ada@example.com"
STRANGER = "203.0.113.9"
WRONG_CODE = "123456"
FREEZE = {"scope": "publishing", "on_resume": "hold", "reason": "embargo"}


@dataclass
class Ada:
    """Ada, an admin with two-factor on: the app, her signed-in browser and her TOTP key."""

    app: object
    auth: object
    client: object
    secret: str

    def stale(self) -> None:
        """Make her session's last proof 11 minutes old (a dangerous action asks again)."""
        with self.client.session_transaction() as sess:
            sess["proved_at"] = time.time() - 11 * 60

    def next_code(self) -> str:
        return pyotp.TOTP(self.secret).at(time.time() + 30)


@pytest.fixture
def ada(app, auth) -> Ada:
    add_user(app, EMAIL, "admin")
    client = auth.client("admin", email=EMAIL)
    with app.test_request_context():
        from webapp.accounts import totp

        user = db.session.scalar(sa.select(User).where(User.email == EMAIL))
        secret = totp.start(user)
        assert totp.confirm(user, pyotp.TOTP(secret).now()) is not None
    return Ada(app, auth, client, secret)


def _sign_in_wrong(ada: Ada):
    return ada.auth.login(email=EMAIL, password="not her password", address=STRANGER,
                          client=ada.stranger)


def _second_step_wrong(ada: Ada):
    return post_form(ada.stranger, "/login/code", {"code": WRONG_CODE},
                     environ_base={"REMOTE_ADDR": STRANGER})


def _second_step_ready(ada: Ada) -> None:
    first = ada.auth.login(email=EMAIL, client=ada.stranger, address=STRANGER)
    assert first.status_code == 303 and first.location.endswith("/login/code")


@dataclass
class Door:
    """A form that takes a secret: how to send one wrong try, and what a 429 page keeps."""

    wrong: Callable
    kept: str
    ready: Callable = lambda ada: None


DOORS = {
    "sign-in": Door(_sign_in_wrong, f'value="{EMAIL}"'),
    "sign-in's second step": Door(_second_step_wrong, f'value="{WRONG_CODE}"',
                                  _second_step_ready),
    "step-up, password": Door(lambda ada: post_form(ada.client, "/admin/freeze/", {
        **FREEZE, "step_up_password": "not her password"}), 'name="reason" value="embargo"',
                              Ada.stale),
    "step-up, code": Door(lambda ada: post_form(ada.client, "/admin/freeze/", {
        **FREEZE, "step_up_code": WRONG_CODE}), 'name="reason" value="embargo"', Ada.stale),
    "two-factor off": Door(lambda ada: post_form(ada.client, "/settings/two-factor/off", {
        "code": WRONG_CODE}), f'value="{WRONG_CODE}"'),
    "new recovery codes": Door(lambda ada: post_form(
        ada.client, "/settings/two-factor/recovery-codes", {"code": WRONG_CODE}),
                               f'value="{WRONG_CODE}"'),
    "password change": Door(lambda ada: post_form(ada.client, "/settings", {
        "timezone": "Europe/Paris", "current_password": "not her password",
        "new_password": "a brand new password", "confirm_password": "a brand new password"}),
                            'value="Europe/Paris"'),
}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_wrong_secrets_meet_a_429_before_the_tenth_try_on_every_door(ada, door):
    ada.stranger = ada.app.test_client()  # the sign-in doors: someone with her password
    DOORS[door].ready(ada)
    answers = [DOORS[door].wrong(ada) for _ in range(30)]
    codes = [answer.status_code for answer in answers]
    assert 429 in codes[:9], codes
    first = answers[codes.index(429)]
    assert first.headers["Retry-After"].isdigit() and int(first.headers["Retry-After"]) >= 1
    assert "Too many" in text(first) and "Try again in" in text(first)
    assert DOORS[door].kept in text(first)  # what was typed is still in the form


def test_every_door_counts_against_the_same_allowance(ada):
    """Three wrong codes to turn two-factor off and two for recovery codes: the step-up is
    throttled next, the right password unchecked."""
    for _ in range(3):
        assert DOORS["two-factor off"].wrong(ada).status_code == 422
    for _ in range(2):
        assert DOORS["new recovery codes"].wrong(ada).status_code == 422
    ada.stale()
    from tests.harness.support import PASSWORD

    throttled = post_form(ada.client, "/admin/freeze/", {**FREEZE, "step_up_password": PASSWORD})
    assert throttled.status_code == 429
    off = post_form(ada.client, "/settings/two-factor/off", {"code": ada.next_code()})
    assert off.status_code == 429  # the right code, unchecked: two-factor stays on
    with ada.app.app_context():
        assert db.session.scalar(sa.select(User.totp_on_at).where(User.email == EMAIL))


def test_a_spent_code_is_refused_and_two_requests_cannot_both_spend_one(ada):
    """Two connections check the same code at the same moment: one of them spends it."""
    from webapp.accounts import totp

    code, barrier, results = ada.next_code(), threading.Barrier(2), []

    def spend() -> None:
        with ada.app.app_context():
            user = db.session.scalar(sa.select(User).where(User.email == EMAIL))
            user.totp_last_step  # loaded by both before either writes  # noqa: B018
            barrier.wait(timeout=10)
            results.append(totp.check(user, code))
            db.session.commit()

    threads = [threading.Thread(target=spend) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results, key=str) == sorted(["totp", None], key=str), results
    replayed = post_form(ada.client, "/settings/two-factor/off", {"code": code})
    assert replayed.status_code == 422 and "used already" in text(replayed)
