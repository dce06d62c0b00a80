"""Render a post's Markdown body to HTML that is safe to show: markdown-it-py, then nh3.

Raw HTML in the source is escaped by the parser (html=False) and the output is
sanitised again with an allow-list, so neither a <script>, an onerror= nor a
javascript: link survives, whatever the parser lets through. What is moved after that (an
image's title into its caption) is escaped again for the place it lands in.
"""

import html as htmllib
import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urljoin

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

_parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_parser.enable(["table", "strikethrough"])

TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "img", "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table",
    "tbody", "td", "th", "thead", "tr", "ul",
}
ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}

_cleaner = nh3.Cleaner(
    tags=TAGS,
    clean_content_tags={"script", "style"},
    attributes=ATTRIBUTES,
    url_schemes=URL_SCHEMES,
    link_rel="noopener noreferrer nofollow",
    strip_comments=True,
)


@dataclass(frozen=True)
class ImageInfo:
    """One of the site's own images (webapp.media): its address, size and srcset widths."""

    sha256: str
    ext: str
    width: int
    height: int
    widths: tuple[int, ...]  # smaller than width, smallest first
    webp: tuple[str, ...] = ()  # the variants with a WebP copy ("480", ..., "orig"), if any


# the site's images as the sanitiser leaves them: <img src="/media/<sha256>/orig.<ext>" …>
# (in attribute values the sanitiser escapes ">", so the first one ends the tag)
SITE_IMAGE = re.compile(r'(<img src="/media/([0-9a-f]{64})/orig\.([a-z]{3,4})")([^>]*>)')
# the reading column, min(100% - 2.5rem, 40rem) in static/css/site.css: 640 px wide from
# 680 px up, so a 640 px screen at 1x takes the 640 width (webapp.media WIDTHS), not 960
SIZES = "(max-width: 42.5rem) calc(100vw - 2.5rem), 40rem"
LAZY = ' loading="lazy" decoding="async"'
# the first image is most likely the page's largest paint: fetched at once, first
EAGER = ' fetchpriority="high"'
# an image alone in its paragraph with a title, ![alt](src "caption"): a figure, captioned
FIGURE = re.compile(r'<p><img ([^>]*?) title="([^"]*)"([^>]*)></p>')


def render(source: str | None, images: tuple[ImageInfo, ...] = (),
           picture: bool = True) -> Markup:
    """Return the sanitised HTML for a Markdown source, ready to put in a template.

    images describes the site's own images the source shows (webapp.media): each gets
    srcset, sizes, width and height (no layout shift); the first loads at once with a high
    priority (the page's largest paint, likely), the others lazily. One with WebP copies
    is put in a <picture> whose <source> offers them to the browsers that take WebP
    (picture=False: a plain <img>, for a feed reader). Other images render as they are.
    """
    return _render(source or "", images, picture)


@lru_cache(maxsize=256)
def _render(source: str, images: tuple[ImageInfo, ...], picture: bool) -> Markup:
    # Keyed on the text itself (and its images, their WebP copies too), so an
    # edit can never be served stale; this only saves re-rendering popular posts.
    html = figures(_cleaner.clean(_parser.render(source)))
    if images:
        known = {(i.sha256, i.ext): i for i in images}
        done: list[str] = []  # the images given their attributes so far
        html = SITE_IMAGE.sub(lambda m: _site_image(m, known, done, picture), html)
    return Markup(html)  # noqa: S704  (sanitised by nh3 above; added attributes are ours)


def figures(sanitised: str) -> str:
    """Make each image alone in its paragraph with a title a figure, the title its caption.

    The title moves from an attribute value into text after sanitising, so it is read as
    the attribute's text and escaped again for its new place: an attribute value may hold
    < and > raw (nh3 before 0.3.7 wrote them so), which in text would be markup.
    """
    return FIGURE.sub(_figure, sanitised)


def _figure(match: re.Match) -> str:
    before, title, after = match.groups()
    caption = escape(htmllib.unescape(title))
    return f"<figure><img {before}{after}><figcaption>{caption}</figcaption></figure>"


