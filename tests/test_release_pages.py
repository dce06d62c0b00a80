"""Releases in the browser's forms: made in the editor's zone, items added and removed, refusals
next to the field with what was typed kept, cancelled, read-only once gone, and shown as one
thing on the dashboard and the calendar."""

import re
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from tests.harness.support import field_error, new_post, post_form, text
from webapp.extensions import db
from webapp.models import AuditEvent, Release, ReleaseItem
from webapp.scheduling import publish


def _release(app) -> Release:
    with app.app_context():
        return db.session.scalars(sa.select(Release)).one()


def _items(app) -> list[tuple[str, int | None]]:
    with app.app_context():
        return [(i.kind, i.post_id) for i in db.session.scalars(
            sa.select(ReleaseItem).order_by(ReleaseItem.id))]


def test_an_editor_makes_a_release_in_their_zone_fills_it_and_it_goes_as_one(app, auth):
    client = auth.client("editor", timezone="Europe/Paris")
    draft = new_post(app, "Launch day")
    live = new_post(app, "Old offer", status="published",
                    published_at=datetime.now(UTC) - timedelta(days=1))
    made = post_form(client, "/admin/releases/", {"name": "Spring launch",
                                                   "release_at": "2031-03-01T09:00",
                                                   "zone": "Europe/Paris"})
    assert made.status_code == 303
    release = _release(app)
    assert release.release_at == datetime(2031, 3, 1, 8, 0, tzinfo=UTC)
    url = made.headers["Location"]
    assert post_form(client, f"{url}/items", {"kind": "publish", "post_id": draft,
                                              "version": 1}).status_code == 303
    assert post_form(client, f"{url}/items", {"kind": "unpublish", "post_id": live,
                                              "version": 2}).status_code == 303
    page = text(client.get(url))
    assert "Launch day" in page and "Take down" in page and "Old offer" in page
    # each post's page says the release will move it
    assert "Goes live with the release" in text(client.get(f"/admin/posts/{draft}"))
    assert "Comes down with the release" in text(client.get(f"/admin/posts/{live}"))
    # the dashboard and the calendar show the release as one thing
    assert "Spring launch" in text(client.get("/admin/"))
    calendar = text(client.get("/admin/calendar/?date=2031-03-01"))
    assert re.search(r"Release: Spring launch \(2 changes\)", calendar)
    with app.app_context():
        publish.tick(release.release_at)
        actions = set(db.session.scalars(sa.select(AuditEvent.action)))
    assert {"release.create", "release.add"} <= actions
    gone = text(client.get(url))
    assert "Went live" in gone and "Cancel the release" not in gone
    assert "Remove</button>" not in gone


def test_a_refused_release_says_why_next_to_the_field_and_keeps_what_was_typed(app, auth):
    client = auth.client("editor")
    refused = post_form(client, "/admin/releases/", {"name": "Summer",
                                                      "release_at": "2020-01-01T09:00",
                                                      "zone": "UTC"})
    assert refused.status_code == 422
    page = text(refused)
    assert "already passed" in field_error(page, "release_at")
    assert 'value="Summer"' in page
    assert post_form(client, "/admin/releases/", {"name": "", "release_at": "2031-01-01T09:00",
                                                   "zone": "UTC"}).status_code == 422
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count(Release.id))) == 0


def test_a_settings_item_refused_keeps_the_text_and_an_item_can_be_removed(app, auth):
    client = auth.client("editor")
    url = post_form(client, "/admin/releases/", {"name": "Rename", "release_at":
                                                 "2031-01-01T09:00", "zone": "UTC"}
                    ).headers["Location"]
    long = "x" * 101
    refused = post_form(client, f"{url}/items", {"kind": "settings", "site_name": long,
                                                 "site_description": "Hi"})
    assert refused.status_code == 422
    assert "100 characters" in field_error(text(refused), "site_name")
    assert long in text(refused)
    assert post_form(client, f"{url}/items", {"kind": "settings", "site_name": "New",
                                              "site_description": "Hi"}).status_code == 303
    with app.app_context():
        item = db.session.scalars(sa.select(ReleaseItem)).one()
    assert post_form(client, f"{url}/items/{item.id}/remove").status_code == 303
    assert _items(app) == []


