"""Signing in and out: passwords, limits on guessing, next=, cookies, sessions, settings."""

import statistics
import time
from datetime import timedelta
from urllib.parse import unquote

import pytest
import sqlalchemy as sa

from tests.harness.support import PASSWORD, add_user, make_app, post_form, text
from webapp.config import load_config
from webapp.extensions import db
from webapp.models import LoginFailure, Post, User, utcnow

# Signing in ----------------------------------------------------------------------------


def test_right_password_signs_in_and_lands_on_the_dashboard(app, client, auth):
    add_user(app, "ada@example.com")
    response = auth.login(email="ADA@example.com ")
    assert response.status_code == 302 and response.location == "/admin/"
    assert "ada@example.com" in text(client.get("/admin/"))


def test_wrong_password_is_refused_and_counted(app, client, auth):
    # counted, not slept on: a sleeping request thread would be a cheap way to fill the
    # instance's threads; the per-account and per-address limits slow guessers
    add_user(app, "ada@example.com")
    response = auth.login(email="ada@example.com", password="wrong password")
    assert response.status_code == 401
    assert "Wrong email or password." in text(response)
    assert 'value="ada@example.com"' in text(response)  # the form keeps the email
    assert client.get("/admin/").status_code == 302
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(LoginFailure)) == 1


def add_failures(app, count: int, email: str = "x@example.com", address: str = "127.0.0.1",
                 ago: timedelta = timedelta(0)) -> None:
    """Record earlier failed sign-ins (ago: how long before now)."""
    with app.app_context():
        at = utcnow() - ago
        db.session.add_all(LoginFailure(email=email, address=address, at=at)
                           for _ in range(count))
        db.session.commit()


OWNER, STRANGER, ELSEWHERE = "198.51.100.1", "203.0.113.7", "192.0.2.44"


def test_a_stranger_guessing_from_elsewhere_cannot_lock_the_owner_out(app, auth):
    # 5 wrong passwords from one address must not lock the account for everyone, admins
    # included
    add_user(app, "ada@example.com", "admin")
    assert auth.login(email="ada@example.com", address=OWNER,
                      client=app.test_client()).status_code == 302
    stranger = app.test_client()
    answers = [auth.login(email="ada@example.com", password="guess", address=STRANGER,
                          client=stranger).status_code for _ in range(7)]
    assert answers[:5] == [401] * 5 and 429 in answers[5:]
    owner = auth.login(email="ada@example.com", address=OWNER, client=app.test_client())
    assert owner.status_code == 302


HOTEL = "100.64.7.9"  # a network the owner's browser never used


def _owner_browser(app, auth):
    """The owner's browser after one sign-in there (it keeps its device cookie), signed out."""
    add_user(app, "ada@example.com", "admin")
    owner = app.test_client()
    assert auth.login(email="ada@example.com", address=OWNER, client=owner,
                      headers={"User-Agent": "Ada's laptop"}).status_code == 302
    assert owner.get_cookie("soloist_device") is not None
    auth.logout(owner)
    return owner


def _stranger_guesses(app, auth, count: int = 12) -> None:
    stranger = app.test_client()
    for _ in range(count):
        auth.login(email="ada@example.com", password="guess", address=STRANGER, client=stranger)


def test_the_owners_browser_keeps_its_allowance_on_a_network_it_never_used(app, auth):
    """A stranger's 12 guesses must not make the owner's own browser wait at a hotel: a
    browser with the account's device cookie keeps an allowance of its own, wherever it is."""
    owner = _owner_browser(app, auth)
    _stranger_guesses(app, auth)
    fresh = auth.login(email="ada@example.com", address=HOTEL, client=app.test_client())
    assert fresh.status_code == 429  # without a device cookie: today's limits
    assert auth.login(email="ada@example.com", address=HOTEL, client=owner).status_code == 302
    assert "Ada&#39;s laptop" in text(owner.get("/settings"))  # listed as a trusted browser


def test_failures_from_a_trusted_browser_count_against_it_alone(app, auth):
    owner = _owner_browser(app, auth)
    answers = [auth.login(email="ada@example.com", password="typo", address=HOTEL,
                          client=owner).status_code for _ in range(6)]
    assert answers == [401] * 5 + [429]  # its own allowance, spent
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(LoginFailure).where(
            LoginFailure.device_id.is_not(None))) == 5
    # a forged or foreign cookie is no device: the request is a stranger's
    forged = app.test_client()
    forged.set_cookie("soloist_device", "1.not-the-secret")
    assert auth.login(email="ada@example.com", password="x", address=HOTEL,
                      client=forged).status_code == 429


