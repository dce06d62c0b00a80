"""Serve a file by its content address: immutable, and 304 before Flask runs.

/media/<sha256>/<orig or width>.<ext> names bytes that never change (the address is the
SHA-256 of the stored original, and each width is made once, at upload; .webp names the
WebP copy of that width when the file is not a WebP itself), so an answer
may be kept a year (immutable) and a copy with the address's ETag is current by
definition: its 304 reads nothing, not even the database. A 200 is one read, on the
worker's revalidation connection (prepared once), before Flask runs too; anything that
read cannot answer (no such file, the connection away) goes to the app's own route,
which answers the same way or 404s.
"""

import logging
import re

import sqlalchemy as sa
from flask import Flask
from werkzeug.http import parse_etags

from ..headers import HEADERS
from ..models import MediaFile, MediaVariant
from ..site import revalidation, surrogate

PATH = re.compile(r"^/media/([0-9a-f]{64})/(orig|[1-9][0-9]{1,4})\.(jpg|png|webp|gif)$")
CACHE_CONTROL = "public, max-age=31536000, immutable"
VARIANT_BYTES = (
    sa.select(MediaVariant.data, MediaFile.content_type)
    .join(MediaFile, MediaFile.id == MediaVariant.file_id)
    .where(MediaFile.sha256 == sa.bindparam("sha"),
           # "480" of a file of that type, or "480.webp": a copy in another type (both
           # named, so the read stays one probe of the primary key)
           MediaVariant.variant.in_([sa.bindparam("variant", type_=sa.String),
                                      sa.bindparam("copy", type_=sa.String)]),
           sa.or_(MediaFile.ext == sa.bindparam("ext"),
                  MediaVariant.variant == sa.bindparam("copy"))))
COPY_TYPES = {"webp": "image/webp"}  # the copies a file may have besides its own type
log = logging.getLogger("soloist.media")


def media_path(sha256: str, variant: str, ext: str) -> str:
    """Return the content address of one width of a file (variant "orig" or a width)."""
    return f"/media/{sha256}/{variant}.{ext}"


def is_address(path: str) -> bool:
    """Return whether path is a well-formed content address (the file may not exist)."""
    return PATH.match(path) is not None


def markdown_for(sha256: str, ext: str, alt: str) -> str:
    """Return the Markdown that shows the file, alt text escaped (no markup can get in).

    Only what Markdown would read as markup is escaped: a comma or a full stop stays as
    typed, not "\\," in the editor's text."""
    escaped = re.sub(r"([\\\[\]*_`<>&!~])", r"\\\1", " ".join(alt.split()))
    return f"![{escaped}]({media_path(sha256, 'orig', ext)})"


def file_json(row: MediaFile) -> dict:
    """Return a file as the editor's script and the API show it: its address, its Markdown."""
    return {"id": row.id, "sha256": row.sha256, "name": row.name, "alt": row.alt,
            "content_type": row.content_type, "width": row.width, "height": row.height,
            "size": row.size, "widths": row.variant_widths(),
            "url": media_path(row.sha256, "orig", row.ext),
            "markdown": markdown_for(row.sha256, row.ext, row.alt),
            "uploaded_by": row.uploaded_by, "created_at": row.created_at.isoformat()}


def etag(sha256: str, variant: str, ext: str) -> str:
    """Return the ETag of one width in one type: a WebP copy's is not its original's."""
    return f'"{sha256[:32]}-{variant}.{ext}"'


def served_headers(tag: str, content_type: str | None = None,
                   length: int | None = None) -> list[tuple[str, str]]:
    """Return the headers of a served file (of its 304 when content_type is None).

    A 200 carries the file's surrogate key (its ETag starts with the address): removing
    the file purges every width. A 304 leaves a kept copy's keys as they are.
    """
    headers = [("ETag", tag), ("Cache-Control", CACHE_CONTROL), *HEADERS.items()]
    if content_type is not None:
        headers += [("Content-Type", content_type), ("Content-Length", str(length)),
                    *surrogate.headers([surrogate.media_key(tag.strip('"'))])]
    return headers


def copy_is_current(if_none_match: str | None, tag: str) -> bool:
    """Return whether If-None-Match names this address's ETag (weakly: W/ too)."""
    if not if_none_match:
        return False
    return if_none_match == tag or parse_etags(if_none_match).contains_weak(tag.strip('"'))


def read_variant(sha256: str, variant: str, ext: str):
    """Return (bytes, Content-Type) of one width of a file, or None (raises Unavailable)."""
    row = revalidation.read(VARIANT_BYTES, sha=sha256, ext=ext, variant=variant,
                            copy=f"{variant}.{ext}")
    if row is None:
        return None
    data, own_type = row
    return bytes(data), COPY_TYPES.get(ext, own_type)


def init_app(app: Flask) -> None:
    """Answer GETs of media by content address before Flask runs."""
    app.wsgi_app = ServeFirst(app.wsgi_app, app)  # type: ignore[method-assign]


class ServeFirst:
    """WSGI middleware: a 304 without a read, a 200 from one read, else the app answers."""

    def __init__(self, wsgi_app, app: Flask) -> None:
        self.wsgi_app, self.app = wsgi_app, app

    def __call__(self, environ: dict, start_response):
        method = environ.get("REQUEST_METHOD")
        found = PATH.match(environ.get("PATH_INFO", "")) if method in ("GET", "HEAD") else None
        if found is None:
            return self.wsgi_app(environ, start_response)
        sha, variant, ext = found.groups()
        tag = etag(sha, variant, ext)
        if copy_is_current(environ.get("HTTP_IF_NONE_MATCH"), tag):
            start_response("304 NOT MODIFIED", served_headers(tag))
            return []
        try:
            with self.app.app_context():
                served = read_variant(sha, variant, ext)
        except Exception as exc:  # noqa: BLE001  (the app answers, or reports, it properly)
            log.warning("serving %s before the app failed, the app answers: %r",
                        environ.get("PATH_INFO"), exc)
            served = None
        if served is None:
            return self.wsgi_app(environ, start_response)
        data, content_type = served
        start_response("200 OK", served_headers(tag, content_type, len(data)))
        return [] if method == "HEAD" else [data]
