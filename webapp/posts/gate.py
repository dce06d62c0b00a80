"""Who may make a post go live, and who may write which post: review's gate, on every path.

Every write that takes a post towards the public site asks here first, whoever calls it
(the forms, the JSON API, the calendar's move, a scheduled change): a contributor never
makes a post go live, and with the site's "Require review" on an editor does not either;
their posts go out only by a reviewer's approval (webapp.posts.review), which passes the
gate itself. A contributor writes only their own posts, and only while none is live or
scheduled. Outside a request (the publish leader, a CLI command) nobody is asked: what they
publish was approved, or scheduled by someone who may.
"""

import sqlalchemy as sa
from flask import g, has_request_context
from flask_login import current_user

from ..extensions import db
from ..models import Post, PostReview, SiteState, User
from .errors import PostError

WRITABLE = ("draft", "unpublished")  # what a contributor may still change the text of


class NeedsReview(PostError):
    """A change that would take a post live, by someone whose posts need a reviewer."""


def actor() -> User | None:
    """Return who is writing now: the API token's user, the signed-in user, or nobody."""
    if not has_request_context():
        return None
    user = g.get("api_user") or (current_user if current_user.is_authenticated else None)
    return user if isinstance(user, User) else None


def review_required() -> bool:
    """Return whether the site's "Require review" is on (editors' posts need approval too)."""
    return bool(db.session.scalar(sa.select(SiteState.require_review)
                                  .where(SiteState.id == SiteState.ROW)))


def needs_review(user: User | None) -> bool:
    """Return whether user's own publishing waits for a reviewer.

    A contributor's always does; an editor's while "Require review" is on; an admin's never
    (nobody is above them); nobody's outside a request.
    """
    if user is None or user.can("admin"):
        return False
    return not user.can("editor") or review_required()


def refuse_going_live(post_id: int, field: str = "form") -> None:
    """Refuse (NeedsReview, nothing written) a change that takes the post towards the site
    when the writer needs review, or when the post waits in review for a reviewer's word."""
    user = actor()
    if needs_review(user):
        db.session.rollback()
        who = "A contributor's post" if user is not None and not user.can("editor") else \
            "With “Require review” on, a post"
        raise NeedsReview({field: f"{who} goes live only when a reviewer approves it: "
                                  "submit it for review instead; nothing changed."})
    if user is not None and _state(post_id) == "in_review":
        db.session.rollback()
        raise NeedsReview({field: "This post is waiting for review: approve it (with its "
                                  "time) or send it back with a note; nothing changed."})


def refuse_edit(post: Post) -> None:
    """Refuse (nothing written) a contributor's edit of another's post or of one live or
    scheduled; anyone else may edit (the caller holds the post's row lock)."""
    user = actor()
    if user is None or user.can("editor"):
        return
    owner = db.session.scalar(sa.select(PostReview.author_id)
                              .where(PostReview.post_id == post.id))
    if owner != user.id:
        db.session.rollback()
        raise NeedsReview({"form": "This post is not one of yours: a contributor edits only "
                                   "the posts they wrote; nothing changed."})
    if post.status not in WRITABLE:
        db.session.rollback()
        raise NeedsReview({"form": f"This post is {post.status}: only a reviewer changes it "
                                   "now; nothing changed."})


def note_writer(post: Post) -> None:
    """Record a new post's contributor as its writer (in the creating transaction)."""
    user = actor()
    if user is not None and not user.can("editor"):
        db.session.add(PostReview(post_id=post.id, state="draft", author_id=user.id,
                                  author=user.email[:254]))


def _state(post_id: int) -> str | None:
    return db.session.scalar(sa.select(PostReview.state).where(PostReview.post_id == post_id))
