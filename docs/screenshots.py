"""Take the handbook's screenshots of the status page: `.venv/bin/python docs/screenshots.py`.

A throwaway database is seeded with a demo day (three deploys, each a rolling restart of
two instances, one with a slow hand-over; posts due around them), web.1 holds both keys
now with web.2 standing by, the app is served from this process, and headless Chromium
signs in and saves docs/status-*.png: the timeline at 1280 and 390 px, and the live part
on a phone (status-phone.png) and a wide screen (status-wide.png).
"""

import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from werkzeug.serving import make_server  # noqa: E402

from tests.cluster import create_database, drop_database, holding  # noqa: E402
from tests.support import PASSWORD, add_user, make_app, migrate, record_term  # noqa: E402
from webapp.extensions import db  # noqa: E402
from webapp.leadership.keys import PLUGINS, PUBLISH  # noqa: E402
from webapp.models import Deploy, LeaderEvent, Post  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
DEPLOYS = [(-20, "3f9c2e1", 0.8), (-9, "7a41d0b", 6.5), (-2, "c0ffee4", 1.2)]  # h ago, gap s


def seed(now: datetime) -> None:
    """Write a demo day: leaders, deploys with rolling restarts, posts due around them."""
    term, events, holder = 1, [], "soloist:web.1:101"
    for key in (PUBLISH, PLUGINS):
        events.append(LeaderEvent(key=key.value, kind="acquired", term=1, holder=holder,
                                  at=now - timedelta(hours=30)))
    for hours, version, gap in DEPLOYS:
        at = now + timedelta(hours=hours)
        db.session.add(Deploy(version=version, source="SOURCE_VERSION", at=at))
        term += 1
        new = f"soloist:web.{term % 2 + 1}:{100 + term}"
        for key in (PUBLISH, PLUGINS):
            handover = at + timedelta(minutes=2)
            events.append(LeaderEvent(key=key.value, kind="released", term=term - 1,
                                      holder=holder, at=handover))
            events.append(LeaderEvent(key=key.value, kind="acquired", term=term, holder=new,
                                      at=handover + timedelta(seconds=gap)))
        holder = new
        for i in range(40):
            due = at + timedelta(seconds=20 * i)
            lag = 0.05 + (gap if 6 <= i <= 7 else 0) + (i % 5) * 0.02
            db.session.add(Post(title=f"{version} post {i}", slug=f"{version}-{i}", body="",
                                status="published", version=1, publish_at=due,
                                published_at=due + timedelta(seconds=lag)))
    db.session.add_all(events)
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
        # the last deploy's leader (term 4) holds both keys; web.2's worker stands by
        with holding(url, "soloist:web.1:104", PUBLISH.value, PLUGINS.value) as lock, \
                holding(url, "soloist:web.2:105"):

            def beat() -> None:
                for key in (PUBLISH, PLUGINS):
                    record_term(app, key.value, lock, term=4, heartbeat_age=0.6)

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
        browser.close()


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
