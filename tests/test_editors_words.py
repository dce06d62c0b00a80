"""Editors' pages speak editors' words: no engine-room word (leaders, locks, terms, the
outbox, entry points) on any page an editor works in, the menu included. The engine room
has its own pages, for admins (Plugins) and ops (Status, whose plain first sentence
tests/test_status_in_plain_words.py keeps)."""

import re
from datetime import UTC, datetime

from tests.harness.support import AuthActions, pages, seed_site, text
from webapp.extensions import db
from webapp.models import TimerRun
from webapp.plugins.endpoints import LABELS, TOPICS

# "your device's lock" (a passkey) and "lock them out" (sign-in tries) are plain English
ENGINE_ROOM = re.compile(
    r"\b(leaders?|leadership|(?<!device's )lock(s|ed)?(?! them out)|terms?|holders?|"
    r"heartbeats?|pg_\w+|outbox|entry[- ]points?|fenc(e|ed|ing)|scheduler|advisory|"
    r"standbys?)\b", re.I)
OPS_PAGES = {"/status/"}  # the ops page: plain words first, the rest behind Details


def words(html: str) -> str:
    """Return what a reader sees of a page: no scripts, styles, tags or attributes."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S | re.I)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_no_editor_page_shows_an_engine_room_word(app):
    found = seed_site(app)
    timer_id = int(found["timer"].rsplit("/", 1)[1])
    with app.app_context():  # a run, whose page says where it ran: the instance, in words
        now = datetime.now(UTC)
        db.session.add(TimerRun(timer_id=timer_id, scheduled_for=now, status="succeeded",
                                started_at=now, finished_at=now, duration_seconds=0.2,
                                instance="soloist:web.1:42:abcdefgh:ijklmnop", result="ok"))
        db.session.commit()
    client = app.test_client()
    AuthActions(client).login("editor")
    heard = {}
    for path, needs in pages(found):
        if needs not in ("viewer", "editor") or path in OPS_PAGES:
            continue
        response = client.get(path)
        assert response.status_code == 200, path
        said = sorted({m.group(0).lower() for m in ENGINE_ROOM.finditer(words(text(response)))})
        if said:
            heard[path] = said
    assert heard == {}
    runs = words(text(client.get(f"{found['timer']}/runs")))
    assert "Ran on" in runs and " web.1 " in runs and "abcdefgh" not in runs


def test_editors_menu_has_timers_but_not_the_plugins_engine_room(app, auth):
    menu = text(auth.client("editor").get("/admin/")).split('aria-label="Main"')[1]
    menu = menu.split("</nav>")[0]
    assert "Timers" in menu and "Plugins" not in menu
    admin_menu = text(auth.client("admin").get("/admin/")).split('aria-label="Main"')[1]
    assert "Plugins" in admin_menu.split("</nav>")[0]


def test_every_webhook_event_is_said_in_words_with_its_raw_name_beside_it(app, auth):
    assert set(TOPICS) <= set(LABELS)
    page = text(auth.client("admin").get("/admin/webhooks/"))
    assert ('Nobody is publishing (or running timers) <span class="mono small muted">'
            'ops.no_leader</span>') in page
