"""Take the handbook's screenshots: `.venv/bin/python docs/screenshots.py`.

A throwaway database is seeded with a demo day (three deploys, each a rolling restart of
two instances, one with a slow hand-over, and a SIGKILL failover between them; posts due
around them and a week of posts ahead), web.1 holds both keys now with web.2 standing
by, the app is served from this process, and headless Chromium signs in and saves
docs/status-*.png (the timeline at 1280 and 390 px, the live part on a phone and a wide
screen), docs/editor.png (a post with its publication panel) and docs/calendar.png (the
week view).
"""

import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from werkzeug.serving import make_server  # noqa: E402

from tests.harness.cluster import create_database, drop_database, holding  # noqa: E402
from tests.harness.support import (  # noqa: E402
    CHROMIUM,
    PASSWORD,
    add_user,
    make_app,
    migrate,
    record_term,
)
from webapp.extensions import db  # noqa: E402
from webapp.leadership.keys import PLUGINS, PUBLISH  # noqa: E402
from webapp.models import Deploy, LeaderEvent, Post  # noqa: E402

# hours ago, the deploy's version (None: a SIGKILL failover, no deploy), seconds leaderless
CHANGES = [(-20, "3f9c2e1", 0.8), (-9, "7a41d0b", 6.5), (-5, None, 0.05), (-2, "c0ffee4", 1.2)]
TERM = len(CHANGES) + 1  # the term web.1 leads now


def seed(now: datetime) -> None:
    """Write a demo day: leaders, deploys with rolling restarts, posts due around them."""
    term, events, holder = 1, [], "soloist:web.1:101"
    for key in (PUBLISH, PLUGINS):
        events.append(LeaderEvent(key=key.value, kind="acquired", term=1, holder=holder,
                                  at=now - timedelta(hours=30)))
    for hours, version, gap in CHANGES:
        at = now + timedelta(hours=hours)
        if version:
            db.session.add(Deploy(version=version, source="SOURCE_VERSION", at=at))
        term += 1
        new = f"soloist:web.{term % 2 + 1}:{100 + term}"
        for key in (PUBLISH, PLUGINS):
            handover = at + timedelta(minutes=2)
            events.append(LeaderEvent(key=key.value, kind="released" if version else "ended",
                                      term=term - 1, holder=holder, at=handover))
            events.append(LeaderEvent(key=key.value, kind="acquired", term=term, holder=new,
                                      at=handover + timedelta(seconds=gap)))
        holder = new
        for i in range(40 if version else 0):
            due = at + timedelta(seconds=20 * i)
            lag = 0.05 + (gap if 6 <= i <= 7 else 0) + (i % 5) * 0.02
            db.session.add(Post(title=f"{version} post {i}", slug=f"{version}-{i}", body="",
                                status="published", version=1, publish_at=due,
                                published_at=due + timedelta(seconds=lag)))
    db.session.add_all(events)
    for day in range(7):  # the week ahead, for the editor and the calendar
        for hour in (9, 14):
            due = (now + timedelta(days=day)).replace(hour=hour, minute=0, second=0,
                                                      microsecond=0)
            if due > now:
                db.session.add(Post(title=f"Field notes {day * 2 + hour // 14 + 1}",
                                    slug=f"notes-{day}-{hour}", status="scheduled", version=1,
                                    body="Written ahead, **scheduled** in the editor's zone.",
                                    publish_at=due))
    db.session.commit()


def main() -> None:
    url = create_database("soloist_screens")
    try:
        app = make_app(url)
        migrate(app)
        add_user(app, "ops@example.com", "admin", timezone="Europe/Paris")
        with app.app_context():
            seed(datetime.now(UTC))
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        # the last deploy's leader holds both keys; web.2's worker stands by
        leader = f"soloist:web.{TERM % 2 + 1}:{100 + TERM}"
        with holding(url, leader, PUBLISH.value, PLUGINS.value) as lock, \
                holding(url, "soloist:web.2:199"):

            def beat() -> None:
                for key in (PUBLISH, PLUGINS):
                    record_term(app, key.value, lock, term=TERM, heartbeat_age=0.6)

            shoot(f"http://127.0.0.1:{server.server_port}", beat)
        server.shutdown()
        with app.app_context():
            db.engine.dispose()
    finally:
        drop_database(url)


def shoot(base: str, beat) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for width, name in ((1280, "status-timeline.png"), (390, "status-timeline-phone.png")):
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(base + "/login")
            page.fill("#f-email", "ops@example.com")
            page.fill("#f-password", PASSWORD)
            page.click("button.primary")
            page.goto(base + "/status/")
            page.locator("#timeline").screenshot(path=str(ROOT / "docs" / name))
            page.close()
            print("wrote docs/" + name)
        shoot_live(browser, base, beat)
        shoot_editor(browser, base)
        browser.close()


def shoot_editor(browser, base: str) -> None:
    """Save a scheduled post in the editor and the calendar's week, at 1280 px."""
    context = browser.new_context(viewport={"width": 1280, "height": 860},
                                  timezone_id="Europe/Paris")
    page = context.new_page()
    page.goto(base + "/login")
    page.fill("#f-email", "ops@example.com")
    page.fill("#f-password", PASSWORD)
    page.click("button.primary")
    page.goto(base + "/admin/posts/?status=scheduled")
    page.locator("table a", has_text="Field notes").first.click()
    page.wait_for_selector("#panel")
    page.screenshot(path=str(ROOT / "docs" / "editor.png"))
    print("wrote docs/editor.png")
    page.goto(base + "/admin/calendar/?view=week")
    page.screenshot(path=str(ROOT / "docs" / "calendar.png"), full_page=True)
    print("wrote docs/calendar.png")
    context.close()


def shoot_live(browser, base: str, beat) -> None:
    """Save the top of the live part, to the keys on a phone and the instances wide.

    beat() records a fresh heartbeat first, as a healthy leader would have.
    """
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                has_touch=True, device_scale_factor=2)
    wide = browser.new_context(viewport={"width": 1280, "height": 900})
    for context, name in ((phone, "status-phone.png"), (wide, "status-wide.png")):
        page = context.new_page()
        page.goto(base + "/login")
        page.fill("#f-email", "ops@example.com")
        page.fill("#f-password", PASSWORD)
        page.click("button.primary")
        beat()
        page.goto(base + "/status/")
        page.click("#status-details > summary")  # the keys and instances are folded
        width = context.pages[0].viewport_size["width"]
        last = page.locator("table.keys" if context is phone else "table.instances")
        bottom = last.bounding_box()
        page.screenshot(path=str(ROOT / "docs" / name), full_page=True,
                        clip={"x": 0, "y": 0, "width": width,
                              "height": bottom["y"] + bottom["height"] + 16})
        context.close()
        print("wrote docs/" + name)


if __name__ == "__main__":
    main()
