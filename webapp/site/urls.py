"""Build absolute links on SITE_URL, never on the Host header a client sent.

A feed reader, a search engine or an API client keeps the absolute links it is given:
taken from the request, they would name whatever host an attacker put in the header.
Relative links, and the routing of requests, stay as they were.
"""

from typing import cast

from flask import Flask, current_app
from flask.globals import request_ctx
from werkzeug.routing import MapAdapter


def init_app(app: Flask) -> None:
    """Build the absolute links of every request on SITE_URL when it is set."""
    if app.config["SITE_URL"]:
        app.before_request(build_links_on_site_url)


def build_links_on_site_url() -> None:
    """Wrap this request's URL adapter so url_for(_external=True) names SITE_URL."""
    adapter = SiteUrlAdapter(request_ctx.url_adapter, current_app.config["SITE_URL"])
    request_ctx.url_adapter = cast(MapAdapter, adapter)  # it answers as one


class SiteUrlAdapter:
    """A request's werkzeug MapAdapter whose absolute URLs start with the site's URL."""

    def __init__(self, adapter, site_url: str) -> None:
        self._adapter = adapter
        self._site_url = site_url.rstrip("/")

    def __getattr__(self, name: str):
        return getattr(self._adapter, name)

    def build(self, endpoint: str, values=None, method=None, force_external: bool = False,
              append_unknown: bool = True, url_scheme: str | None = None) -> str:
        """Build a URL as werkzeug does; an absolute one on the site's URL."""
        path = self._adapter.build(endpoint, values, method=method,
                                   append_unknown=append_unknown)
        if not force_external:
            return path
        root = self._adapter.script_name.rstrip("/")  # the site's prefix replaces the mount's
        return self._site_url + path[len(root):]
