"""Rendered public pages kept in each worker's memory, validated by the 304's one-row read.

A shared cache's miss (a first reader, a copy purged or expired) reached the app and
rendered the page: Markdown and Jinja, 1-3 ms of CPU. The page is the same for every
anonymous reader until its ETag changes, and the ETag comes from the one-row read that
answers 304s (webapp.site.revalidation, httpcache.RevalidateFirst), bumped in the
transaction of every change a reader could see. So each worker keeps the last 200 it
sent for a page (scheme, host, path and query), with the ETag it was sent with: when the
read gives that ETag again, the kept bytes go out and Flask never runs. Another worker's
or instance's change moves the ETag in the database, so no worker sends a copy past it.

Kept: only what RevalidateFirst's validators recognise (the home and its pages, a post,
the feed), answered 200 to a request that cannot be a signed-in viewer's, `public` and
setting no cookie. Sent: the kept headers, its body (gzipped too when the client accepts
it and the page is worth compressing: both are kept), with Cache-Control and
Last-Modified made at send time from the read, as the app would (a page's lifetime ends
at its next known change, which comes closer every second).

Bounded: least recently used first out, past MAX_PAGES pages or SITE_PAGE_CACHE_MB of
bodies; a page's new version replaces its old one. SITE_PAGE_CACHE_MB=0 keeps nothing.
"""

import gzip
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask
from werkzeug.http import http_date, parse_accept_header, unquote_etag

from . import compression, httpcache

MAX_PAGES = 2000  # pages, whatever their size (each entry costs its headers besides)
EXTENSION = "soloist.pagecache"  # app.extensions: the worker's Pages, made on first use
ENVIRON_KEY = "soloist.validators"  # the read RevalidateFirst made, for PageCache to reuse
# (the rest, HSTS too, is the same for every reader of the key: its scheme is in it)
MADE_AT_SEND = {"cache-control", "last-modified", "content-length", "content-encoding", "date"}
log = logging.getLogger("soloist.pagecache")


@dataclass(frozen=True)
class Page:
    """A page as sent: its ETag, headers (without those made at send time) and bodies."""

    etag: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    gzipped: bytes | None = None

    @property
    def size(self) -> int:
        """Return the bytes it holds (bodies and headers)."""
        return len(self.body) + len(self.gzipped or b"") + sum(
            len(k) + len(v) for k, v in self.headers)


class Pages:
    """A least-recently-used map of pages, bounded by count and bytes; safe across threads."""

    def __init__(self, max_pages: int, max_bytes: int) -> None:
        self.max_pages, self.max_bytes = max_pages, max_bytes
        self._pages: OrderedDict[tuple, Page] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, key: tuple, etag: str) -> Page | None:
        """Return the page kept under key if it was sent with etag, else None."""
        with self._lock:
            page = self._pages.get(key)
            if page is None or page.etag != etag:
                return None
            self._pages.move_to_end(key)
            return page

    def put(self, key: tuple, page: Page) -> None:
        """Keep page under key (replacing the one there), evicting the least recently used."""
        if page.size > self.max_bytes:
            return
        with self._lock:
            old = self._pages.pop(key, None)
            self._bytes -= old.size if old else 0
            self._pages[key] = page
            self._bytes += page.size
            while len(self._pages) > self.max_pages or self._bytes > self.max_bytes:
                self._bytes -= self._pages.popitem(last=False)[1].size


def pages_of(app: Flask) -> Pages:
    """Return the worker's pages, made on first use with the bound the config sets."""
    pages = app.extensions.get(EXTENSION)
    if pages is None:
        bound = int(app.config["SITE_PAGE_CACHE_MB"] * 1_000_000)
        pages = app.extensions.setdefault(EXTENSION, Pages(MAX_PAGES, bound))
    return pages


def remembered(validators_of: Callable[[dict], httpcache.Validators | None]):
    """Return validators_of that reads once a request: RevalidateFirst's read, reused here."""
    def read(environ: dict) -> httpcache.Validators | None:
        if ENVIRON_KEY not in environ:
            environ[ENVIRON_KEY] = validators_of(environ)
        return environ[ENVIRON_KEY]
    return read


def _key(environ: dict) -> tuple:
    """Return a page's identity: what its links and body are made from besides the database."""
    return (environ.get("wsgi.url_scheme"), environ.get("HTTP_HOST"),
            environ.get("SCRIPT_NAME", ""), environ.get("PATH_INFO", ""),
            environ.get("QUERY_STRING", ""))


