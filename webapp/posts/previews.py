"""Preview links: show a draft, a scheduled post or a live post's scheduled change to someone
without an account.

A link carries 256 random bits (secrets.token_urlsafe(32)); only its SHA-256 is stored, so
the database, a backup or the audit log cannot give a working link back, and the link is
shown once, to the editor who made it. It ends at its expiry (1, 7 or 30 days) or when an
editor revokes it; after that it answers like any page that does not exist. Making and
revoking are audited by the link's id and expiry, never its token.
"""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from ..db import database_now
from ..extensions import db
from ..models import Post, PreviewLink, ScheduledChange, utcnow
from ..ops import audit
from .edits import get_post
from .errors import PostError
from .pending import change_of

DAYS = (1, 7, 30)  # the expiries the form offers
SHAREABLE = ("draft", "scheduled")  # a published post has its public page
MAX_TOKEN = 100  # longer than any token made here: refused before hashing


def hash_token(token: str) -> str:
    """Return the stored form of a preview token."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_link(post_id: int, days: int | None,
                user_id: int | None) -> tuple[PreviewLink, str]:
    """Make a link to a draft or scheduled post that ends after days; return it and its token.

    The token is returned once: nothing can show it again.
    """
    if days not in DAYS:
        raise PostError({"days": "Choose 1, 7 or 30 days."})
    now = database_now()  # first: it ends the transaction it reads in
    post = get_post(post_id)
    change = change_of(post.id) if post.status == "published" else None
    if post.status not in SHAREABLE and change is None:
        raise PostError({"form": "Only a draft, a scheduled post or a scheduled change needs a "
                                 "preview link: this post is " + post.status + "."})
    token = secrets.token_urlsafe(32)
    link = PreviewLink(post_id=post.id, token_hash=hash_token(token), created_by_id=user_id,
                       created_at=now, expires_at=now + timedelta(days=days),
                       revision_id=change.id if change is not None else None)
    db.session.add(link)
    db.session.flush()  # the audit row names the link's id
    audit.record("preview.create", audit.target("post", post.id, post.title),
                 {"link": link.id, "expires_at": link.expires_at})
    db.session.commit()
    return link, token


def revoke_link(post_id: int, link_id: int) -> None:
    """End one of a post's live links now, audited; an ended or unknown link is refused."""
    now = database_now()
    post = get_post(post_id)
    # conditional: of two editors revoking at once, one revokes and one is told it ended
    expires_at = db.session.scalar(
        sa.update(PreviewLink).where(PreviewLink.id == link_id, PreviewLink.post_id == post.id,
                                     *_live(now))
        .values(revoked_at=now).returning(PreviewLink.expires_at)
        .execution_options(synchronize_session=False))
    if expires_at is None:
        db.session.rollback()
        raise PostError({"form": "That preview link has already ended."})
    audit.record("preview.revoke", audit.target("post", post.id, post.title),
                 {"link": link_id, "expires_at": expires_at})
    db.session.commit()


def live_links(post_id: int) -> list[PreviewLink]:
    """Return a post's links that still work, the one ending first first.

    A listing for the editor's page, by this host's clock: the database's would end the
    page's transaction (database_now), and a link listed in its last second says so.
    """
    return list(db.session.scalars(sa.select(PreviewLink).where(
        PreviewLink.post_id == post_id, *_live(utcnow()))
        .order_by(PreviewLink.expires_at, PreviewLink.id)))


@dataclass(frozen=True)
class Preview:
    """What a live link opens: the post, and the scheduled change it shows, if it is one's.

    change_gone: the link was made for a change that has gone live or been cancelled since.
    """

    post: Post
    change: ScheduledChange | None
    change_gone: bool = False


def preview_for_token(token: str) -> Preview | None:
    """Return what a live link's token opens, or None (unknown, expired or revoked)."""
    if not token or len(token) > MAX_TOKEN:
        return None
    found = db.session.execute(
        sa.select(Post, PreviewLink.revision_id)
        .join(PreviewLink, PreviewLink.post_id == Post.id)
        .where(PreviewLink.token_hash == hash_token(token), *_live(database_now()))).first()
    if found is None:
        return None
    post, change_id = found
    if change_id is None:
        return Preview(post, None)
    change = db.session.get(ScheduledChange, change_id)
    return Preview(post, change, change_gone=change is None)


def _live(now: datetime) -> list:
    return [PreviewLink.revoked_at.is_(None), PreviewLink.expires_at > now]
