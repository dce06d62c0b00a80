"""Expand, deploy, contract: the previous release keeps working on HEAD's schema.

During a deploy HEAD's release phase migrates the database while the previous release's
instances still serve it (docs/deploying.md#expand-deploy-contract). Here that release
(tests/harness/previous_release.py's PREVIOUS_RELEASE, built from git) runs as a fleet on a
database this tree migrated, and does what its users do: a post it was given is published
on time, once, and its webhook sent; its editors' pages open; its API lists, creates and
changes posts.
"""

import re
import signal
import urllib.error
import urllib.request
from datetime import timedelta

import pytest

from tests.harness.cluster import fleet_ready, instance_api, wait_for
from tests.harness.previous_release import PREVIOUS_RELEASE, build
from tests.harness.support import WebSession, cli_user

pytestmark = pytest.mark.slow

ADMIN = "admin@example.com"
LEAD = timedelta(seconds=2)  # the post is due this long after it is made
ON_TIME = 2.0  # seconds after its time: the issue counts a post later than this as late
# signed in as an admin: each must answer 200 (urllib raises on anything else)
PAGES = ("/admin/", "/admin/posts/", "/admin/posts/{draft}", "/admin/calendar/", "/status/",
         "/settings", "/admin/site/", "/admin/webhooks/", "/admin/users/")
# an answer of 5xx in the access log, or an error the old code logged (its scheduler's too)
SERVER_ERROR = re.compile(r'" 5\d\d | ERROR |Traceback')


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    """Return the previous release, built once for the module."""
    return build(PREVIOUS_RELEASE, tmp_path_factory.mktemp("previous-release"))


def test_the_previous_release_publishes_serves_pages_and_its_api_on_heads_schema(
        previous, fleet_db, receiver, tmp_path):
    url, view = fleet_db  # a copy of the database this tree migrated to its head
    token = cli_user(url, ADMIN)
    fleet = [previous.instance(name, url, workers=1, log_dir=tmp_path,
                               WEBHOOK_ALLOW_PRIVATE="true").start() for name in ("old1", "old2")]
    try:
        wait_for(lambda: fleet_ready(view, 2), 60, "the old fleet's leaders", interval=0.05,
                 state=lambda: errors(fleet)[-2:])

        def api(method: str, path: str, body: dict | None = None) -> dict:
            try:
                return instance_api(fleet[0], token, method, path, body)
            except urllib.error.HTTPError as exc:
                raise AssertionError(f"{method} {path}: {exc.code} {exc.read()[:300]}") from None

        api("POST", "/api/webhooks", {"url": receiver.url, "events": ["post.published"]})
        due = view.query("SELECT now()")[0][0] + LEAD
        post = api("POST", "/api/posts", {"title": "On time", "body": "Due *soon*.",
                                          "publish_at": due.isoformat()})
        assert post["status"] == "scheduled"
        draft = api("POST", "/api/posts", {"title": "Draft", "body": "First words."})
        changed = api("PATCH", f"/api/posts/{draft['id']}",
                      {"title": "Draft, edited", "version": draft["version"]})
        assert (changed["title"], changed["version"]) == ("Draft, edited", draft["version"] + 1)
        listed = api("GET", "/api/posts?status=draft")["posts"]
        assert [p["title"] for p in listed] == ["Draft, edited"]

        web = WebSession(fleet[1].url, ADMIN)
        for page in PAGES:
            web.get(page.format(draft=draft["id"]))

        wait_for(lambda: receiver.by_post().get(post["id"]), 15 + LEAD.total_seconds(),
                 "the post's webhook", interval=0.05,
                 state=lambda: view.query("SELECT status FROM posts WHERE id = %s", (post["id"],)))
        with urllib.request.urlopen(f"{fleet[0].url}/posts/{post['slug']}", timeout=10) as read:
            page = read.read().decode()  # what a reader is sent
    finally:
        for instance in fleet:  # both at once: each hands its keys over as it goes
            instance.signal(signal.SIGTERM)
        for instance in fleet:
            instance.stop()
    (status, late), = view.query(
        "SELECT status, extract(epoch FROM published_at - publish_at)::float8 FROM posts "
        "WHERE id = %s", (post["id"],))
    assert status == "published" and 0 <= late <= ON_TIME, f"published {late:.2f} s late"
    assert view.query("SELECT count(*) FROM outbox_events WHERE post_id = %s AND topic = "
                      "'post.published'", (post["id"],)) == [(1,)]
    assert len(receiver.by_post()[post["id"]]) == 1
    assert "On time" in page
    assert not errors(fleet), errors(fleet)[:5]


def errors(fleet: list) -> list[str]:
    """Return the lines of the fleet's logs that show a server error."""
    return [line for instance in fleet for line in instance.read_log().splitlines()
            if SERVER_ERROR.search(line)]
