"""Every page, as every role, checked with axe-core in real headless Chromium.

axe-core (vendored by axe-playwright-python) runs on each page a role may see, the pages
listed once in tests/support.py (pages) for this test and the CSP test. A serious or
critical violation fails the test, and so do duplicate landmarks and empty table headers
(milder, but once reported), and any request of a page that answers 404. The status page
is checked with leaders, standbys and history on it, and a page's fragments that htmx loads
with it (a timer's next runs, a post's time hint) are waited for.
The feed and the sitemap are XML, shown by Chromium's own viewer: not checked.
"""

import pytest

from tests.support import RANK, ROLES, leaders, pages, sign_in_page

XML = {"/feed.xml", "/sitemap.xml"}
SETTLED = "() => !document.querySelector('.htmx-request')"  # htmx has none in flight
FAILING = {"serious", "critical"}
NAMED = {"landmark-unique", "empty-table-header"}  # milder, but reported once: kept fixed


@pytest.fixture(scope="module")
def axe():
    from axe_playwright_python.sync_playwright import Axe

    return Axe()


def visible_to(site: dict, role: str | None) -> list[str]:
    """Return the pages to check as role: public ones signed out, the rest as each role."""
    if role is None:
        return [path for path, needs in pages(site) if needs is None and path not in XML]
    return [path for path, needs in pages(site) if needs and RANK[needs] <= RANK[role]]


def violations(axe, page) -> list[str]:
    """Run axe on page; return its serious and critical violations, one line per element."""
    found = axe.run(page).response["violations"]
    return [f"{v['id']} ({v['impact']}): {', '.join(map(str, node['target']))}"
            f" {node['html'][:120]}"
            for v in found if v["impact"] in FAILING or v["id"] in NAMED for node in v["nodes"]]


def check_as(browser, axe, site: dict, role: str | None) -> list[str]:
    """Visit role's pages in one context; return each violation and each 404 beside the page."""
    context = browser.new_context(base_url=site["url"])
    page, missing = context.new_page(), []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    found = []
    try:
        if role:
            sign_in_page(page, f"{role}@example.com")
        for path in visible_to(site, role):
            page.goto(path)
            page.wait_for_function(SETTLED)  # fragments loaded with the page are in it
            found += [f"{role or 'anonymous'} {path}: {v}" for v in violations(axe, page)]
    finally:
        context.close()
    return found + [f"{role or 'anonymous'}: 404 for {url}" for url in missing
                    if not url.endswith("/no-such-page")]


def test_no_page_has_a_serious_accessibility_violation_for_any_role(
        browser, axe, site, app, pg_url):
    with leaders(app, pg_url):
        found = [v for role in (None, *ROLES) for v in check_as(browser, axe, site, role)]
    assert found == [], "\n".join(found)
