"""HTTP caching of public pages: validators, 304s before rendering, Cache-Control for a CDN.

A public page is the same for every anonymous reader, so a CDN or a browser may keep it
and ask again with If-None-Match / If-Modified-Since; the view reads its validators (one
query) and answers 304 without rendering when they still match. A signed-in viewer's
page carries their email and an Edit link: `private, no-cache`, no validators, so no
shared cache keeps it and no 304 can stand in for it after they sign out.

How long (cache_control): with no purger (CACHE_PURGE empty) nothing tells a cache a
page changed, so every copy is short-lived: `public, max-age=SITE_MAX_AGE_SECONDS,
stale-while-revalidate=SITE_STALE_SECONDS`. With a purger, a change purges the shared
cache's copies (webapp.site.surrogate names them), so it may keep a page a day
(`s-maxage=SITE_SHARED_MAX_AGE_SECONDS`), while a browser, which no purge reaches,
asks every visit (`max-age=0`: a 304 from the cache's copy, cheap).

Either way nothing is kept past a moment the page is known to turn wrong (Keep.until: a
scheduled post goes live, a live one is taken down, a scheduled change is swapped in):
the lifetime ends then, with no stale-while-revalidate, and a page due to change within
the second (or overdue: the publish leader is at it) is `no-cache`.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from flask import Flask, Response, current_app, request
from werkzeug.http import parse_date, parse_etags, quote_etag

from ..headers import HEADERS
from . import surrogate

# Last-Modified has whole seconds: a change later in the same second would not move it.
# A page changed this recently is sent without it (its ETag still validates it).
SETTLE = timedelta(seconds=2)
log = logging.getLogger("soloist.httpcache")


@dataclass(frozen=True)
class Keep:
    """How a public answer may be kept: its surrogate keys, and until when it is right.

    until: the next moment it is known to turn wrong (None: none known); now: the
    database clock read with it, which until is measured from.
    """

    keys: tuple[str, ...] = ()
    until: datetime | None = None
    now: datetime | None = None
    purged_or_until: bool = False  # a 404: with no purger, kept only when until is known

    def seconds_left(self) -> int | None:
        """Return the whole seconds until the answer turns wrong (0 when due), None if never."""
        if self.until is None:
            return None
        now = self.now or datetime.now(UTC)
        return max(0, int((self.until - now).total_seconds()))


@dataclass(frozen=True)
class Validators:
    """What a page validates against: an ETag (sent weak) and when it last changed."""

    etag: str
    last_modified: datetime | None = None
    keep: Keep = Keep()


def cache_control(keep: Keep = Keep()) -> str:
    """Return the Cache-Control of a public answer kept as keep says, from the settings."""
    config = current_app.config
    left = keep.seconds_left()
    stale = config["SITE_STALE_SECONDS"] if left is None else 0

    def bounded(seconds: int) -> int:
        return seconds if left is None else min(seconds, left)

    if config["CACHE_PURGE"]:
        shared = bounded(config["SITE_SHARED_MAX_AGE_SECONDS"])
        if not shared:
            return "public, no-cache"
        return f"public, max-age=0, s-maxage={shared}" + (
            f", stale-while-revalidate={stale}" if stale else "")
    if keep.purged_or_until and left is None:
        return "no-cache"
    max_age = bounded(config["SITE_MAX_AGE_SECONDS"])
    if not max_age and not stale:
        return "public, no-cache"
    return f"public, max-age={max_age}" + (f", stale-while-revalidate={stale}" if stale else "")


def _settled(moment: datetime | None) -> datetime | None:
    """Return moment to send as Last-Modified, or None while it is too recent to be exact."""
    if moment is None or moment > datetime.now(UTC) - SETTLE:
        return None
    return moment.replace(microsecond=0)


def matches(validators: Validators) -> bool:
    """Return whether the request's conditional headers say the reader's copy is current."""
    return request.method in ("GET", "HEAD") and headers_match(
        validators, request.headers.get("If-None-Match"),
        request.headers.get("If-Modified-Since"))


def star_matches() -> bool:
    """Return whether the request sent If-None-Match: * (true of any page that exists)."""
    return request.method in ("GET", "HEAD") and parse_etags(
        request.headers.get("If-None-Match")).star_tag


def headers_match(validators: Validators, if_none_match: str | None,
                  if_modified_since: str | None) -> bool:
    """Return whether conditional headers as sent match validators.

    If-None-Match decides when sent (weak comparison); If-Modified-Since only without it,
    as RFC 9110 says. "*" matches only a page that exists, which the validators cannot
    tell: it is not a match here (the view renders, and answers 404 or 200). A date later
    than now is no date a copy could have been made at, and is ignored.
    """
    if if_none_match:
        etags = parse_etags(if_none_match)
        return not etags.star_tag and etags.contains_weak(validators.etag)
    since, modified = parse_date(if_modified_since), _settled(validators.last_modified)
    if since is not None and since > datetime.now(UTC):
        return False
    return since is not None and modified is not None and modified <= since


def public(response: Response, validators: Validators) -> Response:
    """Mark a response cacheable by anyone, with its validators and (not a 304) its keys."""
    response.set_etag(validators.etag, weak=True)
    modified = _settled(validators.last_modified)
    if modified is not None:
        response.last_modified = modified
    return kept(response, validators.keep)


def not_found(response: Response, keep: Keep) -> Response:
    """Mark a public 404 cacheable as keep says, if a purger will drop it or until it is due.

    Without a purger a 404 that may turn into the page at any moment (a draft published,
    a URL a new post takes) is kept by no cache, as a page's 200 may be for a while:
    readers who got it once would not see the page appear.
    """
    return kept(response, replace(keep, purged_or_until=True))


def kept(response: Response, keep: Keep) -> Response:
    """Mark a response (a 404 too) cacheable by anyone as keep says, under its keys."""
    response.headers["Cache-Control"] = cache_control(keep)
    response.vary.add("Cookie")  # a signed-in viewer's copy differs (and is private)
    if response.status_code != 304:  # a 304 leaves the copy's keys as they are
        surrogate.tag(response, keep.keys)
    return response


def not_modified(validators: Validators) -> Response:
    """Return the 304 for a request whose copy is current: headers only, nothing rendered."""
    return public(Response(status=304), validators)


def private(response: Response) -> Response:
    """Mark a response for the viewer's own browser only, asked again every time."""
    response.headers["Cache-Control"] = "private, no-cache"
    response.vary.add("Cookie")
    for name in ("Surrogate-Key", "Cache-Tag"):  # the page rendered may have named its keys
        response.headers.pop(name, None)
    return response


