"""Every page on a 390 px phone, as every role that may open it, in real headless Chromium.

A page that scrolls sideways hides its controls off-screen (the timers list's Run now, the
webhooks page's Switch off). Each page of tests.harness.support.pages() is opened as each role
allowed to see it and must scroll only vertically; the overflowing elements are named.
"""

from tests.harness.editor_forms import opened
from tests.harness.support import (
    ROLES,
    AuthActions,
    add_user,
    expected_status,
    new_post,
    pages,
    post_form,
    serve,
    sign_in_page,
)
from webapp.ops import freezes

PHONE = {"width": 390, "height": 844}

# where the page gets too wide: each element that crosses the screen's edge while its
# parent does not (the first one too wide on its own, or pushed out by a sibling)
TOO_WIDE = """() => {
  const wide = document.documentElement.clientWidth;
  const over = (e) => e.getClientRects().length && e.getBoundingClientRect().right > wide + 0.5;
  return [...document.querySelectorAll("body *")]
    .filter((e) => over(e) && !(e.parentElement && e.parentElement !== document.body
                               && over(e.parentElement)))
    .slice(0, 5)
    .map((e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "")
                + (e.className && typeof e.className == "string" ? "." + e.className : "")
                + " " + Math.round(e.getBoundingClientRect().right) + "px");
}"""


def test_no_page_scrolls_sideways_on_a_phone_for_any_role(browser, site):
    wide, found = {}, {}
    for role in (None, *ROLES):
        context = browser.new_context(base_url=site["url"], viewport=PHONE, is_mobile=True,
                                      has_touch=True)
        page = context.new_page()
        try:
            if role:
                sign_in_page(page, f"{role}@example.com")
            for path, needs in pages(site):
                if path.endswith(".xml") or expected_status(path, needs, role) == 403:
                    continue
                if role is not None and needs is None and path != "/":
                    continue  # the public pages once, signed out, and the home page signed in
                page.goto(path)
                width = page.evaluate("document.scrollingElement.scrollWidth")
                if width > PHONE["width"]:
                    wide[(path, role)] = (width, page.evaluate(TOO_WIDE))
                if role == "editor":
                    found.update(phone_findings(page, path, site))
        finally:
            context.close()
    assert wide == {}, "pages wider than a 390 px phone: " + "; ".join(
        f"{path} as {role}: {width} px ({', '.join(what)})"
        for (path, role), (width, what) in wide.items())
    assert found == {"panel top": found["panel top"], "clipped cells": []}, found
    assert found["panel top"] < PHONE["height"], "Publication is below the first screen"


# cells of the posts list cut off at the right: wider than their box, or past the table's
CLIPPED = """() => {
  const wrap = document.querySelector("#post-rows .table-wrap").getBoundingClientRect();
  return [...document.querySelectorAll("#post-rows td")]
    .filter((td) => td.scrollWidth > td.clientWidth + 1
                    || td.getBoundingClientRect().right > wrap.right + 0.5)
    .map((td) => (td.dataset.label || "?") + ": " + td.textContent.trim().slice(0, 20));
}"""


def phone_findings(page, path: str, site: dict) -> dict:
    """What an editor on a phone notices on the posts list and on Edit post (finding 7)."""
    if path == "/admin/posts/":
        return {"clipped cells": page.evaluate(CLIPPED)}
    if path == f"/admin/posts/{site['post']}":
        return {"panel top": page.evaluate(
            "document.querySelector('#panel').getBoundingClientRect().top + scrollY")}
    return {}


def admin_navigation(browser, site, **context) -> tuple[float, float]:
    """Return the height of the admin navigation and of one of its links, signed in."""
    opened = browser.new_context(base_url=site["url"], **context)
    page = opened.new_page()
    try:
        sign_in_page(page, "admin@example.com")
        nav = page.locator("header nav.nav").bounding_box()
        return nav["height"], page.locator("header nav.nav a").first.bounding_box()["height"]
    finally:
        opened.close()


def test_the_admin_navigation_keeps_to_one_row_on_a_wide_screen(browser, site):
    nav, link = admin_navigation(browser, site, viewport={"width": 1280, "height": 900})
    assert nav <= link * 1.8, f"the navigation wraps: {nav} px"


def test_the_editor_is_wide_on_a_wide_screen(browser, site):
    """At 1280 px the body field is wide enough for a ## heading on one line (finding 7)."""
    opened = browser.new_context(base_url=site["url"], viewport={"width": 1280, "height": 900})
    page = opened.new_page()
    try:
        sign_in_page(page, "editor@example.com")
        widths = {}
        for path in ("/admin/posts/new", f"/admin/posts/{site['post']}"):
            page.goto(path)
            widths[path] = page.locator("#f-body").bounding_box()["width"]
            preview = page.locator("#preview").bounding_box()["width"]
            assert preview >= 550, f"{path}: the preview is {preview:.0f} px wide"
    finally:
        opened.close()
    assert min(widths.values()) >= 550, f"the body field is narrow: {widths}"


def test_the_admin_navigation_takes_at_most_two_rows_on_a_phone(browser, site):
    nav, link = admin_navigation(browser, site, viewport=PHONE, is_mobile=True)
    assert nav <= link * 2.3, f"the navigation takes {nav} px"


LONG_WORD = "https://status.example.com/incidents/" + "0f3a9c2e" * 12  # nowhere to break


def test_a_long_word_in_a_freeze_reason_or_a_title_and_the_metrics_page_fit_a_phone(browser,
                                                                                    app):
    # a URL pasted into a freeze reason or a title has no space to wrap at: it must wrap
    # anywhere rather than push the page sideways; /metrics, met by a curious admin, too
    for role in ("editor", "admin"):
        add_user(app, f"{role}@example.com", role)
    post_id = new_post(app, body="Saved text.")
    with app.app_context():
        freezes.freeze("publishing", f"Launch review, see {LONG_WORD}", "publish",
                       "admin@example.com")
    editor = AuthActions(app.test_client()).client("editor")
    post_form(editor, f"/admin/posts/{post_id}/autosave", {
        "title": LONG_WORD, "slug": "hello", "body": "Typed text.", **opened(editor, post_id)})
    wide = {}
    with serve(app) as url:
        context = browser.new_context(base_url=url, viewport=PHONE, is_mobile=True)
        page = context.new_page()
        try:
            page.goto("/metrics")
            wide["/metrics"] = page.evaluate("document.scrollingElement.scrollWidth")
            sign_in_page(page, "editor@example.com")
            for path in (f"/admin/posts/{post_id}", "/admin/", "/status/"):
                page.goto(path)
                wide[path] = page.evaluate("document.scrollingElement.scrollWidth")
        finally:
            context.close()
    assert wide == dict.fromkeys(wide, PHONE["width"]), f"wider than the phone: {wide}"
