"""A publishing freeze holds every way a post changes visibility; an admin may override it."""

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.harness.support import new_post, post_form, post_status, text
from webapp.extensions import db
from webapp.models import AuditEvent, Post
from webapp.ops import freezes


@pytest.fixture
def frozen(app):
    with app.app_context():
        freezes.freeze("publishing", "incident 42: bad copy", "publish", "ops@example.com")


def actions(app) -> list[str]:
    with app.app_context():
        return list(db.session.scalars(sa.select(AuditEvent.action).order_by(AuditEvent.id)))


def test_the_api_refuses_to_publish_during_a_freeze_with_a_409_naming_it(app, api, frozen):
    post_id = new_post(app, "Draft")
    response = api("POST", f"/api/posts/{post_id}/publish")
    assert response.status_code == 409
    body = response.get_json()
    assert "frozen" in body["detail"] and "incident 42: bad copy" in body["detail"]
    assert body["freeze"] == {"scope": "publishing", "reason": "incident 42: bad copy",
                              "frozen_by": "ops@example.com",
                              "frozen_at": body["freeze"]["frozen_at"]}
    assert post_status(app, post_id) == "draft"


def test_an_editor_cannot_override_a_freeze_through_the_api(app, api, frozen):
    post_id = new_post(app, "Draft")
    response = api("POST", f"/api/posts/{post_id}/publish", body={"override_freeze": True})
    assert response.status_code == 403
    assert post_status(app, post_id) == "draft"


def test_an_admin_overrides_a_freeze_through_the_api_and_it_is_audited(app, api, frozen):
    post_id = new_post(app, "Draft")
    response = api("POST", f"/api/posts/{post_id}/publish", role="admin",
                   body={"override_freeze": True})
    assert response.status_code == 200, response.get_json()
    assert post_status(app, post_id) == "published"
    assert actions(app)[-2:] == ["post.publish", "freeze.override"]


def test_without_a_freeze_the_api_publishes_as_before(app, api):
    post_id = new_post(app, "Draft")
    assert api("POST", f"/api/posts/{post_id}/publish").status_code == 200
    assert post_status(app, post_id) == "published"


@pytest.mark.parametrize("action,status", [("publish", "draft"), ("unpublish", "published")])
def test_the_form_refuses_publish_and_unpublish_now_during_a_freeze(app, auth, frozen,
                                                                    action, status):
    post_id = new_post(app, "Post", status=status, published_at=datetime.now(UTC))
    client = auth.client("editor")
    response = post_form(client, f"/admin/posts/{post_id}/{action}")
    assert response.status_code == 409
    page = text(response)
    assert "Publishing is frozen" in page and "incident 42: bad copy" in page
    assert post_status(app, post_id) == status
    assert "override_freeze" not in page  # an editor has no override


def test_publish_now_instead_keeps_the_typed_time_when_refused(app, auth, frozen):
    post_id = new_post(app, "Post")
    client = auth.client("editor")
    response = post_form(client, f"/admin/posts/{post_id}/publish",
                         {"publish_at": "2020-01-01T09:00", "unpublish_at": "",
                          "zone": "Europe/Paris"})
    assert response.status_code == 409
    assert 'value="2020-01-01T09:00"' in text(response)
    assert 'value="Europe/Paris"' in text(response)


def test_an_admin_overrides_the_freeze_from_the_form_and_it_is_audited(app, auth, frozen):
    post_id = new_post(app, "Post")
    client = auth.client("admin")
    page = text(client.get(f"/admin/posts/{post_id}"))
    assert 'name="override_freeze"' in page
    response = post_form(client, f"/admin/posts/{post_id}/publish", {"override_freeze": "1"})
    assert response.status_code == 303
    assert post_status(app, post_id) == "published"
    assert actions(app)[-2:] == ["post.publish", "freeze.override"]
    response = post_form(client, f"/admin/posts/{post_id}/unpublish", {"override_freeze": "1"})
    assert response.status_code == 303 and post_status(app, post_id) == "unpublished"


def test_scheduling_a_time_during_a_freeze_is_accepted_and_waits(app, auth, frozen):
    post_id = new_post(app, "Post")
    client = auth.client("editor")
    with app.app_context():
        version = db.session.get(Post, post_id).version
    when = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    response = post_form(client, f"/admin/posts/{post_id}/schedule",
                         {"publish_at": when, "zone": "UTC", "version": version})
    assert response.status_code == 303
    assert post_status(app, post_id) == "scheduled"
