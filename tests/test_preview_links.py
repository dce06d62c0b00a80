"""Preview links: a draft shown to someone without an account, until the link ends.

An editor makes a link on the post's page (shown once), anyone opens it signed out, and it
stops working when it expires or is revoked; a guessed token finds nothing. The page is
never cached or indexed, and only the token's SHA-256 is kept.
"""

import hashlib
import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from tests.harness.support import new_post, post_form, text
from webapp.extensions import db
from webapp.models import AuditEvent, PreviewLink, utcnow

SECRET_BODY = "The harbour *reopens* on Monday."
LINK = re.compile(r'<code class="api-token" id="new-preview-link">(http://localhost(/preview/'
                  r'[A-Za-z0-9_-]+))</code>')


@pytest.fixture
def draft(app):
    return new_post(app, "Harbour plans", slug="harbour-plans", body=SECRET_BODY)


def make_link(client, post_id: int, days: str = "7") -> str:
    """Make a link on the post's page as client; return its path."""
    response = post_form(client, f"/admin/posts/{post_id}/previews", {"days": days})
    assert response.status_code == 201, text(response)[:500]
    return LINK.search(text(response)).group(2)


def link_ids(app) -> list[int]:
    with app.app_context():
        return list(db.session.scalars(sa.select(PreviewLink.id).order_by(PreviewLink.id)))


def assert_ended(app, path: str) -> None:
    response = app.test_client().get(path)
    page = text(response)
    assert response.status_code == 404
    assert "This preview link has ended" in page
    assert "Harbour plans" not in page and "reopens" not in page
    assert response.headers["Cache-Control"] == "private, no-store"


def test_a_link_opens_the_draft_signed_out_never_cached_nor_indexed(app, auth, draft):
    path = make_link(auth.client("editor"), draft)
    response = app.test_client().get(path)
    page = text(response)
    assert response.status_code == 200
    assert "<h1>Harbour plans</h1>" in page and "<em>reopens</em>" in page
    assert "Preview — not published" in page
    assert response.headers["Cache-Control"] == "private, no-store"
    assert response.headers["X-Robots-Tag"] == "noindex"
    assert '<meta name="robots" content="noindex">' in page
    assert "Set-Cookie" not in response.headers  # a reader gets no session
    for listing in ("/", "/feed.xml", "/sitemap.xml"):
        assert "harbour-plans" not in text(app.test_client().get(listing)), listing
        assert "/preview/" not in text(app.test_client().get(listing)), listing


def test_only_the_tokens_hash_is_stored_and_the_audit_names_the_link_not_the_token(
        app, auth, draft):
    path = make_link(auth.client("editor"), draft, days="1")
    token = path.rsplit("/", 1)[1]
    assert len(token) >= 43  # 32 random bytes
    with app.app_context():
        link = db.session.scalar(sa.select(PreviewLink))
        assert link.token_hash == hashlib.sha256(token.encode()).hexdigest()
        assert timedelta(hours=23) < link.expires_at - link.created_at <= timedelta(days=1)
        event = db.session.scalar(sa.select(AuditEvent).where(
            AuditEvent.action == "preview.create"))
        assert token not in event.detail and token not in event.target
        assert f'"link": {link.id}' in event.detail


def test_a_revoked_link_stops_working(app, auth, draft):
    editor = auth.client("editor")
    path = make_link(editor, draft)
    [link_id] = link_ids(app)
    page = text(editor.get(f"/admin/posts/{draft}"))
    assert f"/admin/posts/{draft}/previews/{link_id}/revoke" in page and "Revoke" in page
    revoked = post_form(editor, f"/admin/posts/{draft}/previews/{link_id}/revoke")
    assert revoked.status_code == 303
    assert_ended(app, path)
    assert "No live links." in text(editor.get(f"/admin/posts/{draft}"))
    again = post_form(editor, f"/admin/posts/{draft}/previews/{link_id}/revoke",
                      follow_redirects=True)
    assert "already ended" in text(again)


