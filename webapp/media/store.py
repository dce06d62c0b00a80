"""The media library: upload (stored once by SHA-256), delete (refused while used), list.

Every write checks first and commits once, its audit row in the same transaction.
"""

import re
import unicodedata
from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app
from sqlalchemy.exc import IntegrityError

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..models import MediaFile, MediaVariant, OutboxEvent, Post, ScheduledChange, User
from ..ops import audit
from ..site.markdown import ImageInfo
from . import images, serving

MAX_ALT = 500
MAX_NAME = 255
ADDRESS = re.compile(r"/media/([0-9a-f]{64})/")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)")  # a Markdown image's URL


class MediaError(Exception):
    """An upload or a deletion refused: status, the field at fault and why."""

    def __init__(self, status: int, field: str, message: str) -> None:
        super().__init__(message)
        self.status, self.field = status, field


class MediaNotFound(MediaError):
    def __init__(self) -> None:
        super().__init__(404, "id", "No media file has that id.")


class MediaInUse(MediaError):
    """The file's address is in these posts' bodies: it cannot be deleted."""

    def __init__(self, posts: list[tuple[int, str]]) -> None:
        names = ", ".join(f"“{title}”" for _id, title in posts)
        super().__init__(409, "id", f"This file is used by {names}: remove it from "
                                    f"{'that post' if len(posts) == 1 else 'those posts'} "
                                    "first.")
        self.posts = posts


def megabytes(size: int) -> str:
    """Say a size as people read it (10 MB, 2.5 MB, 310 kB)."""
    if size < 1_000_000:
        return f"{max(1, round(size / 1000))} kB"
    return f"{size / 1_000_000:.1f}".removesuffix(".0") + " MB"


def clean_alt(alt: str) -> str:
    """Return the alt text on one line, or raise naming the field."""
    alt = " ".join((alt or "").split())
    if not alt:
        raise MediaError(422, "alt", "Describe the image for readers who cannot see it.")
    if len(alt) > MAX_ALT or "\x00" in alt:
        raise MediaError(422, "alt", f"Alt text may be at most {MAX_ALT} characters.")
    return alt


def clean_name(name: str, ext: str) -> str:
    """Return the upload's file name without folders or control characters (shown only)."""
    base = re.split(r"[\\/]", name or "")[-1]
    base = "".join(c for c in base if unicodedata.category(c)[0] != "C").strip()
    return (base or f"image.{ext}")[:MAX_NAME]


def upload(data: bytes, name: str, alt: str, limit: int,
           user: User | None) -> tuple[MediaFile, bool]:
    """Store an image once by content; return (its file, whether this upload added it)."""
    alt = clean_alt(alt)
    if len(data) > limit:
        raise MediaError(413, "file", f"The file is {megabytes(len(data))}: images may be at "
                                      f"most {megabytes(limit)}.")
    # no transaction held open while the image is decoded: PostgreSQL ends one left idle
    # past LEADER_STALE_SECONDS / 2, and the request with it (nothing is pending)
    db.session.commit()
    try:
        made = images.process(data, current_app.config["MEDIA_MAX_DECODED_MB"])
    except images.ImageRefused as exc:
        raise MediaError(422, "file", str(exc)) from None
    found = _by_address(made.sha256)
    if found is not None:
        return found, False
    row = MediaFile(sha256=made.sha256, name=clean_name(name, made.ext), alt=alt,
                    content_type=made.content_type, ext=made.ext,
                    width=made.original.width, height=made.original.height,
                    size=len(made.original.data),
                    widths=",".join(v.variant for v in made.variants[1:]),
                    webp=",".join(v.variant for v in made.webp),
                    uploaded_by_id=getattr(user, "id", None),
                    uploaded_by=getattr(user, "email", ""))
    db.session.add(row)
    try:
        db.session.flush()
        db.session.add_all(_variant_rows(row.id, made.variants, made.webp))
        audit.record("media.upload", audit.target("media", row.id, row.name),
                     {"alt": alt, "size": row.size, "type": row.content_type})
        db.session.commit()
    except IntegrityError:  # the same file, uploaded at the same moment elsewhere
        db.session.rollback()
        found = _by_address(made.sha256)
        if found is None:  # another conflict than the same file's
            raise
        return found, False
    return row, True


def _variant_rows(file_id: int, variants: tuple[images.Encoded, ...],
                  webp: tuple[images.Encoded, ...] = ()) -> list[MediaVariant]:
    """Return the rows of a file's widths: "orig", "480" ... and "orig.webp", "480.webp" ..."""
    return [MediaVariant(file_id=file_id, variant=v.variant + suffix, width=v.width,
                         height=v.height, data=v.data)
            for encoded, suffix in ((variants, ""), (webp, ".webp")) for v in encoded]


def add_webp() -> int:
    """Make the WebP copies of the files stored without them, one file a transaction;
    return how many got them. Safe beside uploads and another run (each file done once)."""
    done, last = 0, 0
    todo = sa.select(MediaFile.id).where(MediaFile.webp == "", MediaFile.ext != "webp")
    while (file_id := db.session.scalar(
            todo.where(MediaFile.id > last).order_by(MediaFile.id).limit(1))) is not None:
        last = file_id
        row = db.session.get(MediaFile, file_id, with_for_update=True)
        original = db.session.get(MediaVariant, (file_id, "orig"))
        try:
            made = images.webp_copies(original.data) if row and not row.webp and original else ()
        except images.ImageRefused:  # stored before a check that refuses it now: left as is
            made = ()
        if made and row is not None:  # an animation gets none
            db.session.add_all(_variant_rows(file_id, (), made))
            row.webp = ",".join(v.variant for v in made)
            done += 1
        db.session.commit()
    return done


