"""Every answer that shows a secret says Cache-Control: no-store (so does every signed-in
answer: tests/test_authz_matrix.py walks them), while the public site keeps its caching."""

from datetime import UTC, datetime

from tests.harness.support import add_user, new_post, post_form, text


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


def test_the_page_showing_a_new_preview_link_is_no_store(app, auth):
    editor = auth.client("editor")
    draft = new_post(app, "Draft", status="draft")
    made = post_form(editor, f"/admin/posts/{draft}/previews", {"days": "7"})
    assert made.status_code == 201 and "/preview/" in text(made)
    assert no_store(made)


def test_the_public_site_keeps_its_own_caching(app, auth):
    new_post(app, "Hello", status="published", published_at=datetime.now(UTC))
    reader = app.test_client()
    for path in ("/", "/posts/hello", "/feed.xml", "/static/css/soloist.css"):
        answer = reader.get(path)
        assert answer.status_code == 200, path
        assert "no-store" not in answer.headers.get("Cache-Control", ""), path
    assert "public" in reader.get("/").headers["Cache-Control"]
    signed_in = auth.client("viewer")  # their page names them: private, still revalidated
    assert signed_in.get("/").headers["Cache-Control"] == "private, no-cache"
