"""Signing in and out: passwords, limits on guessing, next=, cookies, sessions, settings."""

from urllib.parse import unquote

import pytest
import sqlalchemy as sa

from tests.support import PASSWORD, add_user, post_form, text
from webapp.extensions import db
from webapp.models import LoginFailure, User

# Signing in ----------------------------------------------------------------------------


def test_right_password_signs_in_and_lands_on_the_dashboard(app, client, auth):
    add_user(app, "ada@example.com")
    response = auth.login(email="ADA@example.com ")
    assert response.status_code == 302 and response.location == "/admin/"
    assert "ada@example.com" in text(client.get("/admin/"))


def test_wrong_password_is_refused_and_counted(app, client, auth):
    # counted, not slept on: a sleeping request thread was a cheap way to fill the
    # instance's threads (issue 12); the per-account and per-address limits slow guessers
    add_user(app, "ada@example.com")
    response = auth.login(email="ada@example.com", password="wrong password")
    assert response.status_code == 401
    assert "Wrong email or password." in text(response)
    assert 'value="ada@example.com"' in text(response)  # the form keeps the email
    assert client.get("/admin/").status_code == 302
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(LoginFailure)) == 1


def add_failures(app, count: int, email: str = "x@example.com", address: str = "127.0.0.1") -> None:
    """Record earlier failed sign-ins."""
    with app.app_context():
        db.session.add_all(LoginFailure(email=email, address=address) for _ in range(count))
        db.session.commit()


def test_an_account_is_locked_after_five_failures_even_with_the_right_password(app, auth):
    add_user(app, "ada@example.com")
    add_failures(app, 5, "ada@example.com", "10.0.0.9")
    response = auth.login(email="ada@example.com")
    assert response.status_code == 429
    assert "Too many failed sign-ins" in text(response)


def test_an_address_is_locked_after_twenty_failures_on_any_accounts(app, auth):
    add_user(app, "ada@example.com")
    add_failures(app, 20, "someone-else@example.com", "203.0.113.7")
    refused = auth.login(email="ada@example.com", headers={"X-Forwarded-For": "203.0.113.7"})
    assert refused.status_code == 429
    allowed = auth.login(email="ada@example.com", headers={"X-Forwarded-For": "198.51.100.1"})
    assert allowed.status_code == 302


def test_a_successful_sign_in_clears_the_accounts_failures(app, auth):
    add_user(app, "ada@example.com")
    add_failures(app, 3, "ada@example.com")
    assert auth.login(email="ada@example.com").status_code == 302
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(LoginFailure)) == 0


def test_a_deactivated_user_cannot_sign_in(app, auth):
    add_user(app, "ada@example.com", active=False)
    assert auth.login(email="ada@example.com").status_code == 401


def test_sign_in_starts_a_fresh_session(app, client, auth):
    add_user(app, "ada@example.com")
    with client.session_transaction() as session:
        session["planted"] = "by an attacker"
    auth.login(email="ada@example.com")
    with client.session_transaction() as session:
        assert "planted" not in session and session["_user_id"]


# next= ---------------------------------------------------------------------------------

EVIL_NEXT = ["//evil.com", "https://evil.com", "/\\evil.com", "javascript:alert(1)",
             "\\\\evil.com", "/\t/evil.com", "http:/evil.com", "///evil.com", "evil.com"]


@pytest.mark.parametrize("target", EVIL_NEXT)
def test_next_never_leaves_the_site(app, client, auth, target):
    add_user(app, "ada@example.com")
    response = auth.login(email="ada@example.com", next=target)
    assert response.status_code == 302
    assert response.location == "/admin/"
    again = client.get("/login", query_string={"next": target})  # already signed in
    assert again.location == "/admin/"


def test_next_to_a_local_page_is_followed(app, client, auth):
    add_user(app, "ada@example.com")
    asked = client.get("/admin/posts/?status=draft")
    assert asked.status_code == 302 and "/login?next=" in asked.location
    next_value = asked.location.split("next=", 1)[1]
    response = auth.login(email="ada@example.com", next=unquote(next_value))
    assert response.location == "/admin/posts/?status=draft"


# Cookies, CSRF, sign-out ---------------------------------------------------------------


def session_cookie_header(response) -> str:
    return next(h for h in response.headers.getlist("Set-Cookie") if h.startswith("session="))


def test_session_cookie_is_httponly_and_lax_and_secure_only_over_https(app, auth):
    add_user(app, "ada@example.com")
    plain = session_cookie_header(auth.login(email="ada@example.com",
                                             client=app.test_client()))
    assert "HttpOnly" in plain and "SameSite=Lax" in plain and "Secure" not in plain
    proxied = session_cookie_header(auth.login(email="ada@example.com", client=app.test_client(),
                                               headers={"X-Forwarded-Proto": "https"}))
    assert "Secure" in proxied and "HttpOnly" in proxied


def test_sign_in_without_a_csrf_token_is_refused(app, client):
    add_user(app, "ada@example.com")
    response = client.post("/login", data={"email": "ada@example.com", "password": PASSWORD})
    assert response.status_code == 400
    assert "reload the page" in text(response)
    assert client.get("/admin/").status_code == 302


