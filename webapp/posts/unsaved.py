"""A save ends the autosave it makes obsolete, in the save's own transaction."""

import sqlalchemy as sa

from ..extensions import db
from ..models import PostAutosave
from . import revisions


def _saver() -> sa.ColumnElement[bool] | None:
    author_id, _ = revisions.author_now()
    return None if author_id is None else PostAutosave.user_id == author_id


def forget(post_id: int) -> None:
    """Delete the saver's autosave of post_id in the current transaction (the caller commits)."""
    mine = _saver()
    if mine is not None:
        db.session.execute(sa.delete(PostAutosave).where(mine, PostAutosave.post_id == post_id))


def forget_new(title: str, body: str) -> None:
    """Delete the saver's New post autosave if it holds the text just saved as a new post: a
    post made elsewhere (the API, another tab) never takes what is being typed in New post."""
    mine = _saver()
    if mine is not None:
        db.session.execute(sa.delete(PostAutosave).where(
            mine, PostAutosave.post_id.is_(None), PostAutosave.body == body,
            sa.func.trim(PostAutosave.title) == title))
