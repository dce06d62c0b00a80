"""Markup an editor writes never becomes markup of a page: an image's title is escaped in its
caption, and a post's rendered body sits in an hx-disable container wherever it is shown, so
no htmx attribute in a post ever runs (on the public page, a preview link's page, the
editor's live preview, the change of a live post and a kept version)."""

from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest

from tests.harness.support import new_post, post_form, text
from webapp.extensions import db
from webapp.posts import previews, revisions

MARK = "/admin/users/smuggled"  # where a smuggled hx-post would send the reader's request
# every way into a post's HTML an htmx attribute could try: an image's title (moved into a
# caption after sanitising), its alt, a link's title, raw HTML, an autolink, entities
BODY = "\n\n".join([
    f'![A gull](/g.png "<b hx-post={MARK} hx-trigger=load>caption</b>")',
    f'![<i hx-post="{MARK}">](/h.png)',
    f'[a link](/x "<i hx-post={MARK} hx-trigger=load>")',
    f'<div hx-post="{MARK}" hx-trigger="load">raw</div>',
    f'<img src="/x.png" hx-post="{MARK}" data-hx-post="{MARK}" hx-trigger="load">',
    f'<https://example.com/" hx-post="{MARK}>',
    f'![x](/i.png "&lt;b hx-post={MARK}&gt;")',
    f'![y](/j.png "q\\" hx-post=\\"{MARK}")',
    f"| a |\n|---|\n| <b hx-post={MARK}>cell</b> |",
])
CAPTION = f"&lt;b hx-post={MARK} hx-trigger=load&gt;caption&lt;/b&gt;"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Page(HTMLParser):
    """Each element of a page with its attributes and whether an ancestor is hx-disable."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.open: list[tuple[str, bool]] = []  # (tag, disabled) of the open elements
        self.found: list[tuple[str, dict, bool]] = []  # (tag, attributes, inside hx-disable)
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = {name: value or "" for name, value in attrs}
        inside = bool(self.open and self.open[-1][1])
        self.found.append((tag, attributes, inside))
        if tag not in VOID:
            disabled = inside or "hx-disable" in attributes or "data-hx-disable" in attributes
            self.open.append((tag, disabled))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i][0] == tag:
                del self.open[i:]
                return


def assert_no_htmx_attribute_of_the_post_can_run(html: str) -> None:
    """Fail unless the post sits in an hx-disable container, no htmx attribute of the post
    reached an element, and any that did is inside hx-disable."""
    found = Page(html).found
    assert any(tag == "figcaption" and inside for tag, _, inside in found), \
        "the post's body is not inside an hx-disable container"
    # a bare hx-disable is no HTML attribute (the Nu checker's error): data-hx-disable is
    assert not any("hx-disable" in attributes for _, attributes, _ in found)
    for tag, attributes, inside in found:
        htmx = {n: v for n, v in attributes.items() if n.startswith(("hx-", "data-hx-"))}
        smuggled = {n: v for n, v in htmx.items() if MARK in v}
        assert not smuggled, (tag, smuggled)
        if "hx-post" in htmx and not inside:  # the page's own: never to the smuggled address
            assert MARK not in htmx["hx-post"], tag
    assert f"<figcaption>{CAPTION}</figcaption>" in html
    assert f"<b hx-post={MARK}" not in html and f"<b hx-post=\"{MARK}" not in html


@pytest.fixture
def post_id(app):
    """A published post with the hostile body, its first version kept."""
    post = new_post(app, "Hostile", status="published", body=BODY,
                    published_at=datetime.now(UTC))
    with app.app_context():
        revisions.keep(post, "Hostile", BODY, "create", True)
        db.session.commit()
    return post


def test_the_public_page_escapes_the_title_and_disables_htmx_in_the_post(app, post_id):
    response = app.test_client().get("/posts/hostile")
    assert response.status_code == 200
    assert_no_htmx_attribute_of_the_post_can_run(text(response))


def test_a_preview_links_page_does_too(app):
    draft = new_post(app, "Hostile draft", body=BODY)
    with app.app_context():
        _link, token = previews.create_link(draft, 1, None)
        db.session.commit()
    response = app.test_client().get(f"/preview/{token}")
    assert response.status_code == 200
    assert_no_htmx_attribute_of_the_post_can_run(text(response))


@pytest.mark.parametrize("page", ["/admin/posts/{id}", "/admin/posts/{id}/change",
                                  "/admin/posts/{id}/history/1"])
def test_the_editors_pages_show_the_post_inert_in_an_hx_disable_container(auth, post_id, page):
    editor = auth.client("editor")
    response = editor.get(page.format(id=post_id))
    assert response.status_code == 200
    assert_no_htmx_attribute_of_the_post_can_run(text(response))


def test_the_live_preview_escapes_the_title_into_its_hx_disable_container(app, auth):
    editor = auth.client("editor")
    page = Page(text(editor.get("/admin/posts/new"))).found
    assert any(attributes.get("id") == "preview" and "data-hx-disable" in attributes
               for _, attributes, _ in page)  # where htmx swaps the preview in
    fragment = text(post_form(editor, "/admin/posts/preview", {"body": BODY}))
    assert_no_htmx_attribute_of_the_post_can_run(
        f'<div id="preview" data-hx-disable>{fragment}</div>')
