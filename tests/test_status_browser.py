"""The status page in real headless Chromium against two real gunicorn instances."""

import os
import signal
import time

import pytest

from tests.harness.cluster import PUBLISH_KEY, pid_of, wait_for
from tests.harness.support import PASSWORD

pytestmark = pytest.mark.slow


def open_status(browser, base: str):
    """Sign in as the fleet's admin in a fresh page and open the status page."""
    page = browser.new_page()
    page.goto(f"{base}/login?next=/status/")
    page.fill("#f-email", "admin@example.com")
    page.fill("#f-password", PASSWORD)
    page.click("button.primary")
    page.wait_for_url(f"{base}/status/")
    return page


def shown_holder(page) -> str | None:
    return page.get_attribute('tr[data-key="publish"] [data-holder]', "data-holder")


def drawn_terms(page) -> str:
    """Return the titles of the wide timeline's publish lane segments, as one text."""
    return " ".join(page.locator("svg.timeline.wide rect.seg title").all_text_contents())


def test_status_page_shows_the_new_holder_and_its_term_without_reload_after_a_kill(
        browser, fleet):
    fleet.wait_settled()
    old = fleet.view.holder(PUBLISH_KEY)
    page = open_status(browser, fleet.other_than(old).url)
    try:
        assert shown_holder(page) == old
        as_of = page.text_content("time.as-of")
        page.evaluate("window.sameDocument = true")
        drawn_before = drawn_terms(page)
        os.kill(pid_of(old), signal.SIGKILL)
        killed = time.monotonic()
        new = wait_for(lambda: shown_holder(page) not in (old, "") and shown_holder(page), 15,
                       "the page to show a new holder of the publish key", interval=0.1)
        took = time.monotonic() - killed
        assert new == fleet.view.holder(PUBLISH_KEY)
        # the timeline follows too: the new holder's term is drawn in the publish lane
        wait_for(lambda: drawn_terms(page).count(new) > drawn_before.count(new), 15,
                 "the timeline to draw the new term", interval=0.1)
        assert page.evaluate("window.sameDocument") is True  # swapped in, not reloaded
        assert page.text_content("time.as-of") != as_of
        assert took < 8, f"the page took {took:.1f} s to show the new holder"
    finally:
        page.close()


def test_status_page_says_connection_lost_and_keeps_the_last_state(browser, fleet):
    # the last test of the module: it stops the instance the page polls
    fleet.wait_settled()
    watched = fleet.instances[0]
    page = open_status(browser, watched.url)
    try:
        holder = shown_holder(page)
        assert holder and not page.is_visible(".conn-lost")
        watched.stop()
        wait_for(lambda: page.is_visible(".conn-lost"), 15,
                 "the page to say the connection is lost", interval=0.1)
        assert "Connection lost" in page.text_content(".conn-lost")
        # the last state known stays on screen: the holder before the stop, or the one the
        # SIGTERM hand-over elected if a poll answered while the instance drained
        assert shown_holder(page) in {holder, fleet.view.holder(PUBLISH_KEY)} - {None}
    finally:
        page.close()
