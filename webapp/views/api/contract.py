"""Serve the API's contract: the OpenAPI document checked in beside this module."""

from pathlib import Path

from flask import Response

from .blueprint import bp

DOCUMENT = Path(__file__).with_name("openapi.json")


@bp.get("/openapi.json")
def openapi() -> Response:
    """Serve the OpenAPI 3.1 document, byte for byte the file (no token needed)."""
    return Response(DOCUMENT.read_bytes(), mimetype="application/json")
