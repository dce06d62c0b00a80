"""What browsers and crawlers ask for unasked: the site's icon and /robots.txt.

Pages name static/favicon.svg in their <head> (templates/base.html); this answers the
requests that do not read the page first, so none of them is a 404.
"""

from functools import cache
from pathlib import Path

from flask import Blueprint, Response, current_app, request, url_for

from ..site import httpcache

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


@bp.get("/robots.txt")
def robots():
    """Send robots.txt naming the sitemap on SITE_URL, cacheable like the public pages.

    Without SITE_URL the sitemap goes unnamed: its address would come from the Host header
    a client sent, and a cache would keep whatever host an attacker put there.
    """
    lines = ["User-agent: *", "Disallow: /admin/", "Disallow: /api/"]
    if current_app.config["SITE_URL"]:
        lines.append("Sitemap: " + url_for("plugins.sitemap_xml", _external=True))
    else:
        lines.append("# Set SITE_URL to name the sitemap (/sitemap.xml) here.")
    response = Response("\n".join(lines) + "\n", mimetype="text/plain")
    response.headers["Cache-Control"] = httpcache.cache_control()
    response.add_etag()
    return response.make_conditional(request)
