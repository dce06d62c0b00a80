"""User admin: invite with a one-time password, change roles, deactivate; keep an admin."""

import threading

import psycopg
import pytest
import sqlalchemy as sa

from tests.harness.cluster import wait_for
from tests.harness.support import PASSWORD, add_user, csrf_token, post_form, text
from webapp.extensions import db
from webapp.models import User


def user(app, email: str) -> User:
    """Return the stored user with email (detached)."""
    with app.app_context():
        found = db.session.scalar(sa.select(User).where(User.email == email))
        db.session.expunge(found)
        return found


def one_time_password(page: str) -> str:
    return page.split('id="one-time-password">')[1].split("<")[0]


def test_an_admin_invites_a_user_who_sees_the_password_once_and_must_change_it(app, auth):
    admin = auth.client("admin")
    response = post_form(admin, "/admin/users/", {"email": " New@Example.com", "role": "viewer"})
    # shown in the answer itself, kept by no cache and in no cookie
    assert response.status_code == 201 and response.headers["Cache-Control"] == "no-store"
    shown = text(response)
    password = one_time_password(shown)
    assert "new@example.com" in shown and len(password) >= 12
    assert password not in text(admin.get("/admin/users/"))  # only once
    created = user(app, "new@example.com")
    assert (created.role, created.active, created.must_change_password, created.timezone) == (
        "viewer", True, True, "")
    newcomer = app.test_client()
    assert auth.login(email="new@example.com", password=password,
                      client=newcomer).location == "/settings"
    assert newcomer.get("/admin/").location == "/settings"
    # read off a screen and typed: no 0/O or 1/l/I; copyable, with the link to sign in at
    assert not set(password) & set("0O1lI") and len(password.replace("-", "")) == 16
    assert 'data-copy="#one-time-password"' in shown and 'id="sign-in-link"' in shown
    # they choose their own without typing the one-time one again, and go on to the work
    setup = text(newcomer.get("/settings"))
    assert 'name="current_password"' not in setup
    done = post_form(newcomer, "/settings", {"timezone": "UTC", "new_password": "my own words",
                                             "confirm_password": "my own words"})
    assert done.status_code == 303 and done.location == "/admin/"
    assert newcomer.get("/admin/").status_code == 200


def test_a_bad_or_taken_email_is_refused_next_to_the_field_and_kept(app, auth):
    admin = auth.client("admin")
    bad = post_form(admin, "/admin/users/", {"email": "not-an-email", "role": "editor"})
    assert bad.status_code == 422
    assert 'id="e-email"' in text(bad) and 'value="not-an-email"' in text(bad)
    taken = post_form(admin, "/admin/users/", {"email": "admin@example.com", "role": "editor"})
    assert taken.status_code == 422 and "exists already" in text(taken)
    role = post_form(admin, "/admin/users/", {"email": "x@example.com", "role": "owner"})
    assert role.status_code == 422 and 'id="e-role"' in text(role)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(User)) == 1


def test_an_admin_changes_a_role_and_it_applies_at_the_next_request(app, auth):
    admin = auth.client("admin")
    editor_id = add_user(app, "ed@example.com", "editor")
    editor = auth.client(email="ed@example.com")
    assert editor.get("/admin/posts/").status_code == 200
    response = post_form(admin, f"/admin/users/{editor_id}/role", {"role": "viewer"})
    assert response.status_code == 303
    assert "ed@example.com is now viewer." in text(admin.get("/admin/users/"))
    assert editor.get("/admin/posts/").status_code == 403


def test_the_last_active_admin_can_be_neither_demoted_nor_deactivated(app, auth):
    admin = auth.client("admin")
    admin_id = user(app, "admin@example.com").id
    add_user(app, "former@example.com", "admin", active=False)  # an inactive admin does not count
    demoted = post_form(admin, f"/admin/users/{admin_id}/role", {"role": "editor"})
    assert demoted.status_code == 409 and "last active admin" in text(demoted)
    deactivated = post_form(admin, f"/admin/users/{admin_id}/deactivate")
    assert deactivated.status_code == 409 and "last active admin" in text(deactivated)
    stored = user(app, "admin@example.com")
    assert (stored.role, stored.active) == ("admin", True)


