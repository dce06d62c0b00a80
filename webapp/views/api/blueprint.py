"""Make the api blueprint: no CSRF, a bearer token before every request, JSON errors."""

from flask import Blueprint

from ...extensions import csrf
from .auth import authenticate
from .errors import ApiError, error_response

bp = Blueprint("api", __name__, url_prefix="/api")
# a browser's session cookie never authenticates here, so the API needs no CSRF token:
# a cross-site page cannot send the Authorization header
csrf.exempt(bp)
bp.before_request(authenticate)
bp.register_error_handler(ApiError, error_response)
