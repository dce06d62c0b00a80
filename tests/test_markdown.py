"""Markdown bodies render to HTML in which no script, handler or javascript: link survives."""

from html import unescape
from html.parser import HTMLParser

import pytest

from webapp.site.markdown import figures, render


def test_markdown_renders_headings_emphasis_lists_code_and_tables():
    html = render("# Title\n\n*em* **strong** `code`\n\n- a\n- b\n\n"
                  "| x | y |\n|---|---|\n| 1 | 2 |")
    for piece in ("<h1>Title</h1>", "<em>em</em>", "<strong>strong</strong>", "<code>code</code>",
                  "<li>a</li>", "<table>", "<td>1</td>"):
        assert piece in html


class Elements(HTMLParser):
    """Collect the real elements and attributes of an HTML fragment (not escaped text)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.found.append((tag, {name: value or "" for name, value in attrs}))


def assert_inert(html: str) -> None:
    """Fail if html has an element or attribute that could run script."""
    for tag, attrs in Elements(html).found:
        assert tag not in {"script", "svg", "iframe", "object", "embed", "style"}, tag
        for name, value in attrs.items():
            assert not name.startswith("on") and name != "style", (tag, name)
            if name in {"href", "src"}:
                assert value.strip().lower().startswith(("http:", "https:", "mailto:", "/")), \
                    (tag, name, value)


@pytest.mark.parametrize("source", [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](  javascript:alert(1))",
    "[click](java&#115;cript:alert(1))",
    '<a href="javascript:alert(1)">x</a>',
    "![x](javascript:alert(1))",
    "<svg onload=alert(1)>",
    "<iframe src=https://evil.example></iframe>",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "<https://ok.example> <javascript:alert(1)>",
])
def test_markup_that_could_run_script_comes_out_inert(source):
    assert_inert(render(source))


def test_links_get_rel_noopener_and_keep_safe_urls():
    html = render("[site](https://example.com/a?b=1) [local](/posts/hello) [mail](mailto:a@b.c)")
    assert '<a href="https://example.com/a?b=1" rel="noopener noreferrer nofollow">' in html
    assert 'href="/posts/hello"' in html and 'href="mailto:a@b.c"' in html


def test_an_empty_body_renders_to_nothing():
    assert render("") == "" and render(None) == ""


def test_an_image_alone_with_a_title_becomes_a_captioned_figure_and_others_stay_inline():
    alone = str(render('![A gull](https://example.com/g.png "The gull, at <dawn>")')).strip()
    assert alone == ('<figure><img src="https://example.com/g.png" alt="A gull">'
                     "<figcaption>The gull, at &lt;dawn&gt;</figcaption></figure>")
    inline = str(render('Text ![A](https://example.com/a.png "t") more'))
    assert "<figure>" not in inline and 'title="t"' in inline
    assert "<figure>" not in str(render("![A](https://example.com/a.png)"))


# An attribute value as nh3 before 0.3.7 wrote it: < and > raw (the title's own quotes are
# the only escape an attribute needs), which would be markup if moved into text as it is
SMUGGLED = '<b hx-post="/admin/users" hx-trigger="load">t</b>'
OLD_NH3 = '<p><img src="/x.png" alt="a" title="<b hx-post=&quot;/admin/users&quot; ' \
          'hx-trigger=&quot;load&quot;>t</b>"></p>'


def test_a_title_moved_into_the_caption_is_escaped_again_whatever_the_sanitiser_left_raw():
    figure = figures(OLD_NH3)
    assert figure == ('<figure><img src="/x.png" alt="a"><figcaption>'
                      '&lt;b hx-post=&#34;/admin/users&#34; hx-trigger=&#34;load&#34;&gt;t'
                      "&lt;/b&gt;</figcaption></figure>")
    assert [tag for tag, _ in Elements(figure).found] == ["figure", "img", "figcaption"]


@pytest.mark.parametrize("title", [SMUGGLED, '<meta http-equiv="refresh" content="0;url=//e">',
                                   "&lt;b&gt;", "a &amp; b", "“quoted” & <dawn>"])
def test_an_image_title_shows_in_its_caption_as_typed_never_as_markup(title):
    source = "![A gull](/g.png \"" + title.replace('"', '\\"') + "\")"
    html = str(render(source))
    assert [tag for tag, _ in Elements(html).found] == ["figure", "img", "figcaption"]
    caption = html.split("<figcaption>")[1].split("</figcaption>")[0]
    assert unescape(caption) == unescape(title)  # Markdown reads entities as it does in text
