"""The public site as readers see it, in real headless Chromium at 390 and 1280 px.

What a reader notices: the site's own header and no admin chrome, lines of a comfortable
length, a block quote that is marked as one, nothing wider than a phone, dark mode, and an
editor's bar to edit what they read. Saves docs/site-post.png and docs/site-post-phone.png.
"""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.harness.support import new_post, sign_in_page

DOCS = Path(__file__).resolve().parent.parent / "docs"
WIDE = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}

PARAGRAPH = ("The boats came in at dawn, low in the water with the night's catch, and the "
             "harbour woke to the sound of winches and gulls. By seven the quay was a market: "
             "crates of mackerel on ice, a man selling coffee from a van, children weaving "
             "between the forklifts on their way to school. ")
BODY = f"""{PARAGRAPH * 2}

## What the harbour master said

> We have not seen a season like this in twenty years. The water is colder, the fish
> are closer, and everybody wants to be out before the weather turns.

The new rules, in short:

1. Boats under ten metres land at the **east** quay.
2. The fish market opens at `05:30`, half an hour earlier.
3. Ice is free until the end of the month.

| Day | Landed | Price per kilo |
|---|---|---|
| Monday | 4.2 t | €3.10 |
| Tuesday | 5.8 t | €2.85 |

```
tide  05:12  high  4.1 m
tide  11:31  low   0.9 m
```

{PARAGRAPH}
"""

# characters a line holds: the paragraph's width over the average width of a character of
# its own text in its own font (canvas measures with the font Chromium draws it with)
MEASURE = """() => {
  const p = document.querySelector(".prose p");
  const style = getComputedStyle(p);
  const context = document.createElement("canvas").getContext("2d");
  context.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const sample = p.textContent;
  return p.getBoundingClientRect().width / (context.measureText(sample).width / sample.length);
}"""
LAYOUT_SHIFT = """() => new Promise((done) => {
  let total = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) if (!entry.hadRecentInput) total += entry.value;
  }).observe({type: "layout-shift", buffered: true});
  setTimeout(() => done(total), 500);
})"""


@pytest.fixture
def story(site, app):
    """A published post with a quote, a list, a table and code, on the served site."""
    new_post(app, "A record season at the harbour", slug="record-season", status="published",
             published_at=datetime(2026, 3, 29, 23, 30, tzinfo=UTC), body=BODY)
    return {**site, "path": "/posts/record-season"}


def open_page(browser, story, viewport, **context):
    opened = browser.new_context(base_url=story["url"], viewport=viewport, **context)
    return opened, opened.new_page()


def test_a_post_reads_like_a_post_on_a_wide_screen(browser, story):
    context, page = open_page(browser, story, WIDE)
    try:
        page.goto(story["path"])
        assert page.locator("header nav, .nav, .who").count() == 0, "admin chrome, signed out"
        assert page.locator(".editor-bar").count() == 0
        assert page.locator(".site-header .site-name").inner_text() == "Soloist"
        assert page.locator("footer a[href='/feed.xml']").count() == 1
        characters = page.evaluate(MEASURE)
        print(f"measure at 1280 px: {characters:.1f} characters")
        assert 60 <= characters <= 80, f"lines of {characters:.0f} characters"
        quote = page.locator(".prose blockquote")
        mark = quote.evaluate("q => [getComputedStyle(q).borderLeftWidth,"
                              " getComputedStyle(q, '::before').content]")
        assert float(mark[0].removesuffix("px")) >= 3 and mark[1] == '"\u201c"', mark
        assert page.locator("time").first.inner_text() == "29 March 2026"
        h1, h2, p = (page.locator(s).first.evaluate("e => parseFloat(getComputedStyle(e)"
                                                    ".fontSize)")
                     for s in (".post h1", ".prose h2", ".prose p"))
        assert h1 > h2 > p, (h1, h2, p)
        assert page.evaluate(LAYOUT_SHIFT) == 0
        page.screenshot(path=str(DOCS / "site-post.png"))
    finally:
        context.close()


def test_a_post_fits_a_phone_and_its_table_and_code_scroll_inside_it(browser, story):
    context, page = open_page(browser, story, PHONE, is_mobile=True, has_touch=True)
    try:
        page.goto(story["path"])
        assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
        characters = page.evaluate(MEASURE)
        assert 30 <= characters <= 60, f"lines of {characters:.0f} characters on a phone"
        page.screenshot(path=str(DOCS / "site-post-phone.png"))
    finally:
        context.close()


def test_dark_mode_darkens_the_page(browser, story):
    backgrounds = {}
    for scheme in ("light", "dark"):
        context, page = open_page(browser, story, WIDE, color_scheme=scheme)
        try:
            page.goto(story["path"])
            backgrounds[scheme] = page.evaluate(
                "() => getComputedStyle(document.body).backgroundColor")
        finally:
            context.close()
    assert backgrounds["light"] != backgrounds["dark"], backgrounds
    assert backgrounds["dark"] == "rgb(22, 24, 28)"


def test_an_editor_reads_with_a_bar_to_edit_the_post_and_print_leaves_it_out(browser, story):
    context, page = open_page(browser, story, WIDE)
    try:
        sign_in_page(page, "editor@example.com")
        page.goto(story["path"])
        bar = page.locator("nav.editor-bar")
        assert bar.locator("a", has_text="Edit").first.get_attribute("href").startswith(
            "/admin/posts/")
        assert bar.locator("a", has_text="Admin").get_attribute("href") == "/admin/"
        assert page.locator("header .nav").count() == 0
        page.emulate_media(media="print")
        assert not bar.is_visible() and not page.locator(".site-footer").is_visible()
    finally:
        context.close()


def test_a_missing_page_is_the_sites_own(browser, story):
    context, page = open_page(browser, story, WIDE)
    try:
        assert page.goto("/posts/no-such-post").status == 404
        assert page.locator(".site-header .site-name").count() == 1
        assert page.locator("h1").inner_text() == "Page not found"
    finally:
        context.close()


def test_a_preview_link_shows_the_draft_with_its_banner(browser, story):
    context, page = open_page(browser, story, WIDE)
    try:
        page.goto(story["preview"])
        banner = page.locator(".preview-banner")
        assert banner.is_visible() and banner.inner_text().startswith("Preview — not published")
        assert page.locator("h1").inner_text() == "Soon"
        assert page.locator(".editor-bar").count() == 0
        page.screenshot(path=str(DOCS / "site-preview.png"))
    finally:
        context.close()
