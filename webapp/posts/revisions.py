"""A post's history: every version of its text kept, compared, restored, and pruned.

Each write of a post's title or body adds a revision holding the new text (`keep`), in
the write's own transaction, so the newest revision is the text the post has now and the
one before it is what the save replaced. A version the public site showed is marked live
(`mark_live`, when a post is published; a save of a published post is live at once), and
housekeeping keeps those and the last REVISIONS_KEEP of every post (`prune`).
"""

import difflib
import re
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from flask import current_app, g, has_request_context
from flask_login import current_user
from sqlalchemy.orm import load_only

from ..extensions import db
from ..models import Post, PostRevision
from .errors import PostError

HISTORY_PAGE = 50


def author_now() -> tuple[int | None, str]:
    """Return who is writing now: the API token's user, the signed-in user, or nobody."""
    if not has_request_context():
        return None, ""
    user = g.get("api_user") or (current_user if current_user.is_authenticated else None)
    return (user.id, user.email) if user is not None else (None, "")


def keep(post_id: int, title: str, body: str, reason: str, live: bool,
         author: tuple[int | None, str] | None = None, restored_from: int | None = None,
         at: datetime | None = None) -> None:
    """Add the revision of a post's new text to the current transaction (the caller commits)."""
    author_id, name = author if author is not None else author_now()
    db.session.add(PostRevision(post_id=post_id, title=title, body=body, author_id=author_id,
                                author=name[:254], reason=reason, was_live=live,
                                restored_from=restored_from, **({"created_at": at} if at else {})))


def mark_live(post_ids: list[int]) -> None:
    """Mark the current revision of each post as one readers saw (it was just published)."""
    if not post_ids:
        return
    newest = (sa.select(sa.func.max(PostRevision.id))
              .where(PostRevision.post_id.in_(post_ids)).group_by(PostRevision.post_id))
    db.session.execute(sa.update(PostRevision).where(PostRevision.id.in_(newest))
                       .values(was_live=True).execution_options(synchronize_session=False))


@dataclass(frozen=True)
class HistoryPage:
    """One page of a post's revisions, newest first, and the cursor of the next (older) one."""

    revisions: list[PostRevision]
    total: int
    older: int | None


def history(post_id: int, before: int | None = None, limit: int = HISTORY_PAGE) -> HistoryPage:
    """Return a page of post's revisions newest first (without their bodies), before an id."""
    query = (sa.select(PostRevision)
             .options(load_only(PostRevision.id, PostRevision.title, PostRevision.author,
                                PostRevision.reason, PostRevision.restored_from,
                                PostRevision.was_live, PostRevision.created_at,
                                PostRevision.post_id))
             .where(PostRevision.post_id == post_id).order_by(PostRevision.id.desc()))
    if before is not None:
        query = query.where(PostRevision.id < before)
    found = list(db.session.scalars(query.limit(limit + 1)))
    total = db.session.scalar(sa.select(sa.func.count()).select_from(PostRevision)
                              .where(PostRevision.post_id == post_id))
    older = found[limit - 1].id if len(found) > limit else None
    return HistoryPage(found[:limit], total or 0, older)


def current_revision_id(post_id: int) -> int | None:
    """Return the id of the revision holding the post's text now."""
    return db.session.scalar(sa.select(sa.func.max(PostRevision.id))
                             .where(PostRevision.post_id == post_id))


def get_revision(post_id: int, revision_id: int) -> PostRevision:
    """Return one revision of post_id, or raise PostError (a revision of another post: none)."""
    found = db.session.get(PostRevision, revision_id) if 0 < revision_id < 2**63 else None
    if found is None or found.post_id != post_id:
        raise PostError({"revision": "That version of this post does not exist (any more): "
                                     "housekeeping keeps the last ones and every published one."})
    return found


