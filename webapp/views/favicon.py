"""The site's icon where browsers and crawlers look for it unasked: /favicon.ico.

Pages name static/favicon.svg in their <head> (templates/base.html); this answers the
requests that do not read the page first, so none of them is a 404.
"""

from functools import cache
from pathlib import Path

from flask import Blueprint, Response, current_app, request

bp = Blueprint("favicon", __name__)

ICON_MAX_AGE = 7 * 24 * 3600  # an icon rarely changes; a week of caching is plenty


@cache
def _icon(folder: str) -> bytes:
    return (Path(folder) / "favicon.ico").read_bytes()  # 16, 32 and 48 px, 4 KB


@bp.get("/favicon.ico")
def ico():
    """Send static/favicon.ico, cacheable by anyone, 304 to a matching If-None-Match."""
    response = Response(_icon(current_app.static_folder), mimetype="image/vnd.microsoft.icon")
    response.cache_control.public = True
    response.cache_control.max_age = ICON_MAX_AGE
    response.add_etag()
    return response.make_conditional(request)
