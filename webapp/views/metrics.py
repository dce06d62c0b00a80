"""GET /metrics: the fleet's gauges and this instance's histograms, for Prometheus."""

import hmac
from urllib.parse import urlsplit

from flask import Blueprint, Response, current_app, render_template, request, url_for

from ..accounts.tokens import user_for_token
from ..ops import metrics

bp = Blueprint("metrics", __name__)


@bp.get("/metrics")
def index() -> Response:
    """Answer a scrape with a bearer token: METRICS_TOKEN or any user's API token."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not scraper_allowed(token.strip()):
        return _unauthorized()
    body, content_type = metrics.exposition()
    return Response(body, content_type=content_type, headers={"Cache-Control": "no-store"})


def _unauthorized() -> Response:
    """A 401 in one line for a scraper; a page saying what this is for a browser."""
    headers = {"WWW-Authenticate": 'Bearer realm="metrics"', "Vary": "Accept"}
    if request.accept_mimetypes.best_match(["text/plain", "text/html"]) == "text/html":
        # its address as links name it (on SITE_URL), never the Host or query a client sent
        address = url_for("metrics.index", _external=True)
        return Response(render_template("metrics/browser.html", address=address,
                                        at=urlsplit(address)), 401, headers)
    return Response("Send Authorization: Bearer <METRICS_TOKEN or an API token>.\n", 401,
                    headers, mimetype="text/plain")


def scraper_allowed(token: str) -> bool:
    """Return whether a bearer token may scrape: METRICS_TOKEN, or any live API token."""
    if not token:
        return False
    expected = current_app.config["METRICS_TOKEN"]
    if expected and hmac.compare_digest(token.encode(), expected.encode()):
        return True
    return user_for_token(token) is not None
