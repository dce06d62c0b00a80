"""Every answer that shows a secret says Cache-Control: no-store."""

from tests.support import add_user, post_form, text


def no_store(response) -> bool:
    return response.headers.get("Cache-Control") == "no-store"


def test_the_webhooks_page_with_a_fresh_secret_is_no_store(app, auth):
    page = auth.client("admin").get("/admin/webhooks/")
    assert "whsec_" in text(page) and no_store(page)


def test_a_refused_webhook_form_echoing_the_secret_is_no_store(app, auth):
    client = auth.client("admin")
    refused = post_form(client, "/admin/webhooks/", {"url": "not a url",
                                                      "secret": "whsec_" + "A" * 40,
                                                      "events": "post.published"})
    assert refused.status_code == 422 and "whsec_" + "A" * 40 in text(refused)
    assert no_store(refused)


def test_the_apis_new_webhook_with_its_secret_is_no_store(app, api):
    app.config["WEBHOOK_ALLOW_PRIVATE"] = True  # no name to resolve
    made = api("POST", "/api/webhooks", role="admin",
               body={"url": "http://127.0.0.1:9/hook", "events": ["post.published"]})
    assert made.status_code == 201 and made.get_json()["secret"].startswith("whsec_")
    assert no_store(made)


def test_a_new_api_token_is_no_store(app, auth):
    client = auth.client("editor")
    made = post_form(client, "/settings/tokens", {"label": "deploy", "days": "30"})
    assert made.status_code == 201 and "sol_" in text(made)
    assert no_store(made)


def test_invitation_and_reset_one_time_passwords_are_no_store(app, auth):
    client = auth.client("admin")
    invited = post_form(client, "/admin/users/", {"email": "new@example.com", "role": "editor"})
    assert invited.status_code == 201 and no_store(invited)
    user_id = add_user(app, "old@example.com")
    reset = post_form(client, f"/admin/users/{user_id}/reset-password")
    assert reset.status_code == 200 and no_store(reset)
