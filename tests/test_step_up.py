"""Step-up: every dangerous route asks again for a proof older than STEP_UP_MINUTES, keeps
what was typed across the prompt, and goes through once the password (or a code) is given;
the API's dangerous routes take only a token made for them.

The registry is webapp.accounts.stepup: @step_up marks a dangerous view, HARMLESS names
every other route that changes something, with why. test_every_state_changing_route_is_
dangerous_or_declared_harmless walks app.url_map, so a new route cannot forget to say.
DANGEROUS below is the test's table of forms: a route added with @step_up and not listed
here fails test_every_guarded_route_is_in_the_table, so a new dangerous route is tested too.
"""

import json
import time

import pyotp
import pytest
import sqlalchemy as sa

from tests.harness.support import PASSWORD, add_user, post_form, text
from webapp.accounts.stepup import HARMLESS, dangerous_endpoints
from webapp.accounts.tokens import create_token
from webapp.extensions import db
from webapp.models import ApiToken, AuditEvent, Freeze, User, WebhookEndpoint

# endpoint -> (path, form); {user} and {endpoint} are filled in
DANGEROUS = {
    "users.create": ("/admin/users/", {"email": "new-admin@example.com", "role": "admin"}),
    "users.activate": ("/admin/users/{off}/activate", {}),
    "auth.create_api_token": ("/settings/tokens", {"label": "deploy", "days": "30"}),
    "users.reset": ("/admin/users/{user}/reset-password", {}),
    "users.role": ("/admin/users/{user}/role", {"role": "viewer"}),
    "users.deactivate": ("/admin/users/{user}/deactivate", {}),
    "users.everywhere": ("/admin/users/{user}/sign-out-everywhere", {}),
    "users.two_factor_policy": ("/admin/users/two-factor-policy",
                                {"two_factor_required": "nobody"}),
    "users.reset_two_factor": ("/admin/users/{user}/two-factor/reset", {}),
    "webhooks.create": ("/admin/webhooks/", {"url": "https://hooks.example.com/in",
                                             "events": "post.published",
                                             "secret": "whsec_" + "A" * 40}),
    "webhooks.switch": ("/admin/webhooks/{endpoint}/disable", {}),
    "freezes.create": ("/admin/freeze/", {"scope": "publishing", "on_resume": "hold",
                                          "reason": "embargo until noon"}),
    "freezes.resume": ("/admin/freeze/publishing/resume", {}),
    "status.act": ("/status/publish/evict", {"holder": "soloist:x:1:abc"}),
    "two_factor.start": ("/settings/two-factor/start", {}),
    "passkeys.confirm": ("/settings/passkeys/confirm", {}),
    "passkeys.remove": ("/settings/passkeys/999/remove", {}),
}


NO_CHANGE_HERE = {"status.act", "passkeys.remove", "passkeys.confirm"}


API_DANGEROUS = {"api.create_webhook": (
    "POST", "/api/webhooks", {"url": "https://hooks.example.com/in", "events": ["post.published"]})}
CHANGING = {"POST", "PUT", "PATCH", "DELETE"}


def test_every_guarded_route_is_in_the_table(app):
    assert set(DANGEROUS) | set(API_DANGEROUS) == dangerous_endpoints(app)


def test_every_state_changing_route_is_dangerous_or_declared_harmless(app):
    changing = {rule.endpoint for rule in app.url_map.iter_rules() if rule.methods & CHANGING}
    assert {"auth.login", "api.create_post", "api.delete_media"} <= changing  # web and API
    dangerous = dangerous_endpoints(app)
    unsaid = sorted(changing - dangerous - set(HARMLESS))
    assert not unsaid, (
        f"{unsaid} change something but are neither marked @step_up (dangerous: a fresh "
        "proof first) nor in HARMLESS in webapp/accounts/stepup.py with the reason they need "
        "none")
    assert sorted(dangerous & set(HARMLESS)) == []  # one or the other
    assert sorted(set(HARMLESS) - changing) == []  # no name left of a route that is gone
    assert all(len(why) > 10 for why in HARMLESS.values())  # each says why


def _stale(client) -> None:
    """Make the session's last proof 11 minutes old, as an unattended computer's is."""
    with client.session_transaction() as sess:
        sess["proved_at"] = time.time() - 11 * 60


def _audit_count(app) -> int:
    with app.app_context():
        return db.session.scalar(sa.select(sa.func.count()).select_from(AuditEvent))


@pytest.fixture
def targets(app):
    """A user to act on, a deactivated one, and a webhook endpoint."""
    user_id = add_user(app, "ed@example.com", "editor")
    off = add_user(app, "gone@example.com", "editor", active=False)
    with app.app_context():
        endpoint = WebhookEndpoint(url="https://old.example.com/in", events=["post.published"],
                                   secret="whsec_" + "B" * 40, active=True)
        db.session.add(endpoint)
        db.session.commit()
        return {"user": user_id, "endpoint": endpoint.id, "off": off}