def _accepts_gzip(environ: dict) -> bool:
    return parse_accept_header(environ.get("HTTP_ACCEPT_ENCODING"))["gzip"] > 0


def kept_page(status: str, headers: list[tuple[str, str]], body: bytes) -> Page | None:
    """Return what to keep of a whole 200 a reader was sent, or None if it may not be kept."""
    names = {name.lower(): value for name, value in headers}
    control = names.get("cache-control", "")
    if not status.startswith("200") or not control.startswith("public") or \
            "set-cookie" in names or "etag" not in names:
        return None
    etag, _weak = unquote_etag(names["etag"])
    gzipped: bytes | None
    if names.get("content-encoding") == "gzip":
        body, gzipped = gzip.decompress(body), body
    elif "content-encoding" in names:
        return None
    else:
        worth = "accept-encoding" in names.get("vary", "").lower() and \
            len(body) >= compression.MIN_BYTES
        gzipped = gzip.compress(body, compression.LEVEL, mtime=0) if worth else None
    return Page(etag, tuple((k, v) for k, v in headers if k.lower() not in MADE_AT_SEND),
                body, gzipped)


def sent_headers(page: Page, validators: httpcache.Validators,
                 gzipped: bool) -> list[tuple[str, str]]:
    """Return page's headers with those that depend on the moment made now, as the app does."""
    body = page.gzipped if gzipped and page.gzipped is not None else page.body
    headers = [*page.headers, ("Cache-Control", httpcache.cache_control(validators.keep)),
               ("Content-Length", str(len(body)))]
    modified = httpcache._settled(validators.last_modified)
    if modified is not None:
        headers.append(("Last-Modified", http_date(modified)))
    if body is page.gzipped:
        headers.append(("Content-Encoding", "gzip"))
    return headers


class PageCache:
    """WSGI middleware: send a reader the page kept for its ETag, or keep the one the app sends.

    Sits inside httpcache.RevalidateFirst and reads the validators it read (remembered).
    """

    def __init__(self, wsgi_app, app: Flask,
                 validators_of: Callable[[dict], httpcache.Validators | None]) -> None:
        self.wsgi_app, self.app, self.validators_of = wsgi_app, app, validators_of
        self.anonymous = httpcache.anonymous_read(app)

    def __call__(self, environ: dict, start_response):
        if not self.app.config["SITE_PAGE_CACHE_MB"] or not self._anonymous_read(environ):
            return self.wsgi_app(environ, start_response)
        try:
            with self.app.app_context():
                validators = self.validators_of(environ)
                if validators is not None:
                    sent = self._send_kept(environ, start_response, validators)
                    if sent is not None:
                        return sent
        except Exception as exc:  # noqa: BLE001  (the app answers, or reports, it properly)
            log.warning("sending %s from memory failed, the app answers: %r",
                        environ.get("PATH_INFO"), exc)
            validators = None
        if validators is None or environ["REQUEST_METHOD"] != "GET":
            return self.wsgi_app(environ, start_response)
        return self._keep(environ, start_response)

    def _anonymous_read(self, environ: dict) -> bool:
        return ("*" not in environ.get("HTTP_IF_NONE_MATCH", "")  # the app decides those
                and self.anonymous(environ))

    def _send_kept(self, environ: dict, start_response,
                   validators: httpcache.Validators) -> list[bytes] | None:
        """Send the page kept for validators' ETag and return its body; None if none is kept."""
        page = pages_of(self.app).get(_key(environ), validators.etag)
        if page is None:
            return None
        gzipped = page.gzipped if page.gzipped is not None and _accepts_gzip(environ) else None
        start_response("200 OK", sent_headers(page, validators, gzipped is not None))
        if environ["REQUEST_METHOD"] == "HEAD":
            return []
        return [page.body if gzipped is None else gzipped]

    def _keep(self, environ: dict, start_response) -> list[bytes]:
        """Let the app answer, keep its answer if it is a reader's page, and send it."""
        answer: list = []  # what the app starts its response with, sent once the body is read

        def start(*args: Any) -> None:
            answer.extend(args)

        result = self.wsgi_app(environ, start)
        try:
            body = b"".join(result)
        finally:
            getattr(result, "close", lambda: None)()
        status, headers = answer[0], answer[1]
        page = kept_page(status, headers, body)
        if page is not None:
            pages_of(self.app).put(_key(environ), page)
        start_response(status, headers, *answer[2:])
        return [body]
