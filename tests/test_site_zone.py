"""The site's zone and language: readers get the day the editor chose, in the site's words.

An editor in Paris schedules a post for 00:04 on a Thursday. With the site's zone set to
Europe/Paris in Site settings, the post page, the index and the feed say that Thursday
(never the Wednesday it still is in UTC), and a preview link's banner names Paris time.
"""

import html
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from tests.harness.support import field_error, post_form, text
from webapp.extensions import db

ATOM = "{http://www.w3.org/2005/Atom}"
GOES_LIVE = datetime(2030, 12, 4, 23, 4, tzinfo=UTC)  # Thu 5 Dec 2030, 00:04 in Paris
LINK = re.compile(r'id="new-preview-link">http://localhost(/preview/[A-Za-z0-9_-]+)<')


def set_site(admin, **fields):
    form = {"name": "", "description": "", "timezone": "", "language": "", **fields}
    return post_form(admin, "/admin/site/", form)


def schedule_in_paris(editor) -> int:
    answer = post_form(editor, "/admin/posts/new", {
        "title": "Night market", "slug": "night-market", "body": "Opens at midnight.",
        "publish_at": "2030-12-05T00:04", "zone": "Europe/Paris"})
    assert answer.status_code == 303, text(answer)[:400]
    return int(answer.headers["Location"].rstrip("/").rsplit("/", 1)[-1])


def test_a_post_at_0004_paris_time_reads_as_that_day_on_the_site_the_feed_and_the_preview(
        app, auth):
    assert set_site(auth.client("admin"), timezone="Europe/Paris",
                    language="fr").status_code == 303
    editor = auth.client("editor", timezone="Europe/Paris")
    post_id = schedule_in_paris(editor)
    made = post_form(editor, f"/admin/posts/{post_id}/previews", {"days": "7"})
    banner = text(app.test_client().get(LINK.search(text(made)).group(1)))
    assert "goes live Thu 5 Dec 2030, 00:04 Paris time" in banner and "UTC" not in banner
    with app.app_context():
        from webapp import posts  # the publish leader's step, at the post's time
        assert posts.publish_due(GOES_LIVE) == [post_id]
    reader = app.test_client()
    page = text(reader.get("/posts/night-market"))
    assert ">5 December 2030</time>" in page and '<html lang="fr">' in page
    assert ">5 December 2030</time>" in text(reader.get("/"))
    feed = ET.fromstring(reader.get("/feed.xml").data)
    assert feed.get("{http://www.w3.org/XML/1998/namespace}lang") == "fr"
    assert feed.find(f"{ATOM}entry").findtext(f"{ATOM}published") == "2030-12-05T00:04:00+01:00"


def test_a_changed_zone_reaches_readers_holding_a_copy_and_a_blank_one_is_the_default(
        app, auth):
    with app.app_context():
        from webapp.models import Post
        db.session.add(Post(title="Late", slug="late", body="x", status="published",
                            version=1, published_at=GOES_LIVE, updated_at=GOES_LIVE))
        db.session.commit()
    reader, admin = app.test_client(), auth.client("admin")
    first = reader.get("/posts/late")
    assert ">4 December 2030</time>" in text(first) and '<html lang="en">' in text(first)
    set_site(admin, timezone="Asia/Tokyo")
    again = reader.get("/posts/late", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 200 and ">5 December 2030</time>" in text(again)
    set_site(admin)
    assert ">4 December 2030</time>" in text(reader.get("/posts/late"))  # SITE_TIMEZONE: UTC


def test_a_zone_or_language_that_cannot_be_used_is_refused_naming_the_field(app, auth):
    admin = auth.client("admin")
    answer = set_site(admin, name="Kept", timezone="Europe/Pariss", language="french!")
    page = text(answer)
    assert answer.status_code == 422
    assert "not a time zone" in html.unescape(field_error(page, "timezone"))
    assert "not a language tag" in html.unescape(field_error(page, "language"))
    assert 'value="Europe/Pariss"' in page and 'value="Kept"' in page
    assert '<html lang="en">' in text(app.test_client().get("/"))  # nothing changed


def test_the_hosts_own_zone_is_no_choice_for_the_site_a_person_or_a_timer(app, auth, editor):
    # "localtime" is each host's /etc/localtime: every instance of a fleet would read it as
    # its own, so readers would get a day that depends on the instance that answered
    admin = auth.client("admin")
    answer = set_site(admin, timezone="localtime")
    assert answer.status_code == 422
    assert "not a time zone" in html.unescape(field_error(text(answer), "timezone"))
    assert '<option value="localtime"' not in text(admin.get("/admin/site/"))
    mine = post_form(editor, "/settings", {"timezone": "localtime"})
    assert mine.status_code == 422 and '<option value="localtime"' not in text(mine)
    assert '<option value="localtime"' not in text(editor.get("/admin/timers/new"))