def test_an_expired_link_stops_working(app, auth, draft):
    path = make_link(auth.client("editor"), draft)
    with app.app_context():
        db.session.execute(sa.update(PreviewLink).values(
            expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    assert_ended(app, path)


def test_a_guessed_token_finds_nothing(app, auth, draft):
    make_link(auth.client("editor"), draft)
    assert_ended(app, "/preview/" + "A" * 43)
    assert_ended(app, "/preview/" + "A" * 500)


def test_a_link_to_a_post_published_since_leads_to_its_public_page(app, auth):
    post_id = new_post(app, "Soon", status="scheduled", publish_at=utcnow() + timedelta(days=1))
    path = make_link(auth.client("editor"), post_id)
    with app.app_context():
        db.session.execute(sa.text("UPDATE posts SET status = 'published', "
                                   "published_at = now() WHERE id = :id"), {"id": post_id})
        db.session.commit()
    response = app.test_client().get(path)
    assert response.status_code == 302 and response.location == "/posts/soon"


def test_a_published_post_and_a_bad_expiry_get_no_link(app, auth):
    editor = auth.client("editor")
    live = new_post(app, "Live", status="published", published_at=utcnow())
    refused = post_form(editor, f"/admin/posts/{live}/previews", {"days": "7"},
                        follow_redirects=True)
    assert "Only a draft, a scheduled post or a scheduled change" in text(refused)
    draft = new_post(app, "Draft")
    odd = post_form(editor, f"/admin/posts/{draft}/previews", {"days": "3"},
                    follow_redirects=True)
    assert "Choose 1, 7 or 30 days." in text(odd)
    assert link_ids(app) == []


def test_a_viewer_can_neither_make_nor_revoke_a_link(app, auth, draft):
    path = make_link(auth.client("editor"), draft)
    [link_id] = link_ids(app)
    viewer = auth.client("viewer")
    assert post_form(viewer, f"/admin/posts/{draft}/previews", {"days": "7"}).status_code == 403
    assert post_form(viewer, f"/admin/posts/{draft}/previews/{link_id}/revoke"
                     ).status_code == 403
    assert link_ids(app) == [link_id]
    assert app.test_client().get(path).status_code == 200


def test_making_and_revoking_need_the_csrf_token(app, auth, draft):
    editor = auth.client("editor")
    path = make_link(editor, draft)
    [link_id] = link_ids(app)
    made = editor.post(f"/admin/posts/{draft}/previews", data={"days": "7"})
    revoked = editor.post(f"/admin/posts/{draft}/previews/{link_id}/revoke")
    assert made.status_code == revoked.status_code == 400
    assert link_ids(app) == [link_id]
    assert app.test_client().get(path).status_code == 200


def test_the_access_log_writes_a_preview_link_without_its_token():
    from gunicorn.config import Config

    from webapp.gunicorn_conf import AccessLogger, access_log_format

    path = "/preview/" + "s3cret_-" * 5
    request = SimpleNamespace(method="GET", path=path, query="", version=(1, 1), headers=[],
                              uri=path)
    response = SimpleNamespace(status="200 OK", response_length=10, headers=[], sent=10)
    environ = {"REMOTE_ADDR": "192.0.2.1", "REQUEST_METHOD": "GET", "RAW_URI": path,
               "SERVER_PROTOCOL": "HTTP/1.1", "PATH_INFO": path, "QUERY_STRING": ""}
    atoms = AccessLogger(Config()).atoms(response, request, environ,
                                         timedelta(milliseconds=3))
    assert access_log_format % atoms == '192.0.2.1 "GET /preview/… HTTP/1.1" 200 10 3ms'


def test_a_link_to_a_live_posts_scheduled_change_shows_the_change_until_it_goes_live(
        app, auth):
    post_id = new_post(app, "Harbour hours", slug="harbour-hours", status="published",
                       body="Open 9 to 5.", published_at=utcnow() - timedelta(days=1))
    client = auth.client("editor")
    assert "Share a preview" not in text(client.get(f"/admin/posts/{post_id}"))  # no change
    refused = post_form(client, f"/admin/posts/{post_id}/previews", {"days": "7"},
                        follow_redirects=True)
    assert "this post is published" in text(refused)
    scheduled = post_form(client, f"/admin/posts/{post_id}/change", {
        "title": "Harbour hours", "body": "Open 8 to 8 from *June*.",
        "apply_at": "2031-06-01T08:00", "zone": "UTC"})
    assert scheduled.status_code == 303
    assert "shows its scheduled change" in text(client.get(f"/admin/posts/{post_id}"))
    path = make_link(client, post_id)
    reader = app.test_client()
    page = text(reader.get(path))
    assert "Open 8 to 8 from <em>June</em>." in page and "Open 9 to 5" not in page
    assert "a change to a live post that goes live" in page
    assert "8 to 8" not in text(reader.get("/posts/harbour-hours"))  # readers: the live text
    with app.app_context():
        from webapp import posts  # the change goes live: the link leads to the public page
        posts.apply_due_changes(datetime(2031, 6, 1, 8, 1, tzinfo=UTC), 10)
    gone = reader.get(path)
    assert gone.status_code == 302 and gone.headers["Location"].endswith("/posts/harbour-hours")