def test_a_password_reset_forgets_the_trusted_browsers(app, auth):
    owner = _owner_browser(app, auth)
    with app.app_context():
        ada = db.session.scalar(sa.select(User).where(User.email == "ada@example.com"))
        ada_id = ada.id
    reset = post_form(auth.client("admin", email="root@example.com"),
                      f"/admin/users/{ada_id}/reset-password")
    assert reset.status_code in (200, 303)
    _stranger_guesses(app, auth)
    assert auth.login(email="ada@example.com", address=HOTEL, client=owner).status_code == 429


def test_past_five_failures_an_account_makes_strangers_wait_longer_each_time(app, auth):
    add_user(app, "ada@example.com")
    add_failures(app, 5, "ada@example.com", STRANGER, ago=timedelta(seconds=0.5))
    refused = auth.login(email="ada@example.com", address=ELSEWHERE)  # right password, too
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    assert "Try again in 1 second." in text(refused)
    add_failures(app, 4, "ada@example.com", STRANGER)
    later = auth.login(email="ada@example.com", address=ELSEWHERE)
    assert later.status_code == 429 and 16 - 1 <= int(later.headers["Retry-After"]) <= 16
    add_failures(app, 20, "ada@example.com", STRANGER)
    capped = auth.login(email="ada@example.com", address=ELSEWHERE)
    assert int(capped.headers["Retry-After"]) == 300 and "5 minutes" in text(capped)


def test_the_wait_is_over_once_it_has_passed(app, auth):
    add_user(app, "ada@example.com")
    add_failures(app, 6, "ada@example.com", STRANGER, ago=timedelta(seconds=3))  # waits 2 s
    assert auth.login(email="ada@example.com", address=ELSEWHERE).status_code == 302


def test_the_owners_own_mistakes_still_slow_their_address(app, auth):
    add_user(app, "ada@example.com")
    assert auth.login(email="ada@example.com", address=OWNER,
                      client=app.test_client()).status_code == 302
    add_failures(app, 5, "ada@example.com", OWNER)
    assert auth.login(email="ada@example.com", address=OWNER,
                      client=app.test_client()).status_code == 429


def test_an_address_guessing_many_accounts_is_slowed_down(app, auth):
    add_user(app, "ada@example.com")
    add_failures(app, 10, "someone-else@example.com", STRANGER)
    refused = auth.login(email="ada@example.com", address=STRANGER)
    assert refused.status_code == 429
    allowed = auth.login(email="ada@example.com", address=ELSEWHERE)
    assert allowed.status_code == 302


def test_an_ipv6_client_counts_as_its_64_network(app, auth):
    add_user(app, "ada@example.com")
    for host in range(10):  # a /64 holds 2**64 addresses: rotating them must not help
        add_failures(app, 1, f"user{host}@example.com", "2001:db8:1:2::/64")
    refused = auth.login(email="ada@example.com", address="2001:db8:1:2:dead:beef:0:1")
    assert refused.status_code == 429


def test_a_throttled_sign_in_answers_at_once_without_checking_the_password(app, auth):
    add_user(app, "ada@example.com")
    add_failures(app, 30, "ada@example.com", STRANGER)
    refused = auth.login(email="ada@example.com", password="wrong", address=ELSEWHERE)
    assert refused.status_code == 429
    with app.app_context():  # a refused try is not another failure: the wait does not grow
        assert db.session.scalar(sa.select(sa.func.count()).select_from(LoginFailure)) == 30


def test_exposed_directly_x_forwarded_for_is_not_believed(app, auth):
    # with TRUST_PROXY_HOPS=1 by default, a client would pick its own address
    assert app.config["TRUST_PROXY_HOPS"] == 0
    add_user(app, "ada@example.com")
    for n in range(12):
        auth.login(email=f"nobody{n}@example.com", password="guess", address=STRANGER,
                   headers={"X-Forwarded-For": f"10.9.8.{n}"})
    refused = auth.login(email="ada@example.com", address=STRANGER,
                         headers={"X-Forwarded-For": "10.9.8.200"})
    assert refused.status_code == 429