def test_with_two_admins_one_may_step_down(app, auth):
    admin = auth.client("admin")
    other_id = add_user(app, "other@example.com", "admin")
    assert post_form(admin, f"/admin/users/{other_id}/role", {"role": "editor"}).status_code == 303
    assert user(app, "other@example.com").role == "editor"


def test_deactivating_signs_the_user_out_and_activating_lets_them_back(app, auth):
    admin = auth.client("admin")
    editor_id = add_user(app, "ed@example.com", "editor")
    editor = auth.client(email="ed@example.com")
    assert post_form(admin, f"/admin/users/{editor_id}/deactivate").status_code == 303
    assert editor.get("/admin/").status_code == 302
    assert auth.login(email="ed@example.com", client=app.test_client()).status_code == 401
    assert post_form(admin, f"/admin/users/{editor_id}/activate").status_code == 303
    assert auth.login(email="ed@example.com", client=app.test_client()).status_code == 302


def test_a_password_reset_gives_a_new_one_time_password_and_ends_sessions(app, auth):
    admin = auth.client("admin")
    editor_id = add_user(app, "ed@example.com", "editor")
    editor = auth.client(email="ed@example.com")
    reset = post_form(admin, f"/admin/users/{editor_id}/reset-password")
    assert reset.status_code == 200 and reset.headers["Cache-Control"] == "no-store"
    password = one_time_password(text(reset))
    assert editor.get("/admin/").status_code == 302
    assert auth.login(email="ed@example.com", password=PASSWORD,
                      client=app.test_client()).status_code == 401
    assert auth.login(email="ed@example.com", password=password,
                      client=app.test_client()).location == "/settings"


def test_two_admins_demoting_each_other_at_once_leave_one_admin(app, auth, pg_url):
    first_id, second_id = add_user(app, "a1@example.com", "admin"), add_user(
        app, "a2@example.com", "admin")
    clients = []
    for email in ("a1@example.com", "a2@example.com"):
        client = auth.client(email=email)
        clients.append((client, {"csrf_token": csrf_token(client)}))
    results = {}
    with psycopg.connect(pg_url) as blocker:  # hold the admins' rows so both requests queue up
        blocker.execute("SELECT id FROM users WHERE role = 'admin' FOR UPDATE")

        def demote(index: int, target: int) -> None:
            client, data = clients[index]
            results[index] = client.post(f"/admin/users/{target}/role",
                                         data={**data, "role": "editor"}).status_code

        threads = [threading.Thread(target=demote, args=(0, second_id)),
                   threading.Thread(target=demote, args=(1, first_id))]
        for thread in threads:
            thread.start()
        with psycopg.connect(pg_url, autocommit=True) as observer:
            wait_for(lambda: blocked_sessions(observer) >= 2, 20,
                     "both demotions to wait on the lock")
        blocker.rollback()
    for thread in threads:
        thread.join(20)
    assert sorted(results.values()) == [303, 409]
    roles = {user(app, "a1@example.com").role, user(app, "a2@example.com").role}
    assert roles == {"admin", "editor"}


def blocked_sessions(conn) -> int:
    return conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()").fetchone()[0]


def test_a_one_time_password_never_travels_in_the_session_cookie(app, auth):
    admin = auth.client("admin")
    created = post_form(admin, "/admin/users/", {"email": "new@example.com", "role": "editor"})
    password = one_time_password(text(created))
    # the cookie is signed, not encrypted: whoever holds it could read what it carries
    with admin.session_transaction() as session:
        assert password not in repr(dict(session))
    assert password not in text(admin.get("/admin/users/"))


LOOK_ALIKES = {
    "zero-width space": ("acc-admin@example.com\u200b", "invisible or direction", "U+200B"),
    "right-to-left override": ("acc-\u202eadmin@example.com", "invisible or direction",
                               "U+202E"),
    "Cyrillic і": ("acc-adm\u0456n@example.com", "mixes Cyrillic and Latin letters", "і"),
}


