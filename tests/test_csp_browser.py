"""Every page, as every role, in real headless Chromium under the strict Content-Security-Policy.

The app is served from a thread of the test process (werkzeug, real PostgreSQL), so no
gunicorn is started: the headers come from the app itself. A violation is caught twice, by
a `securitypolicyviolation` listener installed before any page script and by Chromium's
"Refused to ..." console messages; htmx's own "eval is disallowed" events count too.
Chromium's XML viewer styles the feed and the sitemap inline itself: those reports are the
browser's, not the documents', and are the only ones let through. The pages are listed in
tests/support.py (pages), shared with the accessibility test.
"""

from urllib.parse import urlsplit

import pytest

from tests.cluster import wait_for
from tests.support import ROLES, expected_status, pages, sign_in_page

LIVE = 15_000  # ms a polled fragment gets to change (2 s polls; a busy CI box is slow)
XML_VIEWED = {"/feed.xml", "/sitemap.xml"}  # shown by Chromium's XML viewer

WATCH = """
(() => {
  window.cspViolations = [];
  const report = (text) => {
    window.cspViolations.push(text);
    window.reportViolation(location.pathname, text);
  };
  document.addEventListener("securitypolicyviolation", (e) => report(
    e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " + e.sourceFile
    + ":" + e.lineNumber), true);
  for (const name of ["htmx:evalDisallowedError", "htmx:syntax:error"]) {
    document.addEventListener(name, () => report(name), true);
  }
})();
"""


class Tab:
    """One role's browser context and tab, recording every violation it reports."""

    def __init__(self, browser, base: str, role: str | None) -> None:
        self.violations: list[str] = []
        self.context = browser.new_context(base_url=base)
        self.context.expose_function("reportViolation", self._report)
        self.context.add_init_script(WATCH)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        if role:
            self.sign_in(f"{role}@example.com")

    def _report(self, path: str, text: str) -> None:
        if not (path in XML_VIEWED and "style" in text and "inline" in text):
            self.violations.append(f"{path}: {text}")

    def _console(self, message) -> None:
        if "Content Security Policy" in message.text or message.text.startswith("Refused to"):
            self._report(urlsplit(self.page.url).path, message.text)

    def sign_in(self, email: str) -> None:
        sign_in_page(self.page, email)

    def visit(self, path: str) -> int:
        """Open path and return its HTTP status, once the page has loaded."""
        response = self.page.goto(path)
        return response.status

    def close(self) -> None:
        self.context.close()


def visit_all(browser, site: dict, role: str | None) -> list[str]:
    """Visit every page as role; return what went wrong (wrong answers and violations)."""
    tab, who, wrong = Tab(browser, site["url"], role), role or "anonymous", []
    try:
        for path, needs in pages(site):
            status = tab.visit(path)
            if status != expected_status(path, needs, role):
                wrong.append(f"{who} {path}: HTTP {status}")
            elif needs and role is None and "/login" not in tab.page.url:
                wrong.append(f"{who} {path}: not sent to sign in")
        tab.page.evaluate("() => 0")  # a round trip: reports already sent have arrived
    finally:
        tab.close()
    return wrong + [f"{who} {violation}" for violation in tab.violations]


@pytest.mark.parametrize("role", [None, *ROLES])
def test_every_page_loads_without_a_content_security_policy_violation(browser, site, role):
    assert visit_all(browser, site, role) == []


def test_the_watch_catches_a_violation_like_htmxs_injected_style(browser, site):
    tab = Tab(browser, site["url"], None)
    try:
        tab.visit("/login")  # an admin page: the public site loads no script at all
        # what htmx does when includeIndicatorStyles is left on
        tab.page.evaluate("""document.head.insertAdjacentHTML(
            "beforeend", "<style>.htmx-indicator{opacity:0}</style>")""")
        wait_for(lambda: tab.page.evaluate("window.cspViolations.length"), LIVE / 1000,
                 "the injected style to be reported", interval=0.05)
        assert tab.page.evaluate("htmx.config.includeIndicatorStyles") is False
        assert tab.page.evaluate("htmx.config.allowEval") is False
    finally:
        tab.close()
    assert any("style-src" in v for v in tab.violations), tab.violations


def test_htmx_previews_a_post_and_polls_the_status_page_under_the_policy(browser, site):
    from playwright.sync_api import expect

    tab = Tab(browser, site["url"], "admin")
    try:
        page = tab.page
        tab.visit("/admin/posts/new")
        page.fill("#f-body", "Some **strong** words.")  # hx-post with the CSRF header
        expect(page.locator("#preview strong")).to_have_text("strong", timeout=LIVE)

        tab.visit("/status/")
        as_of = page.get_attribute("time.as-of", "datetime")
        page.evaluate("window.sameDocument = true")
        expect(page.locator("time.as-of")).not_to_have_attribute("datetime", as_of,
                                                                 timeout=LIVE)
        assert page.evaluate("window.sameDocument") is True  # swapped in, not reloaded
    finally:
        tab.close()
    assert tab.violations == []


HIDE = """(hidden) => {
  Object.defineProperty(document, "visibilityState",
                        {configurable: true, get: () => hidden ? "hidden" : "visible"});
  document.dispatchEvent(new Event("visibilitychange"));
}"""

COUNT_POLLS = """() => {
  window.polls = {asked: 0, sent: 0};
  document.addEventListener("htmx:confirm", () => window.polls.asked++);
  document.addEventListener("htmx:beforeRequest", () => window.polls.sent++);
}"""


def test_the_status_page_skips_polls_while_hidden_and_polls_at_once_when_shown(browser, site):
    tab = Tab(browser, site["url"], "viewer")
    try:
        page = tab.page
        tab.visit("/status/")
        page.evaluate(COUNT_POLLS)
        page.evaluate(HIDE, True)  # a visibilitychange, then the 2 s poll: both held back
        wait_for(lambda: page.evaluate("window.polls.asked") >= 2, LIVE / 1000,
                 "the page to want two polls while hidden", interval=0.1)
        assert page.evaluate("window.polls.sent") == 0
        with page.expect_request("**/status/live", timeout=LIVE):
            page.evaluate(HIDE, False)
    finally:
        tab.close()
    assert tab.violations == []
