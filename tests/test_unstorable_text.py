"""Text no database can store (NUL characters, lone surrogates) is refused with a message."""

import pytest

from tests.harness.support import count, post_form, text
from webapp.models import Post, WebhookEndpoint


def test_a_nul_character_in_a_form_or_search_is_refused_with_a_message(app, client, auth):
    auth.login("editor")
    response = post_form(client, "/admin/posts/new", {"title": "Hi\x00", "slug": "", "body": ""})
    assert response.status_code == 400
    assert "NUL character" in text(response)
    assert count(app, Post) == 0
    assert client.get("/admin/posts/?q=%00").status_code == 400
    anonymous = app.test_client()
    response = post_form(anonymous, "/login", {"email": "a\x00@b.c", "password": "x"})
    assert response.status_code == 400 and "NUL character" in text(response)


@pytest.mark.parametrize("raw", ['{"title": "Hi\\u0000"}', '{"title": "Hi\\ud800"}'])
def test_the_api_refuses_text_no_database_can_store_naming_the_field(app, api, raw: str):
    response = api("POST", "/api/posts", raw=raw)
    assert response.status_code == 422
    assert response.get_json()["field"] == "title"
    assert count(app, Post) == 0


def test_the_api_refuses_a_nul_in_a_webhook_description(app, api):
    response = api("POST", "/api/webhooks", role="admin", body={
        "url": "https://93.184.216.34/hook", "events": ["post.published"],
        "secret": "s" * 20, "description": "a\x00b"})
    assert response.status_code == 422
    assert response.get_json()["field"] == "description"
    assert count(app, WebhookEndpoint) == 0