def test_look_alike_addresses_of_an_admin_are_refused_and_one_spelling_is_one_account(
        app, auth):
    """An outside sweep made three: each showed as the real admin in the users list."""
    admin = auth.client("admin")
    add_user(app, "acc-admin@example.com", "admin")
    for name, (email, reason, detail) in LOOK_ALIKES.items():
        refused = post_form(admin, "/admin/users/", {"email": email, "role": "editor"})
        assert refused.status_code == 422, name
        assert reason in text(refused) and detail in text(refused), name
    # NFKC: a full-width spelling is the same address as the plain one, so it is taken
    wide = post_form(admin, "/admin/users/", {"email": "ＡＣＣ-admin@example.com",
                                              "role": "editor"})
    assert wide.status_code == 422 and "exists already" in text(wide)
    made = post_form(admin, "/admin/users/", {"email": "Zoë@Example.com", "role": "editor"})
    assert made.status_code == 201  # one script, however far from ASCII
    assert user(app, "zoë@example.com").role == "editor"
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(User)) == 3


def test_an_address_stored_before_the_rules_shows_its_hidden_characters(app, auth):
    with app.app_context():  # as a row written before addresses were checked
        db.session.add(User(email="acc-admin@example.com\u200b", role="editor", active=True,
                            timezone="", password_hash="x"))
        db.session.commit()
    page = text(auth.client("admin").get("/admin/users/"))
    assert "acc-admin@example.comU+200B" in page and "\u200b" not in page


def test_the_sessions_page_shows_a_browsers_name_as_it_sent_it(app, auth):
    """A server hands a UTF-8 header over as Latin-1 text (PEP 3333): it showed mojibake."""
    sent = "Navigateur Zoë/1.0 ✓"
    client = app.test_client()
    signed_in = auth.login("editor", client=client, headers={
        "User-Agent": sent.encode("utf-8").decode("latin-1")})
    assert signed_in.status_code == 302
    page = text(client.get("/settings"))
    assert sent in page and "Ã«" not in page


MAC_CHROME = ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 "
              "(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36")


def test_sessions_name_the_browser_as_people_say_it_with_the_header_in_a_title(app, auth):
    """"Chrome on macOS", not a raw User-Agent header (issue 37, finding 8)."""
    client = app.test_client()
    assert auth.login("editor", client=client,
                      headers={"User-Agent": MAC_CHROME}).status_code == 302
    page = text(client.get("/settings"))
    assert f'<span title="{MAC_CHROME}">Chrome on macOS</span>' in page
    assert page.count(MAC_CHROME) == page.count(f'title="{MAC_CHROME}"')  # only in titles


@pytest.mark.parametrize(("header", "said"), [
    (MAC_CHROME, "Chrome on macOS"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, "
     "like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", "Safari on iPhone"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", "Edge on Windows"),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
     "Firefox on Linux"),
    ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/131.0.6778.81 Mobile Safari/537.36", "Chrome on Android"),
    ("curl/8.5.0", "curl"), ("", "—"), ("Ada's laptop", "Ada's laptop"),
    ("x" * 60, "x" * 39 + "…"),
])
def test_a_browser_is_named_from_its_header(header, said):
    from webapp.accounts.browsers import browser_name

    assert browser_name(header) == said


def test_addresses_in_one_script_are_welcome_whatever_the_script():
    from webapp.accounts.emails import clean_email

    for email in ("zoë@example.com", "δοκιμή@example.com", "テスト@example.jp",
                  "日本語のテスト@example.jp", "ада@пример.рф"):
        assert clean_email(email) == email
    assert clean_email(" ＡＣＣ-Admin@Example.com ") == "acc-admin@example.com"


def test_a_one_time_password_opens_one_session_only(app, auth):
    # read off a screen or a shoulder, it must not let a second person in while the first
    # is choosing their own (ASVS V2.3.1: expires once used); that session finishes the setup
    admin = auth.client("admin")
    password = one_time_password(text(post_form(admin, "/admin/users/", {
        "email": "new@example.com", "role": "editor"})))
    newcomer = app.test_client()
    assert auth.login(email="new@example.com", password=password,
                      client=newcomer).location == "/settings"
    second = auth.login(email="new@example.com", password=password, client=app.test_client())
    assert second.status_code == 401 and newcomer.get("/admin/").location == "/settings"
    done = post_form(newcomer, "/settings", {"timezone": "UTC", "new_password": "my own words",
                                             "confirm_password": "my own words"})
    assert done.status_code == 303 and newcomer.get("/admin/").status_code == 200
