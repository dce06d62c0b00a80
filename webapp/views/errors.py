"""Friendly error pages (JSON under /api); never a bare 500."""

from contextlib import suppress

from flask import Flask, current_app, g, jsonify, render_template, request
from flask_login import current_user
from flask_wtf.csrf import CSRFError
from sqlalchemy import exc as sa_exc
from sqlalchemy.exc import DataError, InterfaceError, OperationalError, SQLAlchemyError
from werkzeug import routing
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound

from ..db import unreachable as is_unreachable
from ..extensions import db
from ..headers import public_answer
from ..limits import TooLarge
from ..site import state

MESSAGES = {
    400: "The request could not be understood.",
    401: "Sign in (or send a valid API token) to do this.",
    403: "Your role does not allow this.",
    404: "There is nothing here.",
    405: "That action is not allowed here.",
    409: "That conflicts with a change made meanwhile.",
    413: "That is too large.",
    422: "Some of what was sent is not valid.",
    429: "Too many requests; wait a little and try again.",
    500: "Something went wrong on our side. It has been logged.",
    503: "The database cannot be reached right now.",
}
# the database may be away (cut off, restarting, failing over) or its pool full:
# db.unreachable decides, and anything else of these is a 500 like any other error
DATABASE_ERRORS = (OperationalError, InterfaceError, sa_exc.TimeoutError,
                   sa_exc.DisconnectionError)
RETRY_AFTER = "5"


def wants_json() -> bool:
    """Return whether the client should get JSON errors (the API, or a script asking for JSON)."""
    return request.path.startswith("/api/") or (
        request.accept_mimetypes.best == "application/json")


PUBLIC_BLUEPRINTS = ("site", "previews")
NOT_FOUND_HEADING = "Page not found"
NOT_FOUND_MESSAGE = ("There is nothing at this address: the post may have moved or been "
                     "taken down.")


def forget_unreadable_user() -> None:
    """Take the user for anonymous when reading them failed, so the page about it renders
    (every template asks for current_user, which would read the database again)."""
    if "_login_user" not in g:
        g._login_user = current_app.login_manager.anonymous_user()  # type: ignore[attr-defined]


def render_error(status: int, detail: str | None = None):
    """Render an error page or JSON error for status; a reader's 404 in the site's layout."""
    message = MESSAGES.get(status, "Something went wrong.")
    if wants_json():
        return jsonify(error=message, detail=detail or message), status
    if status == 404 and (request.blueprint in PUBLIC_BLUEPRINTS
                          or not current_user.is_authenticated):
        return render_site_missing(NOT_FOUND_HEADING, NOT_FOUND_MESSAGE), 404
    return render_template("errors/error.html", status=status, message=message,
                           detail=detail), status


def logged_path() -> str:
    """Return the request's path for a log line: a preview link's as its route, no token."""
    if request.endpoint == "previews.show" and request.url_rule is not None:
        return request.url_rule.rule
    return request.path


def render_site_missing(heading: str, message: str) -> str:
    """Render the public site's page for something that is not there (or no longer)."""
    try:
        site = state.current()
    except SQLAlchemyError:  # the page says so without the settings: the defaults
        db.session.rollback()
        site = state.info(None)
    return render_template("site/404.html", site=site, heading=heading, message=message)


class IntegerConverter(routing.IntegerConverter):
    """Werkzeug's <int:…>, bounded by the largest id a column can hold: beyond it, a 404.

    SQLite cannot even bind an int past 64 bits (an OverflowError, not a DataError).
    """

    def __init__(self, map, fixed_digits: int = 0, min: int | None = None,  # noqa: A002
                 max: int | None = 2**63 - 1, signed: bool = False) -> None:  # noqa: A002
        super().__init__(map, fixed_digits, min, max, signed)


def _reachable(error: HTTPException) -> HTTPException:
    """Return NotFound for a 405 whose path no method reaches, else the error itself.

    Werkzeug answers 405 as soon as another method's rule has the same pattern, before it
    finds that the id in the path is beyond every rule's converter (an id past its max).
    """
    if not isinstance(error, MethodNotAllowed):
        return error
    adapter = current_app.url_map.bind_to_environ(request.environ)
    for method in error.valid_methods or ():
        try:
            adapter.match(method=method)
        except (NotFound, MethodNotAllowed):
            continue
        except HTTPException:  # a redirect: that method reaches the path
            pass
        return error
    return NotFound()


NUL_REFUSED = ("Text with a NUL character (\\0) cannot be saved or searched for: remove it "
               "and try again.")


def refuse_nul_characters():
    """Refuse a form or query with a NUL character, which PostgreSQL text cannot hold.

    The JSON API checks its own bodies and names the field (views/api/).
    """
    if request.path.startswith("/api/"):
        return None
    for values in (request.args, request.form):
        field = next((name for name, value in values.items(multi=True) if "\x00" in value),
                     None)
        if field is not None and wants_json():  # a page's script (autosave) names the field
            said = f"{field}: {NUL_REFUSED}"
            return jsonify(error=said, detail=said, field=field, fields={field: NUL_REFUSED}), 400
        if field is not None:
            return render_error(400, NUL_REFUSED)
    return None


def init_app(app: Flask) -> None:
    """Register the error handlers (and bound the ids in URLs, before any route exists)."""
    app.url_map.converters["int"] = IntegerConverter
    app.before_request(refuse_nul_characters)

    @app.errorhandler(CSRFError)
    def csrf_error(error: CSRFError):
        return render_error(400, "The form expired or was not sent from Soloist: reload the "
                                 "page and try again.")

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException):
        error = _reachable(error)
        shown = wants_json() or isinstance(error, TooLarge)  # its message names the limit
        body, status = render_error(error.code or 500, error.description if shown else None)
        # keep what the error says besides its body: a 405's Allow, a 401's challenge
        headers = [(k, v) for k, v in error.get_headers() if k.lower() != "content-type"]
        # a reader's error can turn right at any moment (the sitemap before its first build,
        # a file about to be uploaded): no cache keeps it (Varnish would for two minutes);
        # a reader's 404 at a post's URL is the site's own, kept until it turns wrong, and
        # anything not the public site's is no-store (webapp.headers)
        if public_answer():
            headers.append(("Cache-Control", "no-cache"))
        return body, status, headers

    @app.errorhandler(DataError)
    def out_of_range(error: DataError):
        # e.g. an id in the URL beyond the column's range: nothing can be there
        db.session.rollback()
        return render_error(404)

    def unreachable(error: Exception):
        if not is_unreachable(error):
            return unexpected(error)
        # a 503 the client may retry, rendered without reading the database (not the user)
        app.logger.warning("database unreachable on %s %s: %s", request.method, logged_path(),
                           type(error).__name__)
        with suppress(SQLAlchemyError):
            db.session.rollback()
        headers = {"Retry-After": RETRY_AFTER, "Cache-Control": "no-store"}
        if wants_json():
            return jsonify(error=MESSAGES[503], detail=MESSAGES[503]), 503, headers
        forget_unreadable_user()
        page = render_template("errors/unavailable.html", message=MESSAGES[503])
        return page, 503, headers

    for kind in DATABASE_ERRORS:
        app.register_error_handler(kind, unreachable)

    @app.errorhandler(Exception)
    def unexpected(error: Exception):
        app.logger.exception("unhandled error on %s %s", request.method, logged_path())
        # the error page reads the signed-in user: a failed flush must not break it too
        with suppress(SQLAlchemyError):
            db.session.rollback()
        return render_error(500)
