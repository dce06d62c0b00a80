"""A post's text: check the fields, create a draft, save an edit against its version."""

import hashlib
import re
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PLUGINS, PUBLISH
from ..models import Post
from ..ops import audit
from ..site import state
from ..site.xmltext import unsafe_character
from . import gate, revisions
from .errors import PostError, PostNotFound, PublishTimeInPast, SlugTaken, StaleText
from .outbox import write_outbox
from .unsaved import forget, forget_new

MAX_TITLE = 200
MAX_SLUG = 200
MAX_BODY_BYTES = 200_000
SLUG_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def is_slug(text: str) -> bool:
    """Return whether text is a slug a post can be saved with."""
    return len(text) <= MAX_SLUG and SLUG_PATTERN.fullmatch(text) is not None
MAX_ID = 2**31 - 1  # posts.id is an INTEGER: a larger id in a URL names nothing


@dataclass(frozen=True)
class PostFields:
    """A post's editable text, checked."""

    title: str
    slug: str
    body: str


def slugify(title: str) -> str:
    """Return a URL slug made from a title (ASCII letters, digits and dashes)."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return slug[:80].rstrip("-")


def check_fields(title: str, slug: str, body: str) -> PostFields:
    """Return the cleaned fields, or raise PostError naming every bad one."""
    title, slug, body = title.strip(), slug.strip().lower(), body.replace("\r\n", "\n")
    errors = {}
    if not title:
        errors["title"] = "Give the post a title."
    elif len(title) > MAX_TITLE:
        errors["title"] = f"Keep the title under {MAX_TITLE} characters (it has {len(title)})."
    elif found := unsafe_character(title):
        errors["title"] = _unsafe(found)
    slug = slug or slugify(title)
    if not slug and title:
        errors["slug"] = "Type a slug: letters, digits and dashes, e.g. my-first-post."
    elif slug and (len(slug) > MAX_SLUG or not SLUG_PATTERN.match(slug)):
        errors["slug"] = (f"Use lower-case letters, digits and single dashes, at most "
                          f"{MAX_SLUG} characters, e.g. my-first-post.")
    if found := unsafe_character(body):  # first: a lone surrogate cannot even be measured
        errors["body"] = _unsafe(found)
    elif (size := len(body.encode())) > MAX_BODY_BYTES:
        errors["body"] = (f"The body is {-(-size // 1000)} kB; the limit is "
                          f"{MAX_BODY_BYTES // 1000} kB. Shorten it or split the post.")
    if errors:
        raise PostError(errors)
    return PostFields(title, slug, body)


def _unsafe(found: str) -> str:
    return (f"Remove the control character {found}: the feed and the sites that read it "
            "cannot hold it.")


def content_digest(title: str, slug: str, body: str) -> str:
    """Return a short fingerprint of a post's text, to tell content edits from status changes."""
    return hashlib.sha256(f"{title}\0{slug}\0{body}".encode()).hexdigest()[:32]


def get_post(post_id: int) -> Post:
    """Return the post with post_id or raise PostNotFound."""
    post = db.session.get(Post, post_id) if 0 < post_id <= MAX_ID else None
    if post is None:
        raise PostNotFound()
    return post


def slug_taken(slug: str, except_id: int | None = None) -> SlugTaken | None:
    """Return the refusal naming the post that has slug (other than except_id), or None."""
    query = sa.select(Post.id, Post.title).where(Post.slug == slug)
    if except_id is not None:
        query = query.where(Post.id != except_id)
    owner = db.session.execute(query.limit(1)).first()
    return None if owner is None else SlugTaken(owner.id, owner.title)


@contextmanager
def refusing_a_taken_slug() -> Iterator[None]:
    """Refuse, naming the slug, when a statement inside (the commit included) meets another
    editor's post committed with the same slug since it was checked; write nothing."""
    try:
        yield
    except IntegrityError as exc:  # two editors took the same slug at the same moment
        if "slug" not in str(exc.orig):  # another constraint's refusal is not a slug's
            raise
        db.session.rollback()
        raise SlugTaken(None, None) from None  # the racing post: not ours to name


