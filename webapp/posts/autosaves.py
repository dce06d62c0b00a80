"""Autosave: the text an editor typed but has not saved, kept beside the post.

One row per post and user (post_id None: that user's New post form). It is never a version
of the post and never written over anyone's: it belongs to whoever typed it and records the
post version it was typed on, so reopening the post offers it back, saying when the post
moved on since. Saving the post deletes the saver's autosave in the save's transaction.
"""

import re
from dataclasses import dataclass, replace

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from ..db import database_now
from ..extensions import db
from ..models import Post, PostAutosave
from . import revisions
from .edits import MAX_BODY_BYTES, MAX_SLUG, MAX_TITLE, content_digest, get_post
from .errors import PostError
from .unsaved import forget, forget_new

__all__ = ["Offer", "Typed", "check_typed", "discard", "find", "forget", "forget_new", "keep",
           "offer"]

MAX_TYPED = 64  # a typed time or zone name
DIGEST = re.compile(r"[0-9a-f]{32}")  # content_digest's


@dataclass(frozen=True)
class Typed:
    """What a post form held when it was sent: its text, and New post's time as typed."""

    title: str = ""
    slug: str = ""
    body: str = ""
    publish_at: str = ""
    zone: str = ""


def check_typed(typed: Typed) -> None:
    """Refuse, naming the field, text larger than a post may hold or that no database stores."""
    errors = {}
    for name, limit in (("title", MAX_TITLE), ("slug", MAX_SLUG), ("publish_at", MAX_TYPED),
                        ("zone", MAX_TYPED)):
        if len(getattr(typed, name)) > limit:
            errors[name] = f"Keep it under {limit} characters."
    if len(typed.body.encode(errors="replace")) > MAX_BODY_BYTES:
        errors["body"] = (f"The body is over {MAX_BODY_BYTES // 1000} kB, the most a post may "
                          "hold; shorten it or split the post.")
    for name, value in vars(typed).items():
        if "\x00" in value:
            errors.setdefault(name, "Remove the NUL character (\\u0000): no post can hold it.")
    if errors:
        raise PostError(errors)


def find(user_id: int, post_id: int | None) -> PostAutosave | None:
    """Return user's autosave of post_id (None: of a new post), or None."""
    query = sa.select(PostAutosave).where(PostAutosave.user_id == user_id,
                                          _of(post_id)).order_by(PostAutosave.id.desc())
    return db.session.scalars(query.limit(1)).first()


def _of(post_id: int | None) -> sa.ColumnElement[bool]:
    return PostAutosave.post_id.is_(None) if post_id is None \
        else PostAutosave.post_id == post_id


def keep(user_id: int, post_id: int | None, typed: Typed, base_version: int | None = None,
         base_digest: str = "") -> PostAutosave | None:
    """Keep what user typed into post_id's form (None: New post's), in its own transaction.

    Text the same as the saved post's (or an empty New post form) is nothing unsaved: any
    autosave is deleted instead and None returned. Raise PostError naming a field too big.
    """
    check_typed(typed)
    typed = replace(typed, body=typed.body.replace("\r\n", "\n"))  # as a save stores it
    post = get_post(post_id) if post_id is not None else None
    if _nothing_unsaved(post, typed):
        discard(user_id, post_id)
        return None
    now = database_now()
    if post is not None and not (base_version is not None and 1 <= base_version <= post.version):
        base_version, base_digest = post.version, content_digest(post.title, post.slug,
                                                                 post.body)  # a form's nonsense
    values = {**vars(typed), "base_version": base_version, "saved_at": now,
              "base_digest": base_digest if DIGEST.fullmatch(base_digest) else ""}
    try:
        return _write(user_id, post_id, values)
    except IntegrityError:  # the same user's other tab inserted it first: write over it
        db.session.rollback()
        return _write(user_id, post_id, values)


def _write(user_id: int, post_id: int | None, values: dict) -> PostAutosave:
    row = find(user_id, post_id)
    if row is None:
        row = PostAutosave(user_id=user_id, post_id=post_id, **values)
        db.session.add(row)
    else:
        for name, value in values.items():
            setattr(row, name, value)
    db.session.commit()
    return row


def _nothing_unsaved(post: Post | None, typed: Typed) -> bool:
    if post is None:
        return not (typed.title.strip() or typed.slug.strip() or typed.body.strip())
    return (typed.title.strip(), typed.slug.strip(), typed.body.replace("\r\n", "\n")) == (
        post.title, post.slug, post.body)


def discard(user_id: int, post_id: int | None) -> bool:
    """Delete user's autosave of post_id (None: of a new post); return whether there was one."""
    gone = db.session.execute(sa.delete(PostAutosave).where(
        PostAutosave.user_id == user_id, _of(post_id)))
    db.session.commit()
    return bool(getattr(gone, "rowcount", 0))


@dataclass(frozen=True)
class Offer:
    """An autosave offered back: its text, the diff against the saved post, and whether the
    post's text moved on since it was typed ("based on an older version")."""

    autosave: PostAutosave
    hunks: list | None  # None for New post's: no saved text to compare with
    title_before: str | None  # the saved title when the typed one differs
    older: bool


def offer(user_id: int, post: Post | None) -> Offer | None:
    """Return user's unsaved text for post (None: New post) with its diff, or None."""
    row = find(user_id, post.id if post is not None else None)
    if row is None:
        return None
    if post is None:  # nothing saved to compare with: the page shows the text itself
        return Offer(row, None, None, False)
    older = row.base_digest != content_digest(post.title, post.slug, post.body)
    return Offer(row, revisions.diff(post.body, row.body),
                 post.title if row.title.strip() != post.title else None, older)