@pytest.fixture
def behind_router(pg_url, app):
    """Return an app on the same database that trusts one router's X-Forwarded-* headers."""
    behind = make_app(pg_url, TRUST_PROXY_HOPS=1)
    yield behind
    with behind.app_context():
        db.engine.dispose()


def test_behind_the_platforms_router_its_forwarded_address_counts(behind_router, app, auth):
    behind = behind_router
    add_user(app, "ada@example.com")
    add_failures(app, 10, "someone-else@example.com", STRANGER)
    client = behind.test_client()
    refused = auth.login(email="ada@example.com", client=client,
                         headers={"X-Forwarded-For": STRANGER})
    assert refused.status_code == 429
    allowed = auth.login(email="ada@example.com", client=client,
                         headers={"X-Forwarded-For": ELSEWHERE})
    assert allowed.status_code == 302


def test_a_successful_sign_in_clears_the_failures_from_its_own_address_only(app, auth):
    add_user(app, "ada@example.com")
    add_failures(app, 2, "ada@example.com", OWNER)
    add_failures(app, 2, "ada@example.com", STRANGER)
    assert auth.login(email="ada@example.com", address=OWNER).status_code == 302
    with app.app_context():
        left = db.session.scalars(sa.select(LoginFailure.address)).all()
    assert left == [STRANGER, STRANGER]


def test_unknown_and_known_emails_take_as_long_to_refuse(app, client):
    # the password hash is computed for unknown and inactive users too, else a known email
    # answers measurably slower. Interleaved, medians of 7, in the CPU
    # time of the answering thread (the test client answers on this one): the work done,
    # not the time other processes on the machine took the CPU from it.
    app.config["PASSWORD_HASH_METHOD"] = "scrypt"  # its tens of ms, not the suite's cheap hash
    add_user(app, "ada@example.com")
    add_user(app, "gone@example.com", active=False)
    with app.app_context():
        for user in db.session.scalars(sa.select(User)):
            user.set_password(PASSWORD)
        db.session.commit()
    timings: dict[str, list[float]] = {"ada@": [], "nobody@": [], "gone@": []}
    for _ in range(7):
        for who in timings:
            started = time.thread_time()
            answer = post_form(client, "/login",  # not auth.login: it makes unknown users
                               {"email": f"{who}example.com", "password": "wrong"})
            timings[who].append(time.thread_time() - started)
            assert answer.status_code == 401
        with app.app_context():  # stay under the limits: this measures the answer, not them
            db.session.execute(sa.delete(LoginFailure))
            db.session.commit()
    known = statistics.median(timings["ada@"])
    # the hash dominates (tens of ms); without it an answer takes a few ms
    assert statistics.median(timings["nobody@"]) > known * 0.6
    assert statistics.median(timings["gone@"]) > known * 0.6


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


