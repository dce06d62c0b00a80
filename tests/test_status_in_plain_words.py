"""The status page opens with one sentence in plain words: all good, or what is wrong and what
Soloist is doing about it. The engine room (keys, terms, lock sessions) waits behind a fold."""

import re
from datetime import UTC, datetime, timedelta

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, holding
from tests.harness.support import make_app, post_form, record_term, text
from webapp.extensions import db
from webapp.models import LeaderEvent

JARGON = ("0x9a37b7a1", "2587342753", "Term", "term ", "lock session", "pg_locks",
          "Standbys", "holder", "heartbeat")


def said(client) -> str:
    """Return the status page's first words (its verdict), as text."""
    page = text(client.get("/status/live", headers={"HX-Request": "true"}))
    verdict = page.split('id="verdict"')[1].split('<p class="db-away"')[0]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", verdict.split(">", 1)[1])).strip()


def before_the_fold(client) -> str:
    """Return the status page's text before its Details fold."""
    page = text(client.get("/status/"))
    return re.sub(r"<[^>]+>", " ", page.split('<main>')[1].split("<details")[0])


def test_a_healthy_fleet_reads_all_good_and_keeps_the_jargon_behind_details(app, auth, pg_url):
    viewer = auth.client("viewer")
    with holding(pg_url, "soloist:web.1:11", PUBLISH_KEY, PLUGINS_KEY) as conn, \
            holding(pg_url, "soloist:web.2:12"):
        record_term(app, PUBLISH_KEY, conn, term=4)
        record_term(app, PLUGINS_KEY, conn, term=2)
        assert said(viewer) == "All good: posts go out on time."
        shown = before_the_fold(viewer)
        page = text(viewer.get("/status/"))
    assert [word for word in JARGON if word in shown] == []
    details = page.split('<details class="status-details"')[1]
    assert "0x9a37b7a1" in details and "soloist:web.2:12" in details  # still there, folded
    assert "<summary>Details" in details and "The <em>term</em> counts" in details


def test_no_leader_says_since_when_and_that_a_standby_takes_over(app, auth, pg_url):
    with app.app_context():
        went = datetime.now(UTC) - timedelta(minutes=3)
        db.session.add_all([
            LeaderEvent(key=PUBLISH_KEY, kind="acquired", term=1, holder="soloist:web.1:11",
                        at=went - timedelta(hours=1)),
            LeaderEvent(key=PUBLISH_KEY, kind="lost", term=1, holder="soloist:web.1:11",
                        at=went)])
        db.session.commit()
    viewer = auth.client("viewer")
    with holding(pg_url, "soloist:web.2:12", PLUGINS_KEY) as conn:
        record_term(app, PLUGINS_KEY, conn)
        sentence = said(viewer)
    assert sentence.startswith("No process leads publishing since ")
    assert sentence.endswith("; a standby takes over within 1.0 s.")
    assert "timers" not in sentence  # the plugins key is led: nothing to say about it


def test_nothing_running_says_publishing_resumes_when_an_instance_starts(app, auth):
    sentence = said(auth.client("viewer"))
    assert sentence == (
        "No process leads publishing yet; no other process stands by to take over: publishing "
        "resumes when a Soloist instance starts. No process leads timers and webhooks yet; no "
        "other process stands by to take over: timers and webhooks resume when a Soloist "
        "instance starts.")


def test_a_leader_that_stopped_moving_is_named_with_what_happens_next(app, auth, pg_url):
    with holding(pg_url, "soloist:web.1:11", PUBLISH_KEY, PLUGINS_KEY) as conn, \
            holding(pg_url, "soloist:web.2:12"):
        record_term(app, PUBLISH_KEY, conn, term=3, heartbeat_age=42)
        record_term(app, PLUGINS_KEY, conn, term=2)
        sentence = said(auth.client("viewer"))
    assert sentence.startswith("The process leading publishing (web.1) has not moved since ")
    assert sentence.endswith("; a standby takes over within 1.0 s.")


def test_a_freeze_says_who_paused_publishing_since_when_and_why(app, auth, pg_url):
    admin = auth.client("admin")
    post_form(admin, "/admin/freeze/", {"scope": "publishing", "on_resume": "publish",
                                        "reason": "Launch at noon"})
    with holding(pg_url, "soloist:web.1:11", PUBLISH_KEY, PLUGINS_KEY) as conn:
        record_term(app, PUBLISH_KEY, conn)
        record_term(app, PLUGINS_KEY, conn)
        sentence = said(auth.client("viewer"))
        page = text(admin.get("/status/"))
    assert sentence.startswith("Publishing is paused by admin@example.com since ")
    assert sentence.endswith(": Launch at noon. Posts that come due wait until an admin resumes "
                             "it, then Soloist will publish them at once.")
    assert page.count("Launch at noon") == 1  # said once, not again in a banner
    assert "Resume…" in page.split('id="verdict"')[1].split("</div>")[0]


def test_with_the_database_away_the_page_and_its_poll_say_publishing_resumes_when_it_is_back():
    app = make_app("postgresql://root@127.0.0.1:1/nowhere")
    client = app.test_client()
    with client.session_transaction() as session:
        session["_user_id"] = "a-session-the-database-would-know"
    poll = client.get("/status/live", headers={"HX-Request": "true"})
    page = client.get("/status/")
    # the poll's 503 turns on the fragment's own note (static/js/soloist.js), keeping the rest
    assert poll.status_code == 503 and poll.headers["Retry-After"]
    assert page.status_code == 503
    assert "publishing resumes by itself when the database is back" in text(page)
