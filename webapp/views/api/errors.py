"""Answer an API request: 201 with the new resource, or a JSON error naming what was wrong."""

from flask import Response, jsonify


class ApiError(Exception):
    """Answer the request with a JSON error naming what was wrong."""

    def __init__(self, status: int, error: str, detail: str = "", field: str | None = None,
                 fields: dict[str, str] | None = None, extra: dict | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail or error)
        self.status, self.error, self.detail = status, error, detail or error
        self.extra, self.headers = extra or {}, headers or {}
        self.fields = fields or ({field: self.detail} if field is not None else {})


def invalid(field: str, detail: str) -> ApiError:
    """Return a 422 error for one bad field."""
    label = field or '""'  # a JSON key may be the empty string
    return ApiError(422, f"Invalid field: {label}", f"{label}: {detail}", field)


WHOLE_BODY = "request_body"  # the field a 400 names: the body as a whole cannot be read


def refused(fields: dict[str, str], conflict: str, stale: bool = False) -> ApiError:
    """Return a domain refusal as the API says it: 422 naming each field (the first in the
    title), or 409 when it names none or the resource moved on (stale)."""
    if stale or not fields:
        return ApiError(409, "Conflict", conflict)
    first = next(iter(fields))
    return ApiError(422, f"Invalid field: {first}",
                    "; ".join(f"{k}: {v}" for k, v in fields.items()), fields=fields)


def malformed(detail: str) -> ApiError:
    """Return a 400 error for a body that is not a JSON object in UTF-8."""
    return ApiError(400, "Malformed JSON", detail, WHOLE_BODY)


def error_response(exc: ApiError) -> tuple[Response, int]:
    """Turn an ApiError into its JSON body and status (the blueprint's error handler)."""
    body = {"error": exc.error, "detail": exc.detail, **exc.extra}
    if exc.fields:
        body["field"] = next(iter(exc.fields))
        body["fields"] = exc.fields
    response = jsonify(body)
    response.headers.update(exc.headers)
    if exc.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="soloist"'
    return response, exc.status


def created(body: dict, location: str) -> tuple[Response, int]:
    """Answer 201 with the new resource and where to read it again."""
    response = jsonify(body)
    response.headers["Location"] = location
    return response, 201
