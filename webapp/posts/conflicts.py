"""A save refused because the post's text changed since the form opened: who changed it
(the same editor in another tab, or someone named), and what changed since that version."""

from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa

from ..extensions import db
from ..models import AuditEvent, Post, PostRevision
from . import revisions
from .edits import content_digest

LOOK_BACK = 50  # revisions searched for the version a form was opened at


@dataclass(frozen=True)
class Conflict:
    """Who saved the post since a form opened, and the diff from that version to the saved.

    hunks and title_before are None when the version the form started from is no longer
    kept (housekeeping prunes old revisions).
    """

    by_me: bool
    names: list[str]
    hunks: list | None
    title_before: str | None


def explain(post: Post, digest: str, typed_slug: str, user_id: int) -> Conflict:
    """Tell what happened to post since a form opened on the text digest names."""
    kept = list(db.session.scalars(
        sa.select(PostRevision).where(PostRevision.post_id == post.id)
        .order_by(PostRevision.id.desc()).limit(LOOK_BACK)))
    slugs = {post.slug, typed_slug.strip().lower()}
    base = next((i for i, rev in enumerate(kept)
                 if any(content_digest(rev.title, slug, rev.body) == digest for slug in slugs)),
                None)
    since = kept[:base] if base is not None else kept[:1]
    if not kept or (kept[0].title, kept[0].body) != (post.title, post.body):
        since = []  # changed without a revision (a status, a slug, a script): by whom, unknown
    others = list(dict.fromkeys(rev.author or "someone without an account" for rev in since
                                if rev.author_id != user_id))
    if base is None:
        return Conflict(bool(since) and not others, others, None, None)
    old = kept[base]
    return Conflict(bool(since) and not others, others, revisions.diff(old.body, post.body),
                    old.title if old.title != post.title else None)


CLOCKS_APART = timedelta(seconds=5)  # an audit row's time (the app's) beside the database's


def changed_by_me(post: Post, user_id: int) -> bool:
    """Return whether the last audited change to post (made when it was last updated) was
    user's own: the same editor in another tab, not someone else."""
    target = f"post {post.id}"
    last = db.session.scalars(
        sa.select(AuditEvent).where(
            AuditEvent.at.between(post.updated_at - CLOCKS_APART, post.updated_at + CLOCKS_APART),
            sa.or_(AuditEvent.target == target, AuditEvent.target.startswith(f"{target} ")))
        .order_by(AuditEvent.id.desc()).limit(1)).first()
    return last is not None and last.actor_id == user_id
