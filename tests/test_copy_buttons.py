"""Copy buttons beside what is shown once or pasted elsewhere, in real headless Chromium.

A preview link, a new webhook's secret and a media file's Markdown: a click puts the exact
text on the clipboard, the button says "Copied" and a status region says it aloud (no inline
script: the CSP refuses it, soloist.js listens for [data-copy]).
"""

from tests.harness.support import sign_in_page


def _copy(page, button: str) -> str:
    """Click the Copy button named button; return what the clipboard then holds."""
    from playwright.sync_api import expect

    page.get_by_role("button", name=button).first.click()
    expect(page.get_by_role("button", name="Copied")).to_have_count(1)
    expect(page.locator("#copy-status")).to_have_text("Copied to the clipboard.")
    return page.evaluate("navigator.clipboard.readText()")


def test_copy_buttons_put_the_link_the_secret_and_the_markdown_on_the_clipboard(browser, site):
    context = browser.new_context(base_url=site["url"])
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site["url"])
    page = context.new_page()
    try:
        sign_in_page(page, "admin@example.com")
        page.goto(f"/admin/posts/{site['post']}")
        page.get_by_role("button", name="Make a link").click()
        link = page.locator("#new-preview-link").text_content().strip()
        assert link.startswith("http") and _copy(page, "Copy link") == link
        page.goto("/admin/webhooks/")
        assert _copy(page, "Copy secret") == page.locator("#f-secret").input_value() != ""
        page.goto("/admin/media/")
        markdown = page.locator("code[id^=markdown-]").first.text_content()
        assert markdown.startswith("![The harbour](/media/")
        assert _copy(page, "Copy the Markdown of harbour.jpg") == markdown
    finally:
        context.close()
