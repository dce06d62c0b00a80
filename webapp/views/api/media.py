"""Serve the media endpoints of the JSON API: upload (multipart), list, delete."""

from flask import current_app, g, jsonify, request, url_for

from ... import limits, media
from .auth import api_role
from .blueprint import bp
from .errors import ApiError, created, error_response, invalid
from .inputs import page_arg

PAGE_SIZE = 50
FORM_FIELDS = {"file", "alt"}


def _refusal(exc: media.MediaError) -> ApiError:
    if isinstance(exc, media.MediaInUse):
        return ApiError(409, "In use", str(exc), extra={"posts": [
            {"id": post_id, "title": title} for post_id, title in exc.posts]})
    if exc.status == 404:
        return ApiError(404, "Not found", str(exc))
    title = "Too large" if exc.status == 413 else f"Invalid field: {exc.field}"
    return ApiError(exc.status, title, f"{exc.field}: {exc}", exc.field)


@bp.errorhandler(limits.TooLarge)
def too_large(error: limits.TooLarge):
    """Refuse an upload over MEDIA_MAX_BYTES before reading it, naming the file field."""
    return error_response(ApiError(413, "Too large", error.description, "file"))


@bp.get("/media")
@api_role("editor")
def list_media():
    """List files, newest first, PAGE_SIZE a page; ?q= searches names and alt text."""
    query = request.args.get("q", "")
    if "\x00" in query or len(query) > 200:
        raise invalid("q", "must be at most 200 characters, without NUL")
    found = media.list_files(query.strip(), page_arg(), PAGE_SIZE)
    return jsonify(media=[{**media.file_json(row), "used_by": [
        {"id": post_id, "title": title} for post_id, title in found.used_by.get(row.id, [])]}
        for row in found.files], page=found.page, per_page=PAGE_SIZE, has_next=found.has_next)


@bp.post("/media")
@api_role("editor")
def upload_media():
    """Store an image sent as multipart/form-data (file, alt); 200 when it was there already."""
    if request.mimetype != "multipart/form-data":
        raise ApiError(415, "Unsupported media type", "file: send multipart/form-data with "
                       "the fields file (the image) and alt (its alt text).", "file")
    # a part Werkzeug could not name (name="\\") arrives named None: unknown too
    unknown = sorted(name or "(a part without a name)" for name in
                     (set(request.form) | set(request.files)) - FORM_FIELDS)
    if unknown:
        raise invalid(unknown[0], "unknown field; use alt, file")
    upload = request.files.get("file")
    if upload is None:
        raise invalid("file", "required: the image, as a file part")
    try:
        row, added = media.upload(upload.read(), upload.filename or "", request.form.get(
            "alt", ""), current_app.config["MEDIA_MAX_BYTES"], g.api_user)
    except media.MediaError as exc:
        raise _refusal(exc) from None
    if not added:
        return jsonify(media.file_json(row)), 200
    return created(media.file_json(row), url_for("api.list_media"))


@bp.delete("/media/<int:file_id>")
@api_role("editor")
def delete_media(file_id: int):
    """Delete a file no post uses; 409 naming the posts that use it."""
    try:
        row = media.delete_file(file_id)
    except media.MediaError as exc:
        raise _refusal(exc) from None
    return jsonify(deleted=row.id, sha256=row.sha256)
