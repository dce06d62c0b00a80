"""Gzip for the public site's text: pages, the feed, the sitemap, robots.txt, CSS and JS.

Only public answers are compressed: a page carrying a secret (a signed-in viewer's, with
its CSRF token; any admin page) beside text a visitor can put in it is what BREACH reads
through compression, so those stay as they are. A body under MIN_BYTES gains too little
to be worth it. Every answer that could be compressed names Accept-Encoding in Vary, so a
cache keeps a copy for each; the compressed copy's ETag is weak (the same page, other
bytes), and a request that names it weakly still gets its 304.
"""

import gzip
from collections.abc import Iterable
from typing import cast

from flask import Flask, Response, request

PUBLIC_ENDPOINTS = {"site.index", "site.post", "site.feed", "plugins.sitemap_xml",
                    "favicon.robots", "static"}
TYPES = {"text/html", "text/css", "text/javascript", "application/javascript", "text/plain",
         "application/json", "application/xml", "text/xml", "application/atom+xml",
         "image/svg+xml"}
MIN_BYTES = 1024  # below a packet's worth, the header and the CPU cost more than they save
LEVEL = 6  # zlib's default: 95 % of level 9's saving on HTML at a third of its cost


def init_app(app: Flask) -> None:
    """Compress the public site's text answers for clients that accept gzip."""
    app.after_request(compress)


def compress(response: Response) -> Response:
    """Return response gzipped when it is public text worth it and the client accepts it."""
    if not _compressible(response):
        return response
    body = _body(response)
    if len(body) < MIN_BYTES:
        return response
    response.vary.add("Accept-Encoding")
    if request.accept_encodings["gzip"] <= 0:
        return response
    response.set_data(gzip.compress(body, compresslevel=LEVEL, mtime=0))
    response.headers["Content-Encoding"] = "gzip"
    etag, weak = response.get_etag()
    if etag and not weak:
        response.set_etag(etag, weak=True)
    return response


def _compressible(response: Response) -> bool:
    """Return whether response is a whole public text answer not yet encoded."""
    return (response.status_code == 200 and request.endpoint in PUBLIC_ENDPOINTS
            and response.mimetype in TYPES and "Content-Encoding" not in response.headers
            and (response.direct_passthrough or not response.is_streamed)
            and not _private(response))


def _body(response: Response) -> bytes:
    """Return the whole body; a static file's is read here (small text, closed at once)."""
    if response.direct_passthrough:
        response.direct_passthrough = False
        file = response.response
        try:
            response.set_data(b"".join(cast(Iterable[bytes], file)))  # a static file's
        finally:
            getattr(file, "close", lambda: None)()
    return response.get_data()


def _private(response: Response) -> bool:
    control = response.cache_control
    return bool(control.private or control.no_store)
