"""An editor who uses no mouse: sign in, write, schedule and publish a post with keys alone.

Real headless Chromium against the app served from a thread. Every control is reached
with Tab (never clicked, filled or focused by the test), each one shows that it has the
focus, and the date-time picker is typed into segment by segment as a person would.
"""

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from tests.harness.support import PASSWORD
from webapp.extensions import db
from webapp.models import Post

LIVE = 15_000  # ms the page gets to show a change (a busy CI box is slow)

FOCUSED = """(selector) => {
  const e = document.activeElement;
  if (!e || !e.matches(selector)) return null;
  const style = getComputedStyle(e);
  return style.outlineStyle !== "none" || style.boxShadow !== "none" ? "ring" : "no ring";
}"""


def stored(app) -> Post:
    """Return the post as the database has it now (publish_at in UTC)."""
    with app.app_context():
        post = db.session.scalar(sa.select(Post).where(Post.title == "Typed, not clicked"))
        db.session.expunge(post)
    if post.publish_at:
        post.publish_at = post.publish_at.replace(tzinfo=UTC)
    return post


def tab_to(page, selector: str, most: int = 40) -> None:
    """Press Tab until selector has the focus (with a visible ring), at most `most` times."""
    for _ in range(most):
        page.keyboard.press("Tab")
        found = page.evaluate(FOCUSED, selector)
        if found:
            assert found == "ring", f"{selector} has the focus but does not show it"
            return
    raise AssertionError(f"{selector} was not reached in {most} presses of Tab")


def type_into(page, selector: str, keys: str) -> None:
    tab_to(page, selector)
    page.keyboard.type(keys)


def test_an_editor_writes_schedules_and_publishes_a_post_with_the_keyboard_alone(browser, site,
                                                                                app):
    from playwright.sync_api import expect

    context = browser.new_context(base_url=site["url"], locale="en-US", timezone_id="UTC")
    page = context.new_page()
    try:
        page.goto("/login")
        type_into(page, "#f-email", "editor@example.com")
        type_into(page, "#f-password", PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url("**/admin/")

        tab_to(page, 'nav a[href="/admin/posts/"]')
        page.keyboard.press("Enter")
        page.wait_for_url("**/admin/posts/")
        tab_to(page, 'a[href="/admin/posts/new"]')
        page.keyboard.press("Enter")
        page.wait_for_url("**/admin/posts/new")

        type_into(page, "#f-title", "Typed, not clicked")
        type_into(page, "#f-body", "Written with the **keyboard** alone.")
        expect(page.locator("#preview strong")).to_have_text("keyboard", timeout=LIVE)
        tab_to(page, "#content-form button.primary")
        page.keyboard.press("Enter")
        expect(page.locator("#post-status")).to_have_text("draft", timeout=LIVE)

        # the picker's segments, en-US: month, day, year (up to six digits: → leaves it),
        # hour, minute, second, AM/PM; each of the others moves on once it is full
        when = datetime.now(UTC) + timedelta(days=2)
        type_into(page, "#f-publish_at", when.strftime("%m%d%Y"))
        page.keyboard.press("ArrowRight")
        page.keyboard.type("091500A")
        expect(page.locator("#when-hint")).to_contain_text(
            f"= {when:%a} {when.day} {when:%b}", timeout=LIVE)  # "= Thu 3 Dec, 09:15 UTC"
        expect(page.locator("#when-hint")).to_contain_text("09:15 UTC")
        tab_to(page, "#schedule-form button.primary")
        page.keyboard.press("Enter")
        expect(page.locator("#post-status")).to_have_text("scheduled", timeout=LIVE)
        assert stored(app).publish_at == when.replace(hour=9, minute=15, second=0,
                                                      microsecond=0)

        tab_to(page, 'form[action$="/publish"] button')
        asked = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        page.keyboard.press("Enter")
        expect(page.locator("#post-status")).to_have_text("published", timeout=LIVE)
        assert asked == ["Publish this post on the site now?"]
    finally:
        context.close()
    post = stored(app)
    assert post.status == "published" and "**keyboard**" in post.body
