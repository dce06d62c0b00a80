"""The status page on a 390 px phone and a 1280 px screen, in real headless Chromium.

During an incident ops open the status page on whatever they have. On a phone each key,
lock session and leadership change is a card (every value labelled) and nothing scrolls
sideways; a wide screen keeps the tables. The screenshots land in pytest's tmp_path (the
handbook's come from docs/screenshots.py).
"""

from tests.harness.cluster import wait_for
from tests.harness.support import leaders, sign_in_page

PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1280, "height": 900}
SHOWN = ("Holder", "Heartbeat", "Standbys", "Last work")  # what ops look for, per key

# every element of the page that is wider than the screen or scrolls sideways inside
OVERFLOWING = """() => {
  const wide = document.documentElement.clientWidth;
  return [...document.querySelectorAll("body *")]
    .filter((e) => e.getClientRects().length
                   && (e.getBoundingClientRect().right > wide + 0.5
                       || e.scrollWidth > e.clientWidth + 1
                          && getComputedStyle(e).overflowX != "visible"))
    .map((e) => e.tagName.toLowerCase() + (e.className ? "." + e.className : ""));
}"""


def open_status(browser, site: dict, viewport: dict, **device):
    """Return a page signed in as admin showing /status/ at viewport."""
    context = browser.new_context(base_url=site["url"], viewport=viewport, **device)
    page = context.new_page()
    sign_in_page(page, "admin@example.com")
    page.goto("/status/")
    page.click("#status-details > summary")  # the keys, instances and history are folded
    return page


def cell(page, key: str, label: str):
    return page.locator(f'#status-live tr[data-key="{key}"] td[data-label="{label}"]')


def test_on_a_phone_each_key_is_a_card_with_holder_heartbeat_standbys_and_last_work(
        browser, site, app, pg_url, tmp_path):
    with leaders(app, pg_url):
        page = open_status(browser, site, PHONE, is_mobile=True, has_touch=True,
                           device_scale_factor=2)
        try:
            assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
            assert page.evaluate(OVERFLOWING) == []
            assert page.locator("table.keys thead").is_hidden()
            for key in ("publish", "plugins"):
                for label in SHOWN:
                    found = cell(page, key, label)
                    box = found.bounding_box()
                    assert found.is_visible() and box["x"] >= 0, (key, label)
                    assert box["x"] + box["width"] <= PHONE["width"], (key, label, box)
            assert "soloist:web.1:4101" in cell(page, "publish", "Holder").inner_text()
            heartbeat = cell(page, "publish", "Heartbeat").inner_text()
            assert "ago" in heartbeat and "stale" in heartbeat  # 42 s old
            assert "soloist:web.3:4103" in cell(page, "publish", "Standbys").inner_text()
            assert "published 3" in cell(page, "plugins", "Last work").inner_text()
            page.screenshot(path=tmp_path / "status-phone.png", full_page=True)
        finally:
            page.context.close()


def test_on_a_wide_screen_the_status_page_keeps_its_tables(browser, site, app, pg_url,
                                                             tmp_path):
    with leaders(app, pg_url):
        page = open_status(browser, site, WIDE)
        try:
            assert page.evaluate("document.scrollingElement.scrollWidth") <= WIDE["width"]
            for table in ("keys", "instances", "history"):
                assert page.locator(f"table.{table} thead").is_visible(), table
                row = page.locator(f"table.{table} tbody tr").first
                assert row.evaluate("r => getComputedStyle(r).display") == "table-row"
            # the fold the reader opened stays open when the next poll swaps the part in
            as_of = page.text_content("time.as-of")
            wait_for(lambda: page.text_content("time.as-of") != as_of, 15, "the next poll",
                     interval=0.1)
            assert page.locator("#status-details").evaluate("d => d.open") is True
            header = page.locator("table.keys thead th").all_inner_texts()
            assert [h.lower() for h in header[1:7]] == [
                "holder", "term", "held since", "heartbeat", "standbys", "last work"]
            page.screenshot(path=tmp_path / "status-wide.png", full_page=True)
        finally:
            page.context.close()
