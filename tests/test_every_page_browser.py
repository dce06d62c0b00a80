"""Every page, as every role, in real headless Chromium at 1280 px: under the strict Content-
Security-Policy, checked with axe-core for accessibility and for sideways scroll, in one visit.

The app is served from a thread of the test process (werkzeug, real PostgreSQL), so no
gunicorn is started: the headers come from the app itself. A CSP violation is caught twice,
by a `securitypolicyviolation` listener installed before any page script and by Chromium's
"Refused to ..." console messages; htmx's own "eval is disallowed" events count too.
Chromium's XML viewer styles the feed and the sitemap inline itself: those reports are the
browser's, not the documents', and are the only ones let through.

axe-core (vendored by axe-playwright-python) runs on each page the role may see, once the
fragments htmx loads with it are in (a timer's next runs, a post's time hint). A serious or
critical violation fails the test, and so do duplicate landmarks and empty table headers
(milder, but once reported), and any request of a page that answers 404. The status page is
checked with leaders, standbys and history on it. The feed and the sitemap are XML, shown by
Chromium's own viewer: not checked by axe. One visit serves both checks: a page load costs
the full browser 100-130 ms of CPU (less in the headless shell the tests run), and the two
sweeps made about 230 of them.

The pages are listed in tests/harness/support.py (pages), shared with the phone test.
"""

from urllib.parse import urlsplit

import pytest

from tests.harness.cluster import wait_for
from tests.harness.support import RANK, ROLES, expected_status, leaders, pages, sign_in_page

LIVE = 15_000  # ms a polled fragment gets to change (2 s polls; a busy CI box is slow)
XML_VIEWED = {"/feed.xml", "/sitemap.xml"}  # shown by Chromium's XML viewer
SETTLED = "() => !document.querySelector('.htmx-request')"  # htmx has none in flight
FAILING = {"serious", "critical"}
NAMED = {"landmark-unique", "empty-table-header"}  # milder, but reported once: kept fixed
WIDE = {"width": 1280, "height": 800}  # a laptop (the phone's 390 px: test_every_page_on_a_phone)
SIDEWAYS = "() => document.scrollingElement.scrollWidth - window.innerWidth"

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
        self.missing: list[str] = []  # every URL the tab asked for that answered 404
        self.context = browser.new_context(base_url=base, viewport=WIDE)
        self.context.expose_function("reportViolation", self._report)
        self.context.add_init_script(WATCH)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("response", lambda r: self.missing.append(r.url) if r.status == 404
                     else None)
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


@pytest.fixture(scope="module")
def axe():
    from axe_playwright_python.sync_playwright import Axe

    return Axe()


def accessible_to(site: dict, role: str | None) -> set[str]:
    """Return the pages axe checks as role: public ones signed out, the rest as each role."""
    if role is None:
        return {path for path, needs in pages(site) if needs is None and path not in XML_VIEWED}
    return {path for path, needs in pages(site) if needs and RANK[needs] <= RANK[role]}


def accessibility_violations(axe, page) -> list[str]:
    """Run axe on page; return its serious and critical violations, one line per element."""
    found = axe.run(page).response["violations"]
    return [f"{v['id']} ({v['impact']}): {', '.join(map(str, node['target']))}"
            f" {node['html'][:120]}"
            for v in found if v["impact"] in FAILING or v["id"] in NAMED for node in v["nodes"]]


def visit_all(browser, axe, site: dict, role: str | None) -> list[str]:
    """Visit every page as role, running axe on those it may see; return what went wrong
    (wrong answers, accessibility and CSP violations, 404s)."""
    tab, who, wrong = Tab(browser, site["url"], role), role or "anonymous", []
    checked = accessible_to(site, role)
    try:
        for path, needs in pages(site):
            status = tab.visit(path)
            if status != expected_status(path, needs, role):
                wrong.append(f"{who} {path}: HTTP {status}")
            elif needs and role is None and "/login" not in tab.page.url:
                wrong.append(f"{who} {path}: not sent to sign in")
            elif path in checked:
                tab.page.wait_for_function(SETTLED)  # fragments loaded with the page are in
                wrong += [f"{who} {path}: {violation}"
                          for violation in accessibility_violations(axe, tab.page)]
                if (over := tab.page.evaluate(SIDEWAYS)) > 0:
                    wrong.append(f"{who} {path}: scrolls {over} px sideways at 1280 px")
        tab.page.evaluate("() => 0")  # a round trip: reports already sent have arrived
    finally:
        tab.close()
    return (wrong + [f"{who} {violation}" for violation in tab.violations]
            + [f"{who}: 404 for {url}" for url in tab.missing
               if not url.endswith("/no-such-page")])


@pytest.mark.parametrize("role", [None, *ROLES])
def test_every_page_loads_without_a_policy_or_a_serious_accessibility_violation(
        browser, axe, site, app, pg_url, role):
    with leaders(app, pg_url):
        assert visit_all(browser, axe, site, role) == []


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
