"""Review before publish: a writer submits a post, a reviewer approves it (with its time, or
now) or sends it back with a note.

Each step is one transaction: the post's row locked and its version moved on (an open
editor's panel follows), the review row, an audit row and an outbox event
(`post.submitted`, `post.approved`, `post.returned`, sent to the webhooks subscribed) all
commit together or not at all. Approving schedules or publishes through the same writes as
the Schedule and Publish now buttons (changes.change_post, lifecycle.publish_now), which
let a reviewer's approval through the gate (webapp.posts.gate) and write it with them.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import NoReturn

import sqlalchemy as sa

from ..db import database_now, wake_scheduler
from ..extensions import db
from ..leadership.keys import PLUGINS
from ..models import OutboxEvent, Post, PostReview, SiteState, User
from ..ops import audit
from . import gate
from .changes import change_post
from .edits import lock_post
from .errors import PostError, StalePost
from .lifecycle import publish_now
from .outbox import event_key

# the webhook events of review (webapp.plugins.endpoints offers them)
TOPICS = ("post.submitted", "post.approved", "post.returned")
LABELS = {"draft": "Draft", "in_review": "In review", "changes_requested": "Changes requested",
          "approved": "Approved"}
FILTERS = ("in_review", "changes_requested")  # the posts list's review tabs
MAX_NOTE = 2000
SUBMITTABLE = ("draft", "unpublished")


def review_of(post_id: int) -> PostReview | None:
    """Return the post's review row, if it was ever in review."""
    return db.session.get(PostReview, post_id)


def submit(post_id: int, version: int) -> PostReview:
    """Submit the post for review (its writer, or anyone who may write it); raise PostError."""
    now = database_now()
    post = _locked(post_id, version)
    gate.refuse_edit(post)
    row = _row(post_id)
    if row is not None and row.state == "in_review":
        return _refuse("It is in review already: a reviewer approves it or sends it back.")
    if post.status not in SUBMITTABLE:
        return _refuse(f"This post is {post.status}: only a draft or an unpublished post is "
                       "submitted for review.")
    user = gate.actor()
    if row is None:
        row = PostReview(post_id=post_id, author_id=user.id if user else None,
                         author=user.email[:254] if user else "")
        db.session.add(row)
    before = row.state or "draft"
    row.state, row.submitted_at, row.updated_at = "in_review", now, now
    _step(post, now, "post.submit", "post.submitted", [before, "in_review"], {})
    return row


def approve(post_id: int, version: int, publish_at: datetime | None, instance: str = "",
            override_freeze: bool = False) -> None:
    """Approve the post in review: schedule it for publish_at, or publish it now (None).

    Refused (nothing written) unless the post waits in review at version and the reviewer
    may approve it: an editor or admin, never its own writer while "Require review" holds
    for them (an admin approves anything). override_freeze: as publish_now's (an admin's).
    """
    def approval(post: Post, now: datetime) -> None:
        row = _row(post_id, lock=True)
        if row is None or row.state != "in_review":
            raise PostError({"form": "This post is not waiting for review (any more); "
                                     "nothing changed."})
        if post.version != version + 1:  # moved on once, by this approval
            raise StalePost(post)
        user = gate.actor()
        if user is not None and user.id == row.author_id and gate.needs_review(user):
            raise PostError({"form": "Another reviewer approves your own post; nothing "
                                     "changed."})
        row.state, row.reviewed_at, row.updated_at, row.note = "approved", now, now, ""
        row.reviewer_id, row.reviewer = (user.id, user.email[:254]) if user else (None, "")
        # audited by the write it rides on, as post.approve
        _event(post, now, "post.approved", {"publish_at": (publish_at or now).isoformat()})

    _refuse_unless_reviewer()
    try:
        if publish_at is None:
            publish_now(post_id, instance, override_freeze, approval=approval)
        else:
            change_post(post_id, version, None, {"publish_at": publish_at}, approval)
    except PostError:
        db.session.rollback()
        raise


