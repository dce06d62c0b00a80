"""Characters XML cannot hold are refused in a post, and the Atom feed stays well-formed."""

import html
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from tests.harness.support import count, field_error, new_post, post_form, text
from webapp.models import Post

TITLE_CHARACTERS = ["\x01", "\x0b", "\x1f", "\ufffe", "\uffff"]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
BODY_CHARACTERS = ["\x0c", "\x1b", "\x7f\x08"]


def feed_parses(client) -> ET.Element:
    """Return /feed.xml parsed with a strict XML parser."""
    response = client.get("/feed.xml")
    assert response.status_code == 200
    return ET.fromstring(response.get_data())


@pytest.mark.parametrize("character", TITLE_CHARACTERS)
def test_the_editor_refuses_a_title_xml_cannot_hold_naming_the_field(app, client, auth,
                                                                     character):
    auth.login("editor")
    typed = f"Hello{character}world"
    response = post_form(client, "/admin/posts/new", {"title": typed, "slug": "", "body": "x"})
    assert response.status_code == 422
    assert "character" in field_error(text(response), "title")
    assert 'value="Hello' in text(response)  # what was typed is kept
    assert count(app, Post) == 0
    feed_parses(client)


@pytest.mark.parametrize("character", BODY_CHARACTERS)
def test_the_editor_refuses_a_body_xml_cannot_hold_and_keeps_the_text(app, client, auth,
                                                                     character):
    auth.login("editor")
    body = f"Intro{character} and more"
    response = post_form(client, "/admin/posts/new", {"title": "T", "slug": "", "body": body})
    assert response.status_code == 422
    assert field_error(text(response), "body")
    assert "Intro" in html.unescape(text(response))
    assert count(app, Post) == 0


def test_an_edit_adding_a_control_character_changes_nothing(app, client, auth):
    auth.login("editor")
    post_id = new_post(app, "Kept", status="published", published_at=NOW)
    page = text(client.get(f"/admin/posts/{post_id}"))
    version = page.split('name="version" value="', 1)[1].split('"', 1)[0]
    response = post_form(client, f"/admin/posts/{post_id}",
                         {"title": "Kept\x01", "slug": "kept", "body": "x", "version": version})
    assert response.status_code == 422
    assert field_error(text(response), "title")
    titles = [e.findtext("{http://www.w3.org/2005/Atom}title")
              for e in feed_parses(client).iter("{http://www.w3.org/2005/Atom}entry")]
    assert titles == ["Kept"]


@pytest.mark.parametrize("field,value", [("title", "A\u0001B"), ("body", "x\u001by"),
                                         ("title", "\uffff")])
def test_the_api_refuses_text_xml_cannot_hold_naming_the_field(app, api, field, value):
    body = {"title": "Hello", "body": "x", field: value}
    response = api("POST", "/api/posts", body=body)
    assert response.status_code == 422
    assert response.get_json()["field"] == field
    assert count(app, Post) == 0


def test_a_stored_row_with_control_characters_cannot_break_the_feed(app, client):
    new_post(app, "Old\x01title\x0b", status="published", body="Body\x1b[31m red\x0c",
             published_at=NOW)
    new_post(app, "Fine", status="published", published_at=NOW)
    feed = feed_parses(client)
    titles = sorted(e.findtext("{http://www.w3.org/2005/Atom}title")
                    for e in feed.iter("{http://www.w3.org/2005/Atom}entry"))
    assert titles == ["Fine", "Oldtitle"]