def test_sign_out_needs_a_post_with_the_csrf_token(client, auth):
    auth.login("viewer")
    assert client.get("/logout").status_code == 405
    assert client.post("/logout").status_code == 400
    assert client.get("/admin/").status_code == 200
    assert auth.logout().status_code == 303
    assert client.get("/admin/").status_code == 302


def test_a_polled_fragment_answers_401_not_the_sign_in_page_once_signed_out(client):
    response = client.get("/admin/live", headers={"HX-Request": "true"})
    assert response.status_code == 401


# Sessions end when they should ---------------------------------------------------------


def test_deactivating_a_user_ends_their_session_at_once(app, client, auth):
    auth.login("editor")
    assert client.get("/admin/").status_code == 200
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "editor@example.com"))
        user.active = False
        db.session.commit()
    assert client.get("/admin/").status_code == 302


def test_changing_ones_password_signs_out_other_sessions(app, auth):
    add_user(app, "ada@example.com")
    mine, other = auth.client(email="ada@example.com"), auth.client(email="ada@example.com")
    response = post_form(mine, "/settings", {
        "timezone": "Europe/Paris", "current_password": PASSWORD,
        "new_password": "a much better one", "confirm_password": "a much better one"})
    assert response.status_code == 303
    assert mine.get("/admin/").status_code == 200
    assert other.get("/admin/").status_code == 302
    assert auth.login(email="ada@example.com", password="a much better one").status_code == 302


def test_a_user_with_a_one_time_password_must_choose_one_before_anything_else(app, client, auth):
    add_user(app, "new@example.com", must_change_password=True)
    assert auth.login(email="new@example.com").location == "/settings"
    assert client.get("/admin/").location == "/settings"
    weak = post_form(client, "/settings", {"timezone": "UTC", "current_password": PASSWORD,
                                           "new_password": "short", "confirm_password": "short"})
    assert weak.status_code == 422 and "at least 10 characters" in text(weak)
    post_form(client, "/settings", {"timezone": "UTC", "current_password": PASSWORD,
                                    "new_password": "long enough now", "confirm_password":
                                    "long enough now"})
    assert client.get("/admin/").status_code == 200


# Time zone ------------------------------------------------------------------------------


def test_first_sign_in_takes_the_browsers_time_zone_and_later_ones_keep_the_choice(app, auth):
    user_id = add_user(app, "ada@example.com", timezone="")
    auth.login(email="ada@example.com", zone="Asia/Tokyo", client=app.test_client())
    auth.login(email="ada@example.com", zone="Europe/Paris", client=app.test_client())
    with app.app_context():
        assert db.session.get(User, user_id).timezone == "Asia/Tokyo"


def test_an_unknown_zone_in_settings_is_refused_next_to_the_field_and_kept(app, client, auth):
    auth.login("editor")
    response = post_form(client, "/settings", {"timezone": "Mars/Olympus_Mons"})
    assert response.status_code == 422
    assert 'value="Mars/Olympus_Mons"' in text(response)
    assert 'id="e-timezone"' in text(response)
    with app.app_context():
        assert db.session.scalar(sa.select(User.timezone)) == "UTC"


# The create-user command ---------------------------------------------------------------


def test_create_user_command_creates_a_user_who_can_sign_in(app, runner, auth):
    with app.app_context():  # the flask command line pushes one
        result = runner.invoke(args=["create-user", "Ops@Example.com", "--role", "admin",
                                     "--password", PASSWORD, "--timezone", "America/Los_Angeles"])
        again = runner.invoke(args=["create-user", "ops@example.com", "--password", "x" * 12])
        bad_zone = runner.invoke(args=["create-user", "z@example.com", "--password", "x" * 12,
                                       "--timezone", "Nowhere/Land"])
    assert result.exit_code == 0, result.output
    assert "Created admin ops@example.com" in result.output
    assert auth.login(email="ops@example.com").status_code == 302
    assert again.exit_code != 0 and "exists already" in again.output
    assert bad_zone.exit_code != 0 and "unknown time zone" in bad_zone.output


def test_create_user_command_prompts_for_the_password_when_none_is_given(app, runner, auth):
    with app.app_context():
        result = runner.invoke(args=["create-user", "ed@example.com"],
                               input=f"{PASSWORD}\n{PASSWORD}\n")
    assert result.exit_code == 0, result.output
    assert auth.login(email="ed@example.com").status_code == 302


def test_guessing_the_current_password_in_settings_is_limited_like_sign_in(client, auth):
    auth.login("editor")
    for _ in range(5):
        response = post_form(client, "/settings", {
            "timezone": "UTC", "current_password": "wrong guess", "new_password": "x" * 12,
            "confirm_password": "x" * 12})
        assert "That is not your current password." in text(response)
    response = post_form(client, "/settings", {
        "timezone": "UTC", "current_password": PASSWORD, "new_password": "y" * 12,
        "confirm_password": "y" * 12})
    assert response.status_code == 422
    assert "Too many wrong passwords" in text(response)
