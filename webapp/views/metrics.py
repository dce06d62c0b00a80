"""GET /metrics: the fleet's gauges and this instance's histograms, for Prometheus."""

from flask import Blueprint, Response, request

from .. import metrics

bp = Blueprint("metrics", __name__)


@bp.get("/metrics")
def index() -> Response:
    """Answer a scrape with a bearer token: METRICS_TOKEN or any user's API token."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not metrics.scraper_allowed(token.strip()):
        return Response("Send Authorization: Bearer <METRICS_TOKEN or an API token>.\n", 401,
                        {"WWW-Authenticate": 'Bearer realm="metrics"'},
                        mimetype="text/plain")
    body, content_type = metrics.exposition()
    return Response(body, content_type=content_type, headers={"Cache-Control": "no-store"})
