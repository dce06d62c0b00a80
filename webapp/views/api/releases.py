"""Serve the releases endpoints of the JSON API: many changes that go live as one."""

from flask import jsonify, request, url_for

from ...models import Release
from ...posts import PostError, releases
from ...posts.releases import ItemSpec, ReleaseError, ReleaseNotFound, StaleRelease
from ...timefmt import iso
from .auth import api_role
from .blueprint import bp
from .errors import ApiError, created, invalid, refused
from .inputs import json_body, page_arg, text_field, time_field

PAGE_SIZE = 50
ITEM_FIELDS = {"kind", "post_id", "title", "body", "site_name", "site_description"}
MAX_POST_ID = 2**31 - 1


def release_json(release: Release, items: bool = True) -> dict:
    """Return a release as the API shows it (times in UTC ISO 8601; lists leave items out)."""
    data = {"id": release.id, "name": release.name, "release_at": iso(release.release_at),
            "status": release.status, "version": release.version, "author": release.author,
            "published_at": iso(release.published_at), "result": release.result,
            "created_at": iso(release.created_at), "updated_at": iso(release.updated_at)}
    if items:
        data["items"] = [{"id": item.id, "kind": item.kind, "post_id": item.post_id,
                          "title": item.title, "body": item.body, "site_name": item.site_name,
                          "site_description": item.site_description}
                         for item in releases.items_of(release.id)]
    return data


def _refusal(exc: PostError) -> ApiError:
    """Turn a refused change into 404, 409 (gone, cancelled, changed since) or 422 (a field).

    An item's field is named items (the body's field), its place in the detail: items[3].post_id.
    """
    if isinstance(exc, ReleaseNotFound):
        return ApiError(404, "Not found", "No release has that id.")
    fields: dict[str, str] = {}
    for key, message in exc.errors.items():
        if key == "form":
            continue
        name = "items" if key.startswith("items") else key
        detail = f"{key}: {message}" if name != key else message
        fields[name] = f"{fields[name]}; {detail}" if name in fields else detail
    return refused(fields, str(exc), isinstance(exc, StaleRelease))


def _get(release_id: int) -> Release:
    try:
        return releases.get_release(release_id)
    except ReleaseError as exc:
        raise _refusal(exc) from None


def _items(data: dict) -> list[ItemSpec] | None:
    """Read the items sent (None when absent), by type; the domain checks the rest."""
    if "items" not in data:
        return None
    raw = data["items"]
    if not isinstance(raw, list):
        raise invalid("items", 'must be a list of items, e.g. [{"kind": "publish", '
                               '"post_id": 12}]')
    specs = []
    for n, item in enumerate(raw):
        if not isinstance(item, dict):
            raise invalid("items", f"items[{n}] must be an object")
        unknown = sorted(set(item) - ITEM_FIELDS)
        if unknown:
            raise invalid("items", f"items[{n}].{unknown[0]}: unknown field; use "
                                   f"{', '.join(sorted(ITEM_FIELDS))}")
        post_id = item.get("post_id")
        if post_id is not None and (not isinstance(post_id, int) or isinstance(post_id, bool)
                                    or not 0 < post_id <= MAX_POST_ID):
            raise invalid("items", f"items[{n}].post_id must be a post's id (a whole number)")
        texts = {}
        for name in ("kind", "title", "body", "site_name", "site_description"):
            value = item.get(name)
            if value is not None and not isinstance(value, str):
                raise invalid("items", f"items[{n}].{name} must be a string")
            texts[name] = value
        specs.append(ItemSpec(texts["kind"] or "", post_id, texts["title"], texts["body"],
                              texts["site_name"], texts["site_description"]))
    return specs


def _version(data: dict) -> int | None:
    if "version" not in data:
        return None
    version = data["version"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise invalid("version", "must be a whole number (leave it out to skip the check)")
    return version


@bp.get("/releases")
@api_role("viewer")
def list_releases():
    """List releases: those to go soonest first, then the rest newest first, PAGE_SIZE a page."""
    status = request.args.get("status")
    if status is not None and status not in Release.STATUSES:
        raise invalid("status", f"must be one of {', '.join(Release.STATUSES)}")
    page = page_arg()
    found = releases.list_releases((status,) if status else Release.STATUSES,
                                   limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE)
    return jsonify(releases=[release_json(r, items=False) for r in found[:PAGE_SIZE]],
                   page=page, per_page=PAGE_SIZE, has_next=len(found) > PAGE_SIZE)


@bp.get("/releases/<int:release_id>")
@api_role("viewer")
def get_release(release_id: int):
    """Show one release with its items (and, once it went, what it did)."""
    return jsonify(release_json(_get(release_id)))


@bp.post("/releases")
@api_role("editor")
def create_release():
    """Make a release: a name, a time and its items, all checked before anything is written."""
    data = json_body({"name", "release_at", "items"})
    name = text_field(data, "name", required=True)
    release_at = time_field(data, "release_at")
    if release_at is None:
        raise invalid("release_at", "required: when the release goes live (ISO 8601 with an "
                                    "offset)")
    specs = _items(data) or []
    try:
        release = releases.create_release(name, release_at, specs)
    except PostError as exc:
        raise _refusal(exc) from None
    return created(release_json(release), url_for("api.get_release", release_id=release.id))


@bp.patch("/releases/<int:release_id>")
@api_role("editor")
def update_release(release_id: int):
    """Rename a release, move its time, or replace its items, until it goes; send version to
    refuse a stale edit (409)."""
    data = json_body({"name", "release_at", "items", "version"})
    release = _get(release_id)
    name = text_field(data, "name", default=release.name)
    release_at = time_field(data, "release_at") if "release_at" in data else release.release_at
    try:
        releases.update_release(release.id, name, release_at, _version(data), _items(data))
    except PostError as exc:
        raise _refusal(exc) from None
    return jsonify(release_json(_get(release_id)))


@bp.post("/releases/<int:release_id>/cancel")
@api_role("editor")
def cancel_release(release_id: int):
    """Cancel a release still to go: nothing in it goes live; it is kept, cancelled."""
    data = json_body({"version"}) if request.get_data(cache=True) else {}
    try:
        releases.cancel_release(_get(release_id).id, _version(data))
    except PostError as exc:
        raise _refusal(exc) from None
    return jsonify(release_json(_get(release_id)))