@pytest.mark.parametrize("endpoint", sorted(DANGEROUS))
def test_a_stale_session_is_asked_again_and_the_form_survives_the_prompt(app, auth, targets,
                                                                         endpoint):
    path, form = DANGEROUS[endpoint]
    path = path.format(**targets)
    admin = auth.client("admin")
    if endpoint == "freezes.resume":  # something to resume
        assert post_form(admin, "/admin/freeze/", DANGEROUS["freezes.create"][1]
                         ).status_code == 303
    _stale(admin)
    before = _audit_count(app)
    prompt = post_form(admin, path, form)
    assert prompt.status_code == 401 and "Confirm it is you" in text(prompt)
    assert _audit_count(app) == before  # nothing changed
    for name, value in form.items():  # what was typed rides along
        assert f'name="{name}" value="{value}"' in text(prompt)
    wrong = post_form(admin, path, {**form, "step_up_password": "not it"})
    assert wrong.status_code == 401 and "did not match" in text(wrong)
    mark = _audit_count(app)
    done = post_form(admin, path, {**form, "step_up_password": PASSWORD})
    assert done.status_code in (200, 201, 303, 409, 422), text(done)[:500]
    assert "Confirm it is you" not in text(done)
    with app.app_context():  # each audit row of the change says how it was proved
        rows = db.session.execute(sa.select(AuditEvent.action, AuditEvent.detail)
                                  .order_by(AuditEvent.id).offset(mark)).all()
    proofs = [json.loads(detail) for action, detail in rows if action.startswith("auth.")]
    assert proofs == [{"for": "step-up", "method": "password", "device": 1}]  # the decision
    details = [json.loads(detail) for action, detail in rows if not action.startswith("auth.")]
    assert all(d.get("proof") == "password just now" for d in details), details
    # a change that went through is audited (here the evict names no real holder and the
    # passkey to remove does not exist: refused; confirming only proves the session)
    assert details or done.status_code in (409, 422) or endpoint in NO_CHANGE_HERE
    again = post_form(admin, "/admin/users/{user}/role".format(**targets), {"role": "editor"})
    assert again.status_code == 303  # proved just now: no second prompt


def test_a_fresh_session_is_not_asked_and_a_viewer_is_refused_before_any_prompt(
        app, auth, targets):
    admin = auth.client("admin")
    assert post_form(admin, f"/admin/users/{targets['user']}/role",
                     {"role": "viewer"}).status_code == 303
    editor = auth.client("editor", email="other@example.com")
    _stale(editor)
    assert post_form(editor, f"/admin/users/{targets['user']}/role",
                     {"role": "admin"}).status_code == 403
    with app.app_context():
        assert db.session.get(User, targets["user"]).role == "viewer"


def test_with_two_factor_on_a_code_from_the_app_also_proves_it(app, auth, targets):
    admin = auth.client("admin")
    assert post_form(admin, "/settings/two-factor/start").status_code == 303
    with app.test_request_context():
        from webapp.accounts import totp

        secret = totp.pending_secret(db.session.scalar(
            sa.select(User).where(User.email == "admin@example.com")))
    assert post_form(admin, "/settings/two-factor/confirm",
                     {"code": pyotp.TOTP(secret).now()}).status_code == 200
    _stale(admin)
    form = {"scope": "publishing", "on_resume": "hold", "reason": "embargo"}
    done = post_form(admin, "/admin/freeze/", {
        **form, "step_up_code": pyotp.TOTP(secret).at(time.time() + 30)})
    assert done.status_code == 303
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Freeze)) == 1


HOOK = {"url": "http://127.0.0.1:9/hook", "events": ["post.published"]}


def _webhooks(app) -> int:
    with app.app_context():
        return db.session.scalar(sa.select(sa.func.count()).select_from(WebhookEndpoint))


def test_an_everyday_token_may_not_add_a_webhook_and_one_made_for_it_may(app, api):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True  # no name to resolve
    with app.app_context():
        admin = db.session.scalar(sa.select(User).where(User.email == "admin@example.com"))
        everyday = create_token(admin, "deploy script")
    before = _audit_count(app)
    refused = api("POST", "/api/webhooks", token=everyday, body=HOOK)
    assert refused.status_code == 403
    assert "made for dangerous actions" in refused.get_json()["detail"]
    assert _webhooks(app) == 0 and _audit_count(app) == before  # nothing changed
    assert api("GET", "/api/webhooks", token=everyday).status_code == 200  # reading is fine
    assert api("POST", "/api/posts", token=everyday, body={"title": "Hi", "body": "x"}
               ).status_code == 201  # and so is everyday work
    made = api("POST", "/api/webhooks", role="admin", body=HOOK)  # made for dangerous actions
    assert made.status_code == 201
    with app.app_context():
        detail = json.loads(db.session.scalar(sa.select(AuditEvent.detail).where(
            AuditEvent.action == "webhook.create")))
    assert detail["proof"] == "a token made for dangerous actions"


def test_a_token_made_for_dangerous_actions_still_acts_with_its_users_role(app, api):
    with app.app_context():
        editor = db.session.scalar(sa.select(User).where(User.email == "editor@example.com"))
        token = create_token(editor, "too much", dangerous=True)
    refused = api("POST", "/api/webhooks", token=token, body=HOOK)
    assert refused.status_code == 403 and "admin role" in refused.get_json()["detail"]


def test_a_token_for_dangerous_actions_is_asked_for_and_shown_as_such(app, auth):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True
    admin = auth.client("admin")
    made = post_form(admin, "/settings/tokens", {"label": "webhooks script", "days": "30",
                                                  "dangerous_actions": "1"})
    assert made.status_code == 201 and "dangerous actions included" in text(made)
    token = text(made).split('<code class="api-token">')[1].split("<")[0]
    assert "dangerous actions</span>" in text(admin.get("/settings"))
    with app.app_context():
        assert db.session.scalar(sa.select(ApiToken.dangerous_actions)) is True
    answer = app.test_client().post("/api/webhooks", json=HOOK,
                                    headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 201, answer.get_json()
