"""The media library: upload images (the page's form, the editor's button, drop and paste),
list and search them, delete unused ones; and the files themselves, by content address."""

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user

from .. import limits, media
from ..accounts.security import refusal, role_required
from ..site.revalidation import Unavailable
from .errors import wants_json

bp = Blueprint("media", __name__, url_prefix="/admin/media")
files_bp = Blueprint("media_files", __name__)  # public: the files, by content address

PER_PAGE = 50


def init_app(app: Flask) -> None:
    """Let uploads carry MEDIA_MAX_BYTES (and the form around the file): more than other forms."""
    app.add_template_filter(media.megabytes, "megabytes")
    app.add_template_filter(lambda row: media.markdown_for(row.sha256, row.ext, row.alt),
                            "media_markdown")
    # the page's form: a stranger's or a viewer's upload is answered before it is read (the
    # API's authenticate does the same for its tokens)
    limits.allow_upload(app, "/admin/media/", lambda: upload_body_limit(app),
                        lambda: too_large_message(app), lambda: refusal("editor"))
    limits.allow_upload(app, "/api/media", lambda: upload_body_limit(app),
                        lambda: too_large_message(app))


def upload_body_limit(app: Flask) -> int:
    """Return the largest upload request: the file's limit and room for the form around it."""
    return app.config["MEDIA_MAX_BYTES"] + 64 * 1024


def too_large_message(app: Flask) -> str:
    return f"file: images may be at most {media.megabytes(app.config['MEDIA_MAX_BYTES'])}."


def _page_arg() -> int:
    raw = request.args.get("page", "1")
    return int(raw) if raw.isascii() and raw.isdigit() and 1 <= int(raw) <= 100_000 else 1


def _index(status: int = 200, form: dict | None = None, errors: dict | None = None):
    query = request.args.get("q", "").strip()[:200]
    found = media.list_files(query.replace("\x00", ""), _page_arg(), PER_PAGE)
    return render_template("media/index.html", found=found, query=query,
                           form=form or {"alt": ""}, errors=errors or {},
                           max_bytes=current_app.config["MEDIA_MAX_BYTES"],
                           limit=media.megabytes(current_app.config["MEDIA_MAX_BYTES"]),
                           types=media.TYPES_TAKEN), status


@bp.get("/")
@role_required("editor")
def index():
    """List every file with its thumbnail, size, uploader, date and the posts using it."""
    return _index()


@bp.post("/")
@role_required("editor")
def upload():
    """Store an uploaded image (once per content); JSON for the editor's script, else the page."""
    upload_file = request.files.get("file")
    alt = request.form.get("alt", "")
    try:
        if upload_file is None or not upload_file.filename:
            raise media.MediaError(422, "file", f"Choose an image ({media.TYPES_TAKEN}).")
        row, added = media.upload(upload_file.read(), upload_file.filename, alt,
                                  current_app.config["MEDIA_MAX_BYTES"], current_user)
    except media.MediaError as exc:
        if wants_json():
            return jsonify(error=str(exc), detail=str(exc), field=exc.field), exc.status
        return _index(exc.status, {"alt": alt}, {exc.field: str(exc)})
    if wants_json():
        # the Markdown carries the alt text typed now, even when the file was there already
        body = {**media.file_json(row), "added": added,
                "markdown": media.markdown_for(row.sha256, row.ext, media.clean_alt(alt))}
        return jsonify(body), 201 if added else 200
    flash(f"“{row.name}” uploaded." if added else f"“{row.name}” was already in the library.",
          "success")
    return redirect(url_for("media.index"), code=303)


@bp.errorhandler(limits.TooLarge)
def too_large(error: limits.TooLarge):
    """Refuse a body over the limit next to the file field (the form's text was not read)."""
    if wants_json():
        return jsonify(error=error.description, detail=error.description, field="file"), 413
    return _index(413, errors={"file": error.description.removeprefix("file: ").capitalize()})


@bp.post("/<int:file_id>/delete")
@role_required("editor")
def delete(file_id: int):
    """Delete a file no post uses; one in use is refused, naming the posts."""
    try:
        row = media.delete_file(file_id)
    except media.MediaNotFound:
        abort(404)
    except media.MediaInUse as exc:
        flash(str(exc), "error")
        return _index(409)
    flash(f"“{row.name}” deleted.", "success")
    return redirect(url_for("media.index"), code=303)


@files_bp.get("/media/<sha256>/<variant>.<ext>")
def serve(sha256: str, variant: str, ext: str):
    """Serve one width of a file by content address (ServeFirst answers most before Flask)."""
    if not media.is_address(media.media_path(sha256, variant, ext)):
        abort(404)
    tag = media.etag(sha256, variant, ext)
    if media.copy_is_current(request.headers.get("If-None-Match"), tag):
        return Response(status=304, headers=media.served_headers(tag))
    try:
        served = media.read_variant(sha256, variant, ext)
    except Unavailable:
        abort(503)
    if served is None:
        abort(404)
    data, content_type = served
    headers = media.served_headers(tag, content_type, len(data))
    return Response(data, headers=headers)  # HEAD: werkzeug sends the headers alone