def anonymous_read(app: Flask) -> Callable[[dict], bool]:
    """Return a test of whether a request is a GET or HEAD that cannot be a signed-in
    viewer's: no session or remember-me cookie, no Authorization. Shared by the WSGI layers
    that answer before Flask runs (RevalidateFirst, webapp.site.pagecache)."""
    cookies = [f"{app.config['SESSION_COOKIE_NAME']}=",
               f"{app.config.get('REMEMBER_COOKIE_NAME', 'remember_token')}="]

    def test(environ: dict) -> bool:
        cookie = environ.get("HTTP_COOKIE", "")
        return (environ.get("REQUEST_METHOD") in ("GET", "HEAD")
                and "HTTP_AUTHORIZATION" not in environ
                and not any(name in cookie for name in cookies))
    return test


class RevalidateFirst:
    """WSGI middleware: answer a reader's matching conditional GET with a 304 before Flask runs.

    A CDN in front revalidates each page every max-age: that 304 should cost its one read
    and little else, not a trip through the request's hooks, sign-in and routing. Only
    for a request that cannot be a signed-in viewer's (no session or remember cookie, no
    Authorization) and that validators_of(environ) recognises (inside an app context, with
    the views' own reads); anything else, a mismatch or an error goes to the app, which
    answers it as it always would (its views make the same 304s).
    """

    def __init__(self, wsgi_app, app: Flask,
                 validators_of: Callable[[dict], Validators | None]) -> None:
        self.wsgi_app, self.app, self.validators_of = wsgi_app, app, validators_of
        self.anonymous = anonymous_read(app)

    def __call__(self, environ: dict, start_response):
        if self._anonymous_conditional_get(environ):
            try:
                headers = self._not_modified(environ)
            except Exception as exc:  # noqa: BLE001  (the app answers, or reports, it properly)
                log.warning("revalidating %s before the app failed, the app answers: %r",
                            environ.get("PATH_INFO"), exc)
                headers = None
            if headers is not None:
                start_response("304 NOT MODIFIED", headers)
                return []
        return self.wsgi_app(environ, start_response)

    def _anonymous_conditional_get(self, environ: dict) -> bool:
        return (("HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MODIFIED_SINCE" in environ)
                and self.anonymous(environ))

    def _not_modified(self, environ: dict) -> list[tuple[str, str]] | None:
        """Return the 304's headers if the reader's copy is current, else None."""
        with self.app.app_context():
            validators = self.validators_of(environ)
            if validators is None or not headers_match(
                    validators, environ.get("HTTP_IF_NONE_MATCH"),
                    environ.get("HTTP_IF_MODIFIED_SINCE")):
                return None
            control = cache_control(validators.keep)
        return [("ETag", quote_etag(validators.etag, weak=True)), ("Cache-Control", control),
                ("Vary", "Cookie, Accept-Encoding"), *HEADERS.items()]