def test_session_cookie_is_httponly_and_lax_and_secure_only_over_https(app, auth,
                                                                      behind_router):
    add_user(app, "ada@example.com")
    plain = session_cookie_header(auth.login(email="ada@example.com",
                                             client=app.test_client()))
    assert "HttpOnly" in plain and "SameSite=Lax" in plain and "Secure" not in plain
    proxied = session_cookie_header(auth.login(email="ada@example.com",
                                               client=behind_router.test_client(),
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


def test_an_app_not_told_otherwise_hashes_passwords_with_scrypt(app, runner, auth):
    """The suite's apps hash cheaply (tests.harness.support.make_app); a real one uses scrypt."""
    # as create_app() leaves it (restored after)
    app.config["PASSWORD_HASH_METHOD"] = load_config({})["PASSWORD_HASH_METHOD"]
    with app.app_context():
        result = runner.invoke(args=["create-user", "ops@example.com", "--role", "admin",
                                     "--password", PASSWORD])
        stored = db.session.scalar(sa.select(User.password_hash))
    assert result.exit_code == 0, result.output
    assert stored.startswith("scrypt:32768:8:1$")
    assert auth.login(email="ops@example.com").status_code == 302


def test_create_user_command_prompts_for_the_password_when_none_is_given(app, runner, auth):
    with app.app_context():
        result = runner.invoke(args=["create-user", "ed@example.com"],
                               input=f"{PASSWORD}\n{PASSWORD}\n")
    assert result.exit_code == 0, result.output
    assert auth.login(email="ed@example.com").status_code == 302


# The ensure-admin command: a one-time password in a terminal, never in a deploy log -----


def in_a_terminal(url: str, *args: str) -> str:
    """Run a flask command with its output on a terminal (a pty, as `heroku run` gives it);
    return what it printed."""
    import os
    import pty
    import subprocess

    from tests.harness.cluster import BIN, ROOT, base_env

    controller, terminal = pty.openpty()
    process = subprocess.Popen([str(BIN / "flask"), "--app", "webapp", *args], cwd=ROOT,
                               env=base_env(url), stdout=terminal, stderr=subprocess.STDOUT)
    os.close(terminal)
    output = b""
    try:
        while chunk := os.read(controller, 4096):
            output += chunk
    except OSError:  # EIO: the command exited and closed its end
        pass
    finally:
        os.close(controller)
    assert process.wait(60) == 0, output
    return output.decode()


def boxed(printed: str) -> list[str]:
    """Return the lines of the box that ends a command's output (none: [])."""
    lines = [line.strip() for line in printed.strip().splitlines()]
    if not lines or not lines[-1].startswith("└"):
        return []
    top = max(i for i, line in enumerate(lines) if line.startswith("┌"))
    return [line.strip("│ ") for line in lines[top + 1:-1]]


def test_ensure_admin_on_a_terminal_ends_with_where_to_sign_in_and_a_one_time_password(
        app, pg_url, client, auth):
    """The last thing printed: the address and the password; signing in with it lands on
    "Choose your password", nothing else opens until then, and it then stops working."""
    box = boxed(in_a_terminal(pg_url, "ensure-admin", "--email", "root@example.com"))
    assert box[:2] == ["Sign in at http://127.0.0.1/login", "Sign in as:         root@example.com"]
    password = box[2].removeprefix("One-time password:").strip()
    assert len(password) >= 16 and "works once" in box[3]
    response = auth.login(email="root@example.com", password=password)
    assert response.status_code == 302 and response.location.endswith("/settings")
    assert "<h1>Choose your password</h1>" in text(client.get("/settings"))
    for path in ("/admin/", "/admin/posts/", "/admin/users/", "/status/"):
        assert client.get(path).location == "/settings", path
    refused = post_form(client, "/admin/posts/new", {"title": "Early", "body": "x"})
    assert refused.status_code == 302 and refused.location == "/settings"
    chosen = post_form(client, "/settings", {"timezone": "UTC", "new_password": "my own at last",
                                             "confirm_password": "my own at last"})
    assert chosen.status_code == 303 and client.get("/admin/posts/").status_code == 200
    with app.app_context():
        assert db.session.scalar(sa.select(User.must_change_password)) is False
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Post)) == 0
    assert auth.login(email="root@example.com", password=password,
                      client=app.test_client()).status_code == 401
    assert auth.login(email="root@example.com", password="my own at last",
                      client=app.test_client()).location.endswith("/admin/")


def test_ensure_admin_into_a_log_makes_no_admin_and_says_how_to(app, runner):
    # Heroku's postdeploy (app.json) runs it with its output kept in the deploy log
    with app.app_context():
        logged = runner.invoke(args=["ensure-admin"])
        assert db.session.scalar(sa.select(sa.func.count()).select_from(User)) == 0
        printed = runner.invoke(args=["ensure-admin", "--print-password"])
        assert db.session.scalar(sa.select(User.must_change_password)) is True
        again = runner.invoke(args=["ensure-admin"])
    assert logged.exit_code == 0 and "password" not in " ".join(boxed(logged.output))
    assert "heroku run flask --app webapp ensure-admin" in logged.output
    assert printed.exit_code == 0 and boxed(printed.output)[1].startswith("One-time password: ")
    assert "exists already" in again.output


def test_ensure_admin_names_the_running_server_make_run_waited_for(app, runner):
    """`make run` starts the server, waits until it answers, then passes its address."""
    with app.app_context():
        printed = runner.invoke(args=["ensure-admin", "--print-password",
                                      "--url", "http://localhost:8000/"])
    box = boxed(printed.output)
    assert printed.exit_code == 0 and box[0] == "Soloist is running: open http://localhost:8000/login"
    assert box[2].startswith("One-time password: ") and printed.output.rstrip().endswith("┘")


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
    assert response.status_code == 429 and response.headers["Retry-After"].isdigit()
    assert "Too many wrong passwords" in text(response)