def send_back(post_id: int, version: int, note: str) -> PostReview:
    """Return the post in review to its writer with a note saying what to change."""
    _refuse_unless_reviewer()
    note = note.replace("\r\n", "\n").strip()
    if not note:
        raise PostError({"note": "Say what to change: the writer reads this note."})
    if len(note) > MAX_NOTE:
        raise PostError({"note": f"Keep the note under {MAX_NOTE} characters "
                                 f"(it has {len(note)})."})
    now = database_now()
    post = _locked(post_id, version)
    row = _row(post_id, lock=True)
    if row is None or row.state != "in_review":
        return _refuse("This post is not waiting for review (any more); nothing changed.")
    user = gate.actor()
    row.state, row.note, row.reviewed_at, row.updated_at = "changes_requested", note, now, now
    row.reviewer_id, row.reviewer = (user.id, user.email[:254]) if user else (None, "")
    _step(post, now, "post.return", "post.returned", ["in_review", "changes_requested"],
          {"note": note})
    return row


def waiting(post_id: int) -> bool:
    """Return whether the post waits in review."""
    row = review_of(post_id)
    return row is not None and row.state == "in_review"


def awaiting(limit: int = 100) -> Sequence[sa.Row]:
    """Return the posts waiting for review (PostReview, Post), first submitted first."""
    return db.session.execute(
        sa.select(PostReview, Post).join(Post, Post.id == PostReview.post_id)
        .where(PostReview.state == "in_review")
        .order_by(PostReview.submitted_at, Post.id).limit(limit)).all()


def states(posts: list[Post]) -> dict[int, str]:
    """Return the review state of each of posts waiting in review or sent back."""
    ids = [post.id for post in posts if post.status in SUBMITTABLE]
    if not ids:
        return {}
    return dict(db.session.execute(sa.select(PostReview.post_id, PostReview.state)
                                   .where(PostReview.post_id.in_(ids),
                                          PostReview.state.in_(FILTERS))).all())


def counts() -> dict[str, int]:
    """Return how many posts are in each of the list's review filters (a post a reviewer
    put on the site themselves is out of them)."""
    found = dict(db.session.execute(
        sa.select(PostReview.state, sa.func.count()).join(Post, Post.id == PostReview.post_id)
        .where(PostReview.state.in_(FILTERS), Post.status.in_(SUBMITTABLE))
        .group_by(PostReview.state)).all())
    return {state: found.get(state, 0) for state in FILTERS}


def set_required(on: bool) -> None:
    """Turn the site's "Require review" on or off, audited; commit."""
    before = gate.review_required()
    audit.record("site.review", "site", audit.changes({"require_review": before},
                                                      {"require_review": on}))
    db.session.execute(sa.text(
        "INSERT INTO site_state (id, require_review, version, settings_version) "
        "VALUES (:row, :on, 0, 0) ON CONFLICT (id) DO UPDATE SET require_review = :on"),
        {"row": SiteState.ROW, "on": on})
    db.session.commit()


def may_publish(user: User) -> bool:
    """Return whether user's own Schedule and Publish now go through (the panel asks)."""
    return not gate.needs_review(user)


# -- steps -------------------------------------------------------------------------------

def _refuse_unless_reviewer() -> None:
    user = gate.actor()
    if user is not None and not user.can("editor"):
        raise gate.NeedsReview({"form": "Only an editor or an admin reviews posts."})


def _refuse(message: str) -> NoReturn:
    db.session.rollback()
    raise PostError({"form": message})


def _locked(post_id: int, version: int) -> Post:
    post = lock_post(post_id)
    if post.version != version:
        db.session.rollback()
        raise StalePost(post)
    return post


def _row(post_id: int, lock: bool = False) -> PostReview | None:
    return db.session.get(PostReview, post_id, with_for_update=lock, populate_existing=True)


def _step(post: Post, now: datetime, action: str, topic: str, change: list[str],
          extra: dict) -> None:
    """Move the post's version on, record the step and its event; commit."""
    post.version += 1
    post.updated_at = now
    audit.record(action, audit.target("post", post.id, post.title), {"review": change, **extra})
    _event(post, now, topic, extra)
    db.session.commit()


def _event(post: Post, now: datetime, topic: str, extra: dict) -> None:
    """Add the step's outbox event (the caller commits)."""
    user = gate.actor()
    db.session.add(OutboxEvent(
        topic=topic, post_id=post.id, created_at=now, dedupe_key=event_key(topic, post),
        payload={"post_id": post.id, "slug": post.slug, "title": post.title,
                 "version": post.version, "by": user.email if user else "",
                 "at": now.isoformat(), **extra}))
    wake_scheduler(PLUGINS.name)
