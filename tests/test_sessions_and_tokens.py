"""Sessions and API tokens end when they should: sign-out, password changes, resets,
deactivation, expiry, and admins ending them."""

from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.harness.support import PASSWORD, add_user, post_form, text
from webapp.accounts.tokens import create_token
from webapp.extensions import db
from webapp.models import ApiToken, User, UserSession, utcnow

NEW_PASSWORD = "a much better one"


def token_for(app, email: str, days: int | None = None) -> str:
    """Return a new API token of the user with email."""
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == email))
        return create_token(user, "script", days)


def works(app, token: str) -> bool:
    """Return whether token reads the API."""
    answer = app.test_client().get("/api/leaders", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code in (200, 401), answer.status_code
    return answer.status_code == 200


def signed_in(client) -> bool:
    return client.get("/admin/").status_code == 200


def session_ids(app, email: str) -> list[int]:
    with app.app_context():
        return list(db.session.scalars(
            sa.select(UserSession.id).join(User).where(User.email == email)
            .order_by(UserSession.id)))


# Sign-out ------------------------------------------------------------------------------


def test_signing_out_ends_the_session_for_every_copy_of_the_cookie(app, auth):
    browser = auth.client(email="ada@example.com")
    copied = browser.get_cookie("session").value
    assert auth.logout(browser).status_code == 303
    thief = app.test_client()
    thief.set_cookie("session", copied)
    assert thief.get("/admin/").status_code == 302
    with app.app_context():
        assert db.session.scalar(sa.select(UserSession.ended_why)) == "signed out"


def test_a_cookie_forged_with_the_secret_key_opens_nothing(app, auth):
    # the key signs a cookie, but a session's secret cannot be guessed (a version 1 could)
    admin_id = add_user(app, "root@example.com", "admin")
    auth.client(email="root@example.com")
    serializer = app.session_interface.get_signing_serializer(app)
    for forged_id in (f"{admin_id}:1", f"{admin_id}", "x" * 43):
        forger = app.test_client()
        forger.set_cookie("session", serializer.dumps({"_user_id": forged_id, "_fresh": True}))
        assert forger.get("/admin/").status_code == 302


def idle_too_long(app) -> dict:
    return {"last_seen_at": utcnow() - timedelta(hours=app.config["SESSION_IDLE_HOURS"] + 1)}


def older_than_its_lifetime(app) -> dict:
    return {"created_at": utcnow() - timedelta(days=app.config["SESSION_MAX_DAYS"] + 1)}


@pytest.mark.parametrize("aged", [idle_too_long, older_than_its_lifetime])
def test_a_session_ends_when_idle_too_long_or_older_than_its_lifetime(app, auth, aged):
    browser = auth.client(email="ada@example.com")
    with app.app_context():
        db.session.execute(sa.update(UserSession).values(**aged(app)))
        db.session.commit()
    assert browser.get("/admin/").status_code == 302
    with app.app_context():
        assert db.session.scalar(sa.select(UserSession.ended_why)) == "expired"


def age_sessions(app, email: str, **ago: timedelta) -> None:
    """Move the user's sessions back in time: last_seen_at and created_at this long ago."""
    with app.app_context():
        user_id = db.session.scalar(sa.select(User.id).where(User.email == email))
        db.session.execute(sa.update(UserSession).where(UserSession.user_id == user_id)
                           .values({k: utcnow() - v for k, v in ago.items()}))
        db.session.commit()


@pytest.mark.parametrize("ago, admin_stays, editor_stays", [
    ({"last_seen_at": timedelta(minutes=29)}, True, True),
    ({"last_seen_at": timedelta(minutes=31)}, False, True),  # ASVS L2: 30 min idle
    ({"last_seen_at": timedelta(hours=8, minutes=1)}, False, False),  # an editor's day
    ({"created_at": timedelta(hours=11, minutes=59)}, True, True),
    ({"created_at": timedelta(hours=12, minutes=1)}, False, True),  # ASVS L2: 12 h in all
    ({"created_at": timedelta(days=7, minutes=1)}, False, False),  # an editor's week
])
def test_an_admin_session_ends_at_asvs_level_2_and_an_editors_after_a_day_or_a_week(
        app, auth, ago, admin_stays, editor_stays):
    admin, editor = auth.client("admin"), auth.client("editor")
    for email in ("admin@example.com", "editor@example.com"):
        age_sessions(app, email, **ago)
    assert (signed_in(admin), signed_in(editor)) == (admin_stays, editor_stays)


def test_an_editor_made_admin_keeps_a_session_only_within_an_admins_limits(app, auth):
    editor = auth.client("editor")
    age_sessions(app, "editor@example.com", last_seen_at=timedelta(hours=1))
    with app.app_context():
        db.session.execute(sa.update(User).values(role="admin"))
        db.session.commit()
    assert not signed_in(editor)


def test_the_limits_are_settings(app, auth):
    app.config.update(ADMIN_SESSION_IDLE_MINUTES=120, SESSION_IDLE_HOURS=0.25)
    admin, editor = auth.client("admin"), auth.client("editor")
    for email in ("admin@example.com", "editor@example.com"):
        age_sessions(app, email, last_seen_at=timedelta(minutes=60))
    assert (signed_in(admin), signed_in(editor)) == (True, False)


POLL = {"HX-Request": "true", "X-Soloist-Poll": "1"}  # what soloist.js sends on a poll


def last_seen(app) -> timedelta:
    with app.app_context():
        return utcnow() - db.session.scalar(sa.select(UserSession.last_seen_at))


def test_a_page_polling_by_itself_does_not_hold_off_the_idle_timeout(app, auth):
    admin = auth.client("admin")
    age_sessions(app, "admin@example.com", last_seen_at=timedelta(minutes=29))
    assert admin.get("/admin/live", headers=POLL).status_code == 200  # still signed in
    assert last_seen(app) > timedelta(minutes=28)  # but the poll is not use
    age_sessions(app, "admin@example.com", last_seen_at=timedelta(minutes=31))
    assert admin.get("/admin/live", headers=POLL).status_code == 401  # "connection lost"
    assert not signed_in(admin)


def test_what_the_user_does_holds_it_off(app, auth):
    admin = auth.client("admin")
    age_sessions(app, "admin@example.com", last_seen_at=timedelta(minutes=29))
    assert admin.get("/admin/live", headers={"HX-Request": "true"}).status_code == 200
    assert last_seen(app) < timedelta(minutes=1)


# Password changes, resets, deactivation ------------------------------------------------


def change_password(client):
    return post_form(client, "/settings", {
        "timezone": "UTC", "current_password": PASSWORD,
        "new_password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD})


def test_changing_ones_password_revokes_ones_api_tokens(app, auth):
    # else the old bearer token would still read and write
    browser = auth.client(email="ada@example.com")
    token = token_for(app, "ada@example.com")
    assert works(app, token)
    assert change_password(browser).status_code == 303
    assert not works(app, token)
    assert signed_in(browser)  # the session that changed it stays
    page = text(browser.get("/settings"))
    assert "revoked" in page and "password changed" in page


def test_an_admins_reset_ends_the_users_sessions_and_tokens(app, auth):
    admin = auth.client("admin")
    editor_id = add_user(app, "ed@example.com", "editor")
    editor = auth.client(email="ed@example.com")
    token = token_for(app, "ed@example.com")
    assert post_form(admin, f"/admin/users/{editor_id}/reset-password").status_code == 200
    assert not signed_in(editor) and not works(app, token)


def test_deactivating_then_reactivating_leaves_old_tokens_and_sessions_ended(app, auth):
    admin = auth.client("admin")
    editor_id = add_user(app, "ed@example.com", "editor")
    editor = auth.client(email="ed@example.com")
    token = token_for(app, "ed@example.com")
    assert post_form(admin, f"/admin/users/{editor_id}/deactivate").status_code == 303
    assert post_form(admin, f"/admin/users/{editor_id}/activate").status_code == 303
    assert not works(app, token)
    assert not signed_in(editor)


# Tokens in Settings --------------------------------------------------------------------


def test_a_user_creates_a_token_in_settings_sees_it_once_and_sees_it_used(app, auth):
    browser = auth.client(email="ada@example.com")
    created = post_form(browser, "/settings/tokens", {"label": "deploy script", "days": "30"})
    assert created.status_code == 201 and created.headers["Cache-Control"] == "no-store"
    token = text(created).split('class="api-token">')[1].split("<")[0]
    assert token.startswith("sol_")
    listed = text(browser.get("/settings"))
    assert token not in listed and "deploy script" in listed and "never" in listed
    assert works(app, token)
    assert "never</td>" not in text(browser.get("/settings")).split("deploy script")[1][:400]
    with app.app_context():
        expires = db.session.scalar(sa.select(ApiToken.expires_at))
    assert timedelta(days=29) < expires - utcnow() <= timedelta(days=30)


def test_a_token_without_a_label_is_refused_next_to_the_field(app, auth):
    browser = auth.client(email="ada@example.com")
    refused = post_form(browser, "/settings/tokens", {"label": "  ", "days": "7"})
    assert refused.status_code == 422
    assert 'id="e-label"' in text(refused) and 'id="e-days"' in text(refused)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(ApiToken)) == 0


def test_a_user_revokes_their_own_token_but_not_someone_elses(app, auth):
    browser = auth.client(email="ada@example.com")
    mine, theirs = token_for(app, "ada@example.com"), None
    add_user(app, "bob@example.com")
    theirs = token_for(app, "bob@example.com")
    with app.app_context():
        ids = dict(db.session.execute(sa.select(ApiToken.user_id, ApiToken.id)).all())
        ada = db.session.scalar(sa.select(User.id).where(User.email == "ada@example.com"))
        bob = db.session.scalar(sa.select(User.id).where(User.email == "bob@example.com"))
    assert post_form(browser, f"/settings/tokens/{ids[bob]}/revoke").status_code == 404
    assert works(app, theirs)
    assert post_form(browser, f"/settings/tokens/{ids[ada]}/revoke").status_code == 303
    assert not works(app, mine)


def test_an_expired_token_is_refused_and_shown_as_expired(app, auth):
    browser = auth.client(email="ada@example.com")
    token = token_for(app, "ada@example.com", days=1)
    assert works(app, token)
    with app.app_context():
        db.session.execute(sa.update(ApiToken).values(expires_at=utcnow() - timedelta(1)))
        db.session.commit()
    assert not works(app, token)
    assert '<span class="badge ended">expired</span>' in text(browser.get("/settings"))


def test_a_user_signs_out_another_of_their_sessions_from_settings(app, auth):
    laptop = auth.client(email="ada@example.com")
    phone = auth.client(email="ada@example.com")
    laptop_session, phone_session = session_ids(app, "ada@example.com")
    page = text(laptop.get("/settings"))
    assert "this browser" in page
    assert post_form(laptop, f"/settings/sessions/{laptop_session}/end").status_code == 409
    assert post_form(laptop, f"/settings/sessions/{phone_session}/end").status_code == 303
    assert not signed_in(phone) and signed_in(laptop)


# Admins see and end access -------------------------------------------------------------


def test_an_admin_sees_a_users_sessions_and_tokens_and_ends_them(app, auth):
    admin = auth.client("admin")
    editor_id = add_user(app, "ed@example.com", "editor")
    laptop, phone = auth.client(email="ed@example.com"), auth.client(email="ed@example.com")
    token = token_for(app, "ed@example.com")
    page = text(admin.get(f"/admin/users/{editor_id}"))
    assert page.count('class="badge ok">live') == 3 and "script" in page
    # the browsers the editor trusted are told as the editor's, not the admin's own
    assert "They are forgotten with ed@example.com's sessions" in page
    assert "your sessions" not in page
    first, _ = session_ids(app, "ed@example.com")
    with app.app_context():
        token_id = db.session.scalar(sa.select(ApiToken.id))
    assert post_form(admin, f"/admin/users/{editor_id}/sessions/{first}/end").status_code == 303
    assert not signed_in(laptop) and signed_in(phone)
    assert post_form(admin, f"/admin/users/{editor_id}/tokens/{token_id}/revoke"
                     ).status_code == 303
    assert not works(app, token)
    assert post_form(admin, f"/admin/users/{editor_id}/sign-out-everywhere").status_code == 303
    assert not signed_in(phone)
    assert "ended by an admin" in text(admin.get(f"/admin/users/{editor_id}"))


@pytest.mark.parametrize("role", ["editor", "viewer"])
def test_only_admins_see_or_end_other_users_access(app, auth, role):
    target_id = add_user(app, "ed@example.com", "editor")
    victim = auth.client(email="ed@example.com")
    (victim_session,) = session_ids(app, "ed@example.com")
    someone = auth.client(role)
    assert someone.get(f"/admin/users/{target_id}").status_code == 403
    for path in (f"sessions/{victim_session}/end", "sign-out-everywhere"):
        assert post_form(someone, f"/admin/users/{target_id}/{path}").status_code == 403
    assert post_form(someone, f"/settings/sessions/{victim_session}/end").status_code == 404
    assert signed_in(victim)


def test_an_admin_ending_a_session_of_another_user_by_id_gets_404(app, auth):
    admin = auth.client("admin")
    editor_id = add_user(app, "ed@example.com", "editor")
    (admin_session,) = session_ids(app, "admin@example.com")
    answer = post_form(admin, f"/admin/users/{editor_id}/sessions/{admin_session}/end")
    assert answer.status_code == 404
    assert post_form(admin, f"/admin/users/{editor_id}/sessions/99999999999/end"
                     ).status_code == 404
    assert signed_in(admin)
