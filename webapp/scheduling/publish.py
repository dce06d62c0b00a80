"""The publish key's tick: publish due posts, unpublish expired ones (the writes are in posts)."""

from datetime import datetime

from .. import posts
from ..leadership.keys import PUBLISH
from .work import record_work


def tick(now: datetime, instance: str = "") -> datetime | None:
    """Do one unit of publish work at now; return when the next one is due."""
    published = posts.publish_due(now, posts.BATCH_SIZE, instance)
    unpublished = posts.unpublish_expired(now, posts.BATCH_SIZE, instance)
    if published or unpublished:
        record_work(PUBLISH.value, now, f"published {len(published)}, "
                                        f"unpublished {len(unpublished)}")
    if posts.BATCH_SIZE in (len(published), len(unpublished)):
        return now  # a backlog: come straight back for the next batch
    return posts.next_due()
