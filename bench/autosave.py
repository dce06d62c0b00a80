"""Typing lost when the browser is killed: autosave's bound, measured in real Chromium.

An editor types steadily into a post's body for --seconds, then the browser's whole
process group gets SIGKILL (a crash: no pagehide, no beacon). The text the server kept
(post_autosaves) is compared with what was typed when: the seconds of typing it lacks.
The issue's target is at most 5 s. Run on a throwaway PostgreSQL database, the app served
from a thread:

    .venv/bin/python bench/autosave.py [--trials 5] [--seconds 8]
"""

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from bench.common import log, percentile, report, secs, table  # noqa: E402
from tests.harness.cluster import create_database, drop_database  # noqa: E402
from tests.harness.crash import killed, own_chromium, seconds_lost, type_for  # noqa: E402
from tests.harness.support import (  # noqa: E402
    add_user,
    make_app,
    migrate,
    serve,
    sign_in_page,
)
from webapp.extensions import db  # noqa: E402
from webapp.models import PostAutosave  # noqa: E402
from webapp.posts import create_post  # noqa: E402

TARGET = 5.0


def trial(app, url: str, chromium, seconds: float, n: int) -> float:
    """Type for seconds into a new post's body, kill the browser; return the seconds lost."""
    with app.app_context():
        post_id = create_post(f"Trial {n}", f"trial-{n}", "").id
    with tempfile.TemporaryDirectory() as profile, \
            own_chromium(chromium, Path(profile)) as (proc, browser):
        tab = browser.new_context(base_url=url).new_page()
        sign_in_page(tab, "editor@example.com")
        tab.goto(f"/admin/posts/{post_id}")
        tab.locator("#f-body").click()
        typing = type_for(tab, seconds)
        killed_at = killed(proc)
    with app.app_context():
        kept = db.session.scalar(sa.select(PostAutosave.body)
                                 .where(PostAutosave.post_id == post_id)) or ""
    return seconds_lost(typing, kept, killed_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0, help="of typing per trial")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    url = create_database("soloist_bench_autosave")
    try:
        app = make_app(url)
        migrate(app)
        add_user(app, "editor@example.com", "editor")
        with serve(app) as base, sync_playwright() as playwright:
            lost = []
            for n in range(args.trials):
                lost.append(trial(app, base, playwright.chromium, args.seconds, n))
                log(f"trial {n + 1}: {lost[-1]:.2f} s of typing lost")
        with app.app_context():
            db.engine.dispose()
    finally:
        drop_database(url)
    ok = "✔" if max(lost) <= TARGET else "✘"
    report("Autosave: typing lost when the browser is killed", [("Chromium, SIGKILL", table(
        ["typing", "trials", "p50 lost", "max lost", "target"],
        [[f"{args.seconds:g} s", len(lost), secs(percentile(lost, 50)), secs(max(lost)),
          f"≤ {TARGET:g} s {ok}"]]))],
        ["autosave.js sends 2 s after typing stops and at least every 3 s while it goes on; "
         "what a crash loses is at most that, plus the request's time."])


if __name__ == "__main__":
    main()