def _site_image(match: re.Match, known: dict[tuple[str, str], ImageInfo],
                done: list[str], picture: bool) -> str:
    head, sha256, ext, rest = match.groups()
    info = known.get((sha256, ext))
    if info is None:
        return match.group(0)
    done.append(info.sha256)
    base = f"/media/{info.sha256}/"
    srcset = ", ".join([f"{base}{w}.{info.ext} {w}w" for w in info.widths]
                       + [f"{base}orig.{info.ext} {info.width}w"])
    image = (f'{head} srcset="{srcset}" sizes="{SIZES}" width="{info.width}" '
             f'height="{info.height}"{LAZY if len(done) > 1 else EAGER}{rest}')
    if not (picture and info.webp):  # a file stored before its copies were made: as it was
        return image
    webp = ", ".join(f"{base}{v}.webp {info.width if v == 'orig' else v}w" for v in info.webp)
    return (f'<picture><source type="image/webp" srcset="{webp}" sizes="{SIZES}">{image}'
            "</picture>")


# a tag of the sanitised HTML (text escapes < and >, attribute values > and "), its addresses
TAG = re.compile(r"<[a-z][a-z0-9]*\s[^<>]*>")
ADDRESS = re.compile(r'\s(src|href|srcset)="([^"]*)"')


def absolute(html: str, base: str) -> Markup:
    """Return rendered HTML with every address absolute, resolved against base (a URL).

    For HTML read away from its page, where nothing resolves "/media/…": a feed reader.
    """
    def address(match: re.Match) -> str:
        name, value = match.groups()
        if name == "srcset":  # "url 480w, url 960w": ours, whose URLs hold no comma
            value = ", ".join(_absolute_candidate(base, part) for part in value.split(","))
        else:
            value = urljoin(base, value)
        return f' {name}="{value}"'

    return Markup(TAG.sub(lambda tag: ADDRESS.sub(address, tag.group(0)), str(html)))  # noqa: S704


def _absolute_candidate(base: str, candidate: str) -> str:
    """Resolve a srcset candidate ("url 480w") against base, its width kept."""
    url, space, width = candidate.strip().partition(" ")
    return urljoin(base, url) + space + width


EXCERPT_CHARACTERS = 240
PLAIN = ("text", "code_inline", "softbreak", "hardbreak")  # what an excerpt keeps of a line


def excerpt(source: str | None, limit: int = EXCERPT_CHARACTERS) -> str:
    """Return the first paragraph of a Markdown source as plain text, cut at a word near limit.

    Plain text (emphasis, code and link markup dropped, the words kept) for a template to
    escape: an excerpt can never carry markup of its own. "" when there is no paragraph.
    """
    return _excerpt(source or "", limit)


HEAD_CHARACTERS = 1000  # most first paragraphs are found in this much of a body


@lru_cache(maxsize=1024)
def _excerpt(source: str, limit: int) -> str:
    # Parsing a whole 200 kB body for its first paragraph costs milliseconds: read its
    # first lines, and the whole only when they hold no top-level paragraph that is
    # complete (or already longer than the excerpt).
    if len(source) > HEAD_CHARACTERS:
        head = source[:source.rfind("\n", 0, HEAD_CHARACTERS) + 1] or source[:HEAD_CHARACTERS]
        found = _first_paragraph(head)
        if found is not None and found[0] == 1:
            lines = head.count("\n")
            words = _plain(found[1])
            if found[1].map and found[1].map[1] < lines or len(words) > limit:
                return _cut(words, limit)
    found = _first_paragraph(source)
    return "" if found is None else _cut(_plain(found[1]), limit)


def _first_paragraph(source: str):
    """Return (level, inline token) of the first top-level paragraph, else the first at all."""
    tokens = _parser.parse(source)
    paragraphs = [tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t.type == "paragraph_open"]
    # a paragraph of its own first; one inside a list or a quote only when there is none
    inline = next((p for p in paragraphs if p.level == 1), paragraphs[0] if paragraphs else None)
    return None if inline is None else (inline.level, inline)


def _plain(inline) -> str:
    """Return an inline token's words, markup dropped."""
    return " ".join("".join(
        child.content if child.type in ("text", "code_inline") else " "
        for child in inline.children or [] if child.type in PLAIN).split())


def _cut(words: str, limit: int) -> str:
    if len(words) <= limit:
        return words
    cut = words[:limit].rsplit(" ", 1)[0] or words[:limit]
    return cut.rstrip(" ,;:.-") + "…"
