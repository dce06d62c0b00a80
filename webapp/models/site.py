"""Model the public site's settings and the version its pages validate against."""

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import Model
from .types import UTCDateTime


class SiteState(Model):
    """One row (id 1), written on the first change; absent, the environment's defaults hold."""

    __tablename__ = "site_state"

    ROW = 1

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str | None] = mapped_column(sa.String(100))  # None: SITE_NAME
    description: Mapped[str | None] = mapped_column(sa.String(300))  # None: SITE_DESCRIPTION
    timezone: Mapped[str | None] = mapped_column(sa.String(64))  # None: SITE_TIMEZONE
    language: Mapped[str | None] = mapped_column(sa.String(35))  # None: SITE_LANGUAGE
    # bumped with every change a reader could see: the index's and the feed's validator
    version: Mapped[int] = mapped_column(sa.BigInteger, default=0, server_default="0")
    changed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # bumped by the settings alone: a post page's validator is this and the post's version
    settings_version: Mapped[int] = mapped_column(sa.BigInteger, default=0, server_default="0")
    settings_changed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # "Require review": editors' posts need an admin's or another editor's approval too
    # (contributors' always do; webapp.posts.gate)
    require_review: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