@dataclass(frozen=True)
class TypedText:
    """A post's text as an editor sent it, and the version of the post it was typed on.

    digest names the text of that version (content_digest): given, the text still applies
    when only the post's status or times changed since (the publish leader published it,
    say); without it, any change since refuses it.
    """

    title: str
    slug: str
    body: str
    version: int
    digest: str | None = None


def check_text(post_id: int, typed: TypedText) -> PostFields:
    """Return typed's fields checked for post_id, or raise PostError (a bad field, a slug in
    use). Call it before lock_post: it reads."""
    fields = check_fields(typed.title, typed.slug, typed.body)
    if taken := slug_taken(fields.slug, except_id=post_id):
        raise taken
    return fields


def lock_post(post_id: int) -> Post:
    """Return the post locked for update, or raise PostNotFound."""
    post = db.session.get(Post, post_id, with_for_update=True, populate_existing=True) \
        if 0 < post_id <= MAX_ID else None
    if post is None:
        db.session.rollback()
        raise PostNotFound()
    return post


def refuse_stale_text(post: Post, typed: TypedText, fields: PostFields) -> None:
    """Refuse text typed on a version whose text someone else changed since (StaleText),
    unless it is that text already; the lock is let go."""
    current = (post.title, post.slug, post.body)
    if (fields.title, fields.slug, fields.body) == current:
        return
    if post.version != typed.version and typed.digest != content_digest(*current):
        db.session.rollback()
        raise StaleText(post)


def write_text(post: Post, fields: PostFields, now: datetime,
               restored_from: int | None = None) -> None:
    """Put checked text on a post locked for update, with what goes with it (the same text:
    nothing).

    An audit row; a revision for a new title or body (restored_from: the one a restore
    brings back, audited as post.restore); on a live post the readers' version, and a
    post.updated event naming the post's version, which the caller has already moved on.
    """
    if (fields.title, fields.slug, fields.body) == (post.title, post.slug, post.body):
        return
    detail = _text_changes(post, fields)
    if restored_from:
        detail["restored"] = restored_from
    audit.record("post.restore" if restored_from else "post.edit",
                 audit.target("post", post.id, fields.title), detail)
    text_changed = (fields.title, fields.body) != (post.title, post.body)
    post.title, post.slug, post.body = fields.title, fields.slug, fields.body
    live = post.status == "published"
    if text_changed:
        revisions.keep(post.id, post.title, post.body, "restore" if restored_from else "edit",
                       live, restored_from=restored_from)
    if live:  # readers see the new text: the public pages changed, and the hooks hear of it
        state.bump(now)
        if text_changed:
            updated([post], now)


def _text_changes(post: Post, fields: PostFields) -> dict:
    """Return what an edit changes: the title and slug as they were and are, the body's size."""
    changed = audit.changes({"title": post.title, "slug": post.slug},
                            {"title": fields.title, "slug": fields.slug})
    if fields.body != post.body:
        changed["body"] = [audit.text_size(post.body), audit.text_size(fields.body)]
    return changed


def check_times(publish_at: datetime | None, unpublish_at: datetime | None,
                now: datetime | None = None, new: bool = False) -> None:
    """Refuse a time that has passed, or an unpublish time not after the publish time.

    The one place the rule lives: the forms, the JSON API and every write asks it.
    Pass now (read before) when a row lock is held: reading the clock ends the transaction.
    new: the times of a post not saved yet, which has no "publish now" or "unpublish now"
    to offer instead: each refusal offers what creating one has.
    """
    now = now or database_now()
    if publish_at is not None and publish_at <= now:
        raise PublishTimeInPast(publish_at, instead="leave it empty to save a draft"
                                if new else None)
    if unpublish_at is not None and unpublish_at <= now:
        instead = "leave it empty" if new else "unpublish now"
        raise PostError({"unpublish_at": "That time has already passed; pick a later one, or "
                                         f"{instead}."})
    if publish_at is not None and unpublish_at is not None and unpublish_at <= publish_at:
        raise PostError({"unpublish_at": "The unpublish time must come after the publish time."})