def _by_address(sha256: str) -> MediaFile | None:
    return db.session.scalar(sa.select(MediaFile).where(MediaFile.sha256 == sha256))


def get_file(file_id: int) -> MediaFile:
    found = db.session.get(MediaFile, file_id)
    if found is None:
        raise MediaNotFound()
    return found


def _address(row: MediaFile, variant: str) -> str:
    """Return the address of one stored width: "480" in the file's type, "480.webp" a copy."""
    width, _, ext = variant.partition(".")
    return serving.media_path(row.sha256, width, ext or row.ext)


def delete_file(file_id: int) -> MediaFile:
    """Delete a file no post uses (audited); refuse one that is used, naming the posts."""
    now = database_now()  # first: it ends the transaction it reads in
    row = get_file(file_id)
    used = posts_using([row]).get(row.id)
    if used:
        raise MediaInUse(used)
    paths = [_address(row, variant) for variant in db.session.scalars(
        sa.select(MediaVariant.variant).where(MediaVariant.file_id == row.id))]
    db.session.execute(sa.delete(MediaVariant).where(MediaVariant.file_id == row.id))
    db.session.delete(row)
    audit.record("media.delete", audit.target("media", row.id, row.name),
                 {"alt": row.alt, "size": row.size})
    # a cache keeps its copies of every width for a year (immutable): they are purged, from
    # the outbox in this transaction like any change readers see (webapp.plugins.purges)
    db.session.add(OutboxEvent(topic="media.deleted", created_at=now,
                               payload={"sha256": row.sha256, "paths": paths},
                               dedupe_key=f"media.deleted:{row.sha256}:{now.isoformat()}"))
    wake_scheduler("plugins")
    db.session.commit()
    return row


@dataclass(frozen=True)
class FilePage:
    """One page of the library, newest first, and the posts using each file on it."""

    files: list[MediaFile]
    used_by: dict[int, list[tuple[int, str]]]
    page: int
    has_next: bool


def list_files(query: str = "", page: int = 1, per_page: int = 50) -> FilePage:
    """Return a page of files, newest first; query searches names and alt text."""
    stmt = sa.select(MediaFile).order_by(MediaFile.created_at.desc(), MediaFile.id.desc())
    if query:
        stmt = stmt.where(sa.or_(MediaFile.name.icontains(query, autoescape=True),
                                 MediaFile.alt.icontains(query, autoescape=True)))
    found = list(db.session.scalars(stmt.offset((page - 1) * per_page).limit(per_page + 1)))
    files = found[:per_page]
    return FilePage(files, posts_using(files), page, len(found) > per_page)


def posts_using(files: list[MediaFile]) -> dict[int, list[tuple[int, str]]]:
    """Return {file id: [(post id, title)]} for the posts whose body has the file's address."""
    if not files:
        return {}
    address = sa.literal("/media/") + MediaFile.sha256 + sa.literal("/")
    ids = [f.id for f in files]
    in_posts = (sa.select(MediaFile.id, Post.id, Post.title, sa.literal(False).label("pending"))
                .join(Post, Post.body.contains(address)).where(MediaFile.id.in_(ids)))
    # a change waiting to go live uses its images too: they must be there when it does
    in_changes = (sa.select(MediaFile.id, Post.id, Post.title, sa.literal(True))
                  .join(ScheduledChange, ScheduledChange.body.contains(address))
                  .join(Post, Post.id == ScheduledChange.post_id).where(MediaFile.id.in_(ids)))
    used: dict[int, list[tuple[int, str]]] = {}
    rows = db.session.execute(sa.union_all(in_posts, in_changes).order_by(sa.text("2, 4")))
    for file_id, post_id, title, pending in rows:
        entry = (post_id, f"{title} (its scheduled change)" if pending else title)
        if entry not in used.setdefault(file_id, []):
            used[file_id].append(entry)
    return used


def describe_images(body: str | None) -> tuple[ImageInfo, ...]:
    """Return what the Markdown renderer needs of the site's images in body (one read)."""
    found = sorted(set(ADDRESS.findall(body or "")))
    if not found:
        return ()
    rows = db.session.execute(
        sa.select(MediaFile.sha256, MediaFile.ext, MediaFile.width, MediaFile.height,
                  MediaFile.widths, MediaFile.webp).where(MediaFile.sha256.in_(found)))
    return tuple(ImageInfo(sha, ext, width, height, tuple(int(w) for w in widths.split(",") if w),
                           tuple(v for v in webp.split(",") if v))
                 for sha, ext, width, height, widths, webp in sorted(rows))


def first_image(body: str | None, known: tuple[ImageInfo, ...]) -> dict | str | None:
    """Return the first image of body for og:image: the site's (its largest width, as the
    media route's values), an absolute http(s) URL, or None."""
    match = IMAGE.search(body or "")
    if match is None:
        return None
    url = match.group(1)
    address = ADDRESS.search(url)
    info = next((i for i in known if address and i.sha256 == address.group(1)), None)
    if info is None:
        return url if url.startswith(("https://", "http://")) else None
    return {"sha256": info.sha256, "ext": info.ext,
            "variant": str(info.widths[-1]) if info.widths else "orig"}
