"""Structured data search engines read from a post page: a schema.org Article as JSON-LD."""

from datetime import datetime

from ..timefmt import html_datetime


def article(post, site_name: str, url: str, home: str, image: str | None) -> dict:
    """Return the Article a post page describes itself with (for |tojson in a data block).

    post: the public page's row (title, published_at, updated_at). The site is the author,
    as in the feed: posts record no person. image: the og:image, when the post has one.
    """
    found = {
        "@context": "https://schema.org",
        "@type": "Article",
        "headline": post.title,
        "datePublished": html_datetime(post.published_at),
        "dateModified": html_datetime(_latest(post.published_at, post.updated_at)),
        "author": {"@type": "Organization", "name": site_name, "url": home},
        "publisher": {"@type": "Organization", "name": site_name, "url": home},
        "url": url,
        "mainEntityOfPage": url,
    }
    if image:
        found["image"] = [image]
    return found


def _latest(*moments: datetime | None) -> datetime | None:
    return max((m for m in moments if m is not None), default=None)