def create_post(title: str, slug: str, body: str, publish_at: datetime | None = None,
                unpublish_at: datetime | None = None) -> Post:
    """Create a draft, or with publish_at a scheduled post, in one transaction.

    Raise PostError for bad fields, a time that has passed or a slug in use. The times
    are checked against the database clock first; one that passes while the row commits
    is simply due, and the publish leader (woken at commit) publishes it.
    """
    errors: dict[str, str] = {}  # every bad field is named at once
    try:
        fields = check_fields(title, slug, body)
    except PostError as exc:
        errors.update(exc.errors)
    try:
        _check_new_times(publish_at, unpublish_at)
    except PostError as exc:
        errors.update(exc.errors)
    if errors:
        raise PostError(errors)
    if publish_at is not None:
        gate.refuse_going_live(0)
    if taken := slug_taken(fields.slug):
        raise taken
    post = Post(title=fields.title, slug=fields.slug, body=fields.body, version=1,
                status="draft" if publish_at is None else "scheduled",
                publish_at=publish_at, unpublish_at=unpublish_at)
    db.session.add(post)
    detail: dict[str, object] = {"title": post.title, "slug": post.slug,
                                  "body": audit.text_size(post.body)}
    if publish_at is not None:
        detail.update(status="scheduled", publish_at=publish_at, unpublish_at=unpublish_at)
    with refusing_a_taken_slug():
        db.session.flush()  # its id: for its audit row and its first revision
        audit.record("post.create", audit.target("post", post.id, post.title), detail)
        gate.note_writer(post)
        revisions.keep(post.id, post.title, post.body, "create", live=False)
        forget_new(post.title, post.body)
        if publish_at is not None:
            wake_scheduler(PUBLISH.name)  # delivered at commit: the leader sleeps until then
        db.session.commit()
    return post


def _check_new_times(publish_at: datetime | None, unpublish_at: datetime | None) -> None:
    if unpublish_at is not None and publish_at is None:
        raise PostError({"unpublish_at": "Needs a publish time: a draft is not published."})
    if publish_at is not None:
        check_times(publish_at, unpublish_at, new=True)


def update_post(post_id: int, version: int, digest: str | None, title: str, slug: str,
                body: str, restored_from: int | None = None) -> Post:
    """Save new text if nobody else changed the text since version (digest names that text).

    A form opened at an older version still saves when only the status changed in
    between (the publish leader published it, say): its text digest still matches.
    restored_from names the revision a restore brings back (see write_text).
    """
    typed = TypedText(title, slug, body, version, digest)
    fields = check_text(post_id, typed)
    now = database_now()  # before the lock: reading the clock ends a transaction
    post = lock_post(post_id)
    gate.refuse_edit(post)
    refuse_stale_text(post, typed, fields)
    post.version += 1
    post.updated_at = now
    with refusing_a_taken_slug():
        write_text(post, fields, now, restored_from)
        forget(post_id)  # the saver's autosave: saved now
        db.session.commit()
    return post


def restore_revision(post_id: int, revision_id: int, version: int) -> Post:
    """Bring an old version's title and body back as a new version (the slug stays), if
    nobody changed the post since version; the page and the API's one way in.

    Raise PostNotFound, PostError naming "revision" (none such, or the text it has now),
    or StalePost.
    """
    post = get_post(post_id)
    found = revisions.get_revision(post_id, revision_id)
    revisions.check_restore(post, found)
    return update_post(post_id, version, None, found.title, post.slug, found.body,
                       restored_from=found.id)


def updated(rows: Sequence[sa.Row | Post], now: datetime, writer: str = "") -> None:
    """Add the post.updated events of live posts whose text changed (rows: as move returns)."""
    write_outbox("post.updated", rows, now, writer)
    wake_scheduler(PLUGINS.name)