def test_a_change_item_is_written_on_its_own_page_and_a_refusal_keeps_the_text(app, auth):
    client = auth.client("editor")
    live = new_post(app, "Prices", status="published", body="40 euros",
                    published_at=datetime.now(UTC))
    url = post_form(client, "/admin/releases/", {"name": "Sale", "release_at":
                                                 "2031-01-01T09:00", "zone": "UTC"}
                    ).headers["Location"]
    form = text(client.get(f"{url}/change?post_id={live}"))
    assert "40 euros" in form
    same = post_form(client, f"{url}/items", {"kind": "change", "post_id": live,
                                              "title": "Prices", "body": "40 euros"})
    assert same.status_code == 422 and "change something" in field_error(text(same), "body")
    assert post_form(client, f"{url}/items", {"kind": "change", "post_id": live,
                                              "title": "Prices", "body": "30 euros"}
                     ).status_code == 303
    assert _items(app) == [("change", live)]


def test_a_cancelled_release_is_read_only_and_a_viewer_cannot_touch_one(app, auth):
    client = auth.client("editor")
    url = post_form(client, "/admin/releases/", {"name": "Maybe", "release_at":
                                                 "2031-01-01T09:00", "zone": "UTC"}
                    ).headers["Location"]
    viewer = auth.client("viewer")
    assert viewer.get(url).status_code == 403
    assert post_form(viewer, f"{url}/cancel").status_code == 403
    assert post_form(client, f"{url}/cancel", {"version": 1}).status_code == 303
    assert _release(app).status == "cancelled"
    assert "Cancelled" in text(client.get(url))
    again = post_form(client, f"{url}/items", {"kind": "settings", "site_name": "X"})
    assert again.status_code == 422 and "cancelled" in text(again)
    assert client.get("/admin/releases/999999").status_code == 404


def test_a_preview_link_shows_the_site_as_it_will_be_until_revoked(app, auth):
    client = auth.client("editor")
    new = new_post(app, "Brand new thing")
    old = new_post(app, "Old thing", status="published", published_at=datetime.now(UTC))
    live = new_post(app, "Prices", status="published", body="40 euros",
                    published_at=datetime.now(UTC))
    url = post_form(client, "/admin/releases/", {"name": "Launch", "release_at":
                                                 "2031-01-01T09:00", "zone": "UTC"}
                    ).headers["Location"]
    for item in ({"kind": "publish", "post_id": new}, {"kind": "unpublish", "post_id": old},
                 {"kind": "change", "post_id": live, "title": "Prices", "body": "30 euros"},
                 {"kind": "settings", "site_name": "Spring shop", "site_description": ""}):
        assert post_form(client, f"{url}/items", item).status_code == 303
    made = post_form(client, f"{url}/preview", {"days": "7"})
    assert made.status_code == 201
    link = re.search(r'id="new-preview-link">([^<]+)<', text(made)).group(1)
    path = link.split("localhost", 1)[-1]
    reader = app.test_client()
    home = reader.get(path)
    assert home.status_code == 200 and home.headers["Cache-Control"] == "private, no-store"
    page = text(home)
    assert "Brand new thing" in page and "Old thing" not in page and "Spring shop" in page
    assert "Brand new thing" not in text(reader.get("/"))  # readers: the site as it is
    assert "30 euros" in text(reader.get(f"{path}/posts/{live}"))
    assert reader.get(f"{path}/posts/{old}").status_code == 404  # taken down by then
    assert post_form(client, f"{url}/preview/revoke").status_code == 303
    assert reader.get(path).status_code == 404


def test_hostile_text_in_every_release_field_is_refused_by_name_never_a_500(app, auth):
    client = auth.client("editor")
    live = new_post(app, "Prices", status="published", published_at=datetime.now(UTC))
    for bad in ("a\x00b", "a\x07b", "a\ufffeb"):  # NUL: refused as a request (400)
        made = post_form(client, "/admin/releases/", {"name": bad,
                                                      "release_at": "2031-01-01T09:00",
                                                      "zone": "UTC"})
        assert made.status_code in (400, 422), bad
        assert made.status_code == 400 or field_error(text(made), "name")
    url = post_form(client, "/admin/releases/", {"name": "Launch", "release_at":
                                                 "2031-01-01T09:00", "zone": "Mars/Olympus"})
    assert url.status_code == 422 and field_error(text(url), "zone")
    url = post_form(client, "/admin/releases/", {"name": "Launch", "release_at":
                                                 "2031-01-01T09:00", "zone": "UTC"}
                    ).headers["Location"]
    for item in ({"kind": "change", "post_id": live, "title": "T\x07", "body": "B"},
                 {"kind": "change", "post_id": live, "title": "T", "body": "B\x00"},
                 {"kind": "settings", "site_name": "N\x1b", "site_description": ""},
                 {"kind": "publish", "post_id": "99999999999999999999"},
                 {"kind": "<script>", "post_id": "x"}):
        assert post_form(client, f"{url}/items", item).status_code in (400, 422), item
    assert _items(app) == []
    assert client.get(f"{url}/change?post_id=abc").status_code == 404
