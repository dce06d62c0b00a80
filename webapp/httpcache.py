"""HTTP caching of public pages: validators, 304s before rendering, Cache-Control for a CDN.

A public page is the same for every anonymous reader, so a CDN or a browser may keep it
(`public, max-age=SITE_MAX_AGE_SECONDS, stale-while-revalidate=SITE_STALE_SECONDS`) and
ask again with If-None-Match / If-Modified-Since; the view reads its validators (one
query) and answers 304 without rendering when they still match. A signed-in viewer's
page carries their email and an Edit link: `private, no-cache`, no validators, so no
shared cache keeps it and no 304 can stand in for it after they sign out.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from flask import Response, current_app, request

# Last-Modified has whole seconds: a change later in the same second would not move it.
# A page changed this recently is sent without it (its ETag still validates it).
SETTLE = timedelta(seconds=2)


@dataclass(frozen=True)
class Validators:
    """What a page validates against: an ETag (sent weak) and when it last changed."""

    etag: str
    last_modified: datetime | None = None


def cache_control() -> str:
    """Return the Cache-Control of a public page from the settings."""
    config = current_app.config
    max_age, stale = config["SITE_MAX_AGE_SECONDS"], config["SITE_STALE_SECONDS"]
    if not max_age and not stale:
        return "public, no-cache"
    return f"public, max-age={max_age}" + (f", stale-while-revalidate={stale}" if stale else "")


def _settled(moment: datetime | None) -> datetime | None:
    """Return moment to send as Last-Modified, or None while it is too recent to be exact."""
    if moment is None or moment > datetime.now(UTC) - SETTLE:
        return None
    return moment.replace(microsecond=0)


def matches(validators: Validators) -> bool:
    """Return whether the request's conditional headers say the reader's copy is current.

    If-None-Match decides when sent (weak comparison, "*" included); If-Modified-Since
    only without it, as RFC 9110 says.
    """
    if request.method not in ("GET", "HEAD"):
        return False
    if request.if_none_match:
        return request.if_none_match.contains_weak(validators.etag)
    since, modified = request.if_modified_since, _settled(validators.last_modified)
    return since is not None and modified is not None and modified <= since


def public(response: Response, validators: Validators) -> Response:
    """Mark a response cacheable by anyone, with its validators."""
    response.set_etag(validators.etag, weak=True)
    modified = _settled(validators.last_modified)
    if modified is not None:
        response.last_modified = modified
    response.headers["Cache-Control"] = cache_control()
    response.vary.add("Cookie")  # a signed-in viewer's copy differs (and is private)
    return response


def not_modified(validators: Validators) -> Response:
    """Return the 304 for a request whose copy is current: headers only, nothing rendered."""
    return public(Response(status=304), validators)


def private(response: Response) -> Response:
    """Mark a response for the viewer's own browser only, asked again every time."""
    response.headers["Cache-Control"] = "private, no-cache"
    response.vary.add("Cookie")
    return response
