"""Refuse a request body over MAX_CONTENT_LENGTH, chunked ones (no Content-Length) included.

Werkzeug checks a declared Content-Length. A chunked body has none: gunicorn de-chunks
it (wsgi.input_terminated) and werkzeug reads it up to the limit and stops there, so a
body cut off at the limit was processed as if it were all. This reads a chunked body
before the app does, at most one byte past the limit, and refuses it (413) when it is
longer: the app sees the whole body or none of it.

An upload route may take larger bodies than MAX_CONTENT_LENGTH (allow_upload): its own
limit holds for chunked bodies and declared lengths alike, and a body over it is refused
with TooLarge, whose message names the limit, before anything reads it. A body larger
than MAX_CONTENT_LENGTH is read only for whoever may upload: the route's own check (a
sign-in, a role) answers anyone else first. The check runs before every other hook, since
the CSRF and NUL checks read the form (with the limit it sets).
"""

import io
from collections.abc import Callable

from flask import Flask, Response, abort, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

TOO_LARGE = "soloist.body_too_large"
UPLOADS = "soloist.upload_limits"  # app.extensions: POST path -> (limit, message)


class TooLarge(RequestEntityTooLarge):
    """A body over an upload route's own limit; the description names the limit."""


def init_app(app: Flask) -> None:
    """Read chunked bodies whole before the app, refusing those over MAX_CONTENT_LENGTH."""
    app.extensions.setdefault(UPLOADS, {})
    app.wsgi_app = ChunkedBodyLimit(app.wsgi_app, app)  # type: ignore[method-assign]
    app.before_request_funcs.setdefault(None, []).insert(0, refuse_body_too_large)


def allow_upload(app: Flask, path: str, limit: Callable[[], int],
                 message: Callable[[], str],
                 refuse: Callable[[], Response | None] = lambda: None) -> None:
    """Let POSTs to path carry bodies up to limit() bytes; refuse larger ones with message().

    refuse() answers whoever may not upload there (or returns None), before anything reads
    a body over MAX_CONTENT_LENGTH.
    """
    app.extensions.setdefault(UPLOADS, {})[path] = (limit, message, refuse)


def body_limit(app: Flask, environ: dict) -> int | None:
    """Return the largest body the request may carry: its upload route's, or the app's."""
    upload = _upload(app, environ)
    return upload[0]() if upload else app.config["MAX_CONTENT_LENGTH"]


def _upload(app: Flask, environ: dict):
    if environ.get("REQUEST_METHOD") != "POST":
        return None
    return app.extensions.get(UPLOADS, {}).get(environ.get("PATH_INFO", ""))


def refuse_body_too_large() -> Response | None:
    """Answer 413 (a page, or JSON under /api) for a chunked body over the limit.

    An upload route's limit replaces MAX_CONTENT_LENGTH for its request, for those its
    check lets upload.
    """
    upload = _upload(current_app, request.environ)
    if upload is not None:
        if (request.content_length or 0) > (current_app.config["MAX_CONTENT_LENGTH"] or 0):
            refused = upload[2]()
            if refused is not None:
                return refused
        limit, message = upload[0](), upload[1]()
        request.max_content_length = limit
        if request.environ.get(TOO_LARGE) or (request.content_length or 0) > limit:
            raise TooLarge(message)
    if request.environ.get(TOO_LARGE):
        abort(413)
    return None


class ChunkedBodyLimit:
    """WSGI middleware: buffer a chunked body up to the limit; mark a longer one too large."""

    def __init__(self, wsgi_app, app: Flask) -> None:
        self.wsgi_app = wsgi_app
        self.app = app

    def __call__(self, environ: dict, start_response):
        limit = body_limit(self.app, environ)
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if limit is not None and chunked and not environ.get("CONTENT_LENGTH"):
            body = read_at_most(environ["wsgi.input"], limit + 1)
            if len(body) > limit:
                environ[TOO_LARGE] = True
                body = b""  # werkzeug refuses the declared length before reading anything
            # the app reads a body of known length now (werkzeug ignores one while chunked)
            del environ["HTTP_TRANSFER_ENCODING"]
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(limit + 1 if environ.get(TOO_LARGE) else len(body))
        return self.wsgi_app(environ, start_response)


def read_at_most(stream, size: int, block: int = 64 * 1024) -> bytes:
    """Return the stream's bytes up to size (fewer when it ends first)."""
    out = bytearray()
    while len(out) < size:
        data = stream.read(min(block, size - len(out)))
        if not data:
            break
        out.extend(data)
    return bytes(out)