def prunable(keep_last: int | None = None) -> list:
    """Return the condition of revisions housekeeping may delete: never live, and older than

    their post's last keep_last (REVISIONS_KEEP). The newest is the post's text: always kept.
    """
    keep_last = keep_last or current_app.config["REVISIONS_KEEP"]
    newer = sa.orm.aliased(PostRevision)
    # the id of the keep_last-th newest revision of the same post: older ones may go
    cutoff = (sa.select(newer.id).where(newer.post_id == PostRevision.post_id)
              .order_by(newer.id.desc()).offset(keep_last - 1).limit(1).scalar_subquery())
    return [PostRevision.was_live.is_(False), PostRevision.id < cutoff]


# -- comparing two versions ---------------------------------------------------------------

@dataclass(frozen=True)
class DiffLine:
    """One line of a diff: kind is "same", "added" or "removed"; parts mark changed words."""

    kind: str
    parts: list[tuple[bool, str]]  # (changed, text)
    old_number: int | None
    new_number: int | None


# a word or a sign with the spaces after it: a space on its own would be the commonest
# token of a long line by far, and SequenceMatcher slows with how often its commonest
# tokens occur (a 5 kB paragraph took 1.6 s to compare; bench/posts_list.py)
WORDS = re.compile(r"\w+\s*|[^\w\s]\s*|\s+")
CONTEXT = 3


def _words(old: str, new: str) -> tuple[list, list]:
    """Split a replaced line pair into parts, marking the words each side changed."""
    a, b = WORDS.findall(old), WORDS.findall(new)
    old_parts, new_parts = [], []
    # autojunk (lines of 200 words or more only): the words in more than 1 % of places are
    # matched only beside others, which keeps a long paragraph's compare from being
    # quadratic in its commonest words (25 ms for 850 words, 1.6 ms with it); a long line
    # whose words all repeat (a list of 37 words, 24 times over) is marked almost whole
    matcher = difflib.SequenceMatcher(None, _keys(a), _keys(b))
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if i2 > i1:
            old_parts += _marked(op != "equal", "".join(a[i1:i2]))
        if j2 > j1:
            new_parts += _marked(op != "equal", "".join(b[j1:j2]))
    return _joined(old_parts), _joined(new_parts)


def _keys(tokens: list[str]) -> list[str]:
    """Return what tokens are compared by: the word, whatever spaces follow it."""
    return [token.rstrip() or token for token in tokens]


def _marked(changed: bool, text: str) -> list[tuple[bool, str]]:
    """Return the parts of a run of words: a changed run's trailing spaces are not marked."""
    words = text.rstrip()
    if not changed or not words or words == text:
        return [(changed, text)]
    return [(True, words), (False, text[len(words):])]


def _joined(parts: list[tuple[bool, str]]) -> list[tuple[bool, str]]:
    """Merge neighbouring parts that are both marked or both not."""
    merged: list[tuple[bool, str]] = []
    for changed, text in parts:
        if merged and merged[-1][0] == changed:
            merged[-1] = (changed, merged[-1][1] + text)
        else:
            merged.append((changed, text))
    return merged


def diff(old: str, new: str) -> list[list[DiffLine]]:
    """Compare two Markdown texts line by line: hunks of changed lines with CONTEXT around.

    A line replaced by one line is shown removed then added with its changed words marked,
    so a changed word reads as such, not as a whole new paragraph. [] when they are equal.
    """
    a, b = old.split("\n"), new.split("\n")
    hunks = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT):
        lines: list[DiffLine] = []
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                lines += [DiffLine("same", [(False, a[i])], i + 1, j1 + i - i1 + 1)
                          for i in range(i1, i2)]
                continue
            pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
            marked = [_words(a[i1 + k], b[j1 + k]) for k in range(pairs)]
            lines += [DiffLine("removed", marked[i - i1][0] if i - i1 < pairs else
                               [(False, a[i])], i + 1, None) for i in range(i1, i2)]
            lines += [DiffLine("added", marked[j - j1][1] if j - j1 < pairs else
                               [(False, b[j])], None, j + 1) for j in range(j1, j2)]
        hunks.append(lines)
    return hunks


def check_restore(post: Post, revision: PostRevision) -> None:
    """Refuse a restore of the text the post has now (a restore is an edit: edits.update_post)."""
    if (revision.title, revision.body) == (post.title, post.body):
        raise PostError({"revision": "The post already has this text: nothing to restore."})
