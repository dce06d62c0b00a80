"""Why a change to a post was refused, field by field, for the form or the API to show."""

from datetime import datetime

from ..models import Freeze, Post
from ..ops.freezes import refusal
from ..refusals import Refused


class PostError(Refused):
    """A change to a post was refused; errors maps a form field (or "form") to why."""


class PostNotFound(PostError):
    """No post has that id (any more)."""

    def __init__(self) -> None:
        super().__init__({"form": "That post does not exist (any more)."})


class SlugTaken(PostError):
    """Another post has the slug: owner_id and owner_title name it, so a page can link it."""

    def __init__(self, owner_id: int | None, owner_title: str | None) -> None:
        who = f"“{owner_title}”" if owner_title else "Another post"
        super().__init__({"slug": f"{who} uses this slug already; pick another."})
        self.owner_id, self.owner_title = owner_id, owner_title


class StalePost(PostError):
    """Someone else changed the post after this form was opened."""

    def __init__(self, current: Post) -> None:
        super().__init__({"form": "Someone else changed this post after you opened it, so "
                                  "nothing was saved. Your text is kept below."})
        self.current = current


class StaleText(StalePost):
    """Someone else changed the text after this text was typed (a status change does not
    count: the text typed still applies to the text it was typed on)."""


class PublishTimeInPast(PostError):
    """The publish time has already passed; the editor may publish now instead."""

    def __init__(self, when: datetime, field: str = "publish_at",
                 instead: str | None = None) -> None:
        # instead: what the page or request it answers offers beside a later time
        instead = instead or ("publish now" if field == "publish_at" else "save the change now")
        super().__init__({field: f"That time has already passed. Pick a later time, or "
                                 f"{instead}."})
        self.when = when


class PublishingFrozen(PostError):
    """A publishing freeze holds the change (an admin may override it)."""

    def __init__(self, freeze: Freeze) -> None:
        super().__init__({"form": refusal(freeze)})
        self.freeze = freeze
