"""Surrogate keys: what each public answer shows, named so a purge can find every copy of it.

A shared cache (Varnish with xkey, Fastly) indexes a response under the keys in its
`Surrogate-Key` header (space-separated); Cloudflare under its `Cache-Tag`
(comma-separated). A purge of a key drops every copy indexed under it. The keys:

- `site`: every page (each shows the site's name): purged when the settings change.
- `post-<id>`: the post's page, the 404 that stands at its URL while it is not live, and
  every list that shows it (a page of the home, the feed). So an edit of a live post,
  its scheduled change or its takedown purges one key and every copy showing its old
  title or text goes, on whichever page of the list it stands: the lists do not each
  need to know which posts they showed.
- `home`: every page of the home list, and the 404 at an unknown post's URL (a post
  published there later joins the list). One key, not one a page: a post published or
  taken down shifts every later page by one, so the pages go together.
- `feed`, `sitemap`: the feed and the sitemap (each its own list).
- `media-<first 32 hex of the SHA-256>`: one file's every width, by its address.

So a publish or takedown purges `post-<id> home feed sitemap`, a slug change the same
(its new URL may have been a cached 404 of `home`), an edit or a scheduled change
`post-<id>`, the settings `site` (event_keys), a media file removed its `media-` key,
the sitemap stored anew by its plugin (after the post's own purge) `sitemap` again.

A 304 carries no keys: a cache refreshing its copy keeps the copy's own headers for any
the 304 leaves out (RFC 9111, 4.3.4), and a 304 of a list cannot know, without reading
it, which posts the copy showed.
"""

from collections.abc import Iterable

from flask import Response

SITE, HOME, FEED, SITEMAP = "site", "home", "feed", "sitemap"
HOME_PAGE_SIZE = 20  # posts a page of the home shows (webapp.views.site)
PAGES = ("post", "missing", "unknown", "home", "feed", "sitemap")  # what keys_for names


def post_key(post_id: int) -> str:
    """Return the key of a post: its page and every list showing it."""
    return f"post-{post_id}"


def media_key(sha256: str) -> str:
    """Return the key of a media file (every width) from its address or its ETag's prefix."""
    return f"media-{sha256[:32]}"


def keys_for(page: str, post_id: int | None = None, listed: Iterable[int] = ()) -> tuple[str, ...]:
    """Return the keys of a public answer: page is one of PAGES.

    post: a live post's page; missing: the 404 at a post's URL while it is not live;
    unknown: the 404 at a URL no post has; home, feed: a list, listed the posts it shows.
    """
    if page not in PAGES:
        raise ValueError(f"no surrogate keys for a {page!r} page")
    own = {"post": (), "missing": (), "unknown": (HOME,), "home": (HOME,), "feed": (FEED,),
           "sitemap": (SITEMAP,)}[page]
    posts = ([post_id] if post_id is not None else []) + list(listed)
    return (SITE, *own, *(post_key(i) for i in posts))


def event_keys(topic: str, payload: dict, slug_changed: bool = False) -> tuple[str, ...]:
    """Return the keys a change to readers purges: an outbox event's topic and payload.

    A live post's text edited, its scheduled change swapped in or a revision restored
    (post.updated) shows where the post's key is; a publish, a takedown or a slug changed
    also moves it in or out of the lists. The settings purge
    `site`, a media file removed its `media-` key, the sitemap rebuilt `sitemap`.
    """
    if topic == "site.settings":
        return (SITE,)
    if topic == "sitemap.built":
        return (SITEMAP,)
    if topic == "media.deleted":
        return (media_key(payload["sha256"]),)
    if topic == "release.published":
        return release_keys(payload)
    post_id = payload.get("post_id")
    if post_id is None:
        raise ValueError(f"{topic} purges a post's keys: give its id")
    if topic == "post.updated" and not slug_changed:
        return (post_key(post_id),)
    return (post_key(post_id), HOME, FEED, SITEMAP)


def release_keys(payload: dict) -> tuple[str, ...]:
    """Return the keys a release purges at once: `site` when it changed the settings
    (every page), else each post's key, and the lists when a post went in or out."""
    if payload.get("settings"):
        return (SITE,)
    moved = [*payload.get("published", ()), *payload.get("unpublished", ())]
    ids = dict.fromkeys([*moved, *payload.get("changed", ())])
    return (*(post_key(i) for i in ids), *((HOME, FEED, SITEMAP) if moved else ()))


def tag(response: Response, keys: Iterable[str]) -> Response:
    """Add keys to response's Surrogate-Key and Cache-Tag (those it has are kept, in order)."""
    have = response.headers.get("Surrogate-Key", "").split()
    merged = list(dict.fromkeys([*have, *keys]))
    if merged:
        response.headers["Surrogate-Key"] = " ".join(merged)
        response.headers["Cache-Tag"] = ",".join(merged)
    return response


def headers(keys: Iterable[str]) -> list[tuple[str, str]]:
    """Return the key headers for keys, for an answer made outside Flask (none: no headers)."""
    keys = list(keys)
    return [("Surrogate-Key", " ".join(keys)), ("Cache-Tag", ",".join(keys))] if keys else []
