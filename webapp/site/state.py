"""The public site's name, description, zone and language, and the version its pages
validate against.

Public pages answer conditional requests (ETag, Last-Modified) from one row read before
anything is rendered. So every change a reader could see bumps that row in the same
transaction as the change itself: a post published or unpublished (by an editor or the
publish leader), a published post's text edited, the settings saved (`bump`, called by
webapp.posts; `save_settings` here). Another instance's reader validates against the new
version the moment the change commits, and never against one whose change rolled back.

The row is written on the first change (an upsert: a fresh database has none); until an
admin saves settings, SITE_NAME, SITE_DESCRIPTION, SITE_TIMEZONE and SITE_LANGUAGE from
the environment hold.
"""

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from flask import current_app

from ..config import LANGUAGE_TAG
from ..db import database_now, wake_scheduler
from ..extensions import db
from ..models import OutboxEvent, SiteState, UTCDateTime
from ..ops import audit
from ..refusals import Refused
from ..timezones import is_zone
from .xmltext import unsafe_character

MAX_NAME = 100
MAX_DESCRIPTION = 300

# changed_at never goes back, whichever of two racing writers commits last
_LATER = ("CASE WHEN site_state.{0} > excluded.{0} THEN site_state.{0} "
          "ELSE excluded.{0} END")
BUMP_SQL = sa.text(
    "INSERT INTO site_state (id, version, changed_at, settings_version) "
    "VALUES (:row, 1, :now, 0) ON CONFLICT (id) DO UPDATE SET "
    f"version = site_state.version + 1, changed_at = {_LATER.format('changed_at')}"
).bindparams(sa.bindparam("now", type_=UTCDateTime))
SAVE_SQL = sa.text(
    "INSERT INTO site_state (id, name, description, timezone, language, version, changed_at, "
    "settings_version, settings_changed_at) "
    "VALUES (:row, :name, :description, :timezone, :language, 1, :now, 1, :now) "
    "ON CONFLICT (id) DO UPDATE SET name = excluded.name, description = excluded.description, "
    "timezone = excluded.timezone, language = excluded.language, "
    f"version = site_state.version + 1, changed_at = {_LATER.format('changed_at')}, "
    "settings_version = site_state.settings_version + 1, "
    f"settings_changed_at = {_LATER.format('settings_changed_at')}"
).bindparams(sa.bindparam("now", type_=UTCDateTime))


class SiteSettingsError(Refused):
    """Settings that cannot be saved: errors names each bad field."""


@dataclass(frozen=True)
class SiteInfo:
    """What a public page shows of the site and validates against."""

    name: str
    description: str
    version: int = 0
    changed_at: datetime | None = None
    settings_version: int = 0
    settings_changed_at: datetime | None = None
    custom_name: str | None = None  # as saved (None: the environment's default)
    custom_description: str | None = None
    timezone: str = "UTC"  # the zone readers' dates are in
    language: str = "en"  # what <html lang> and the feed declare
    custom_timezone: str | None = None
    custom_language: str | None = None

    @property
    def summary(self) -> str:
        """Return what search engines and link previews get: the description, never empty."""
        return self.description or fallback_summary(self.name)


def fallback_summary(name: str) -> str:
    """Return what a site without a description says of itself (true of every site)."""
    return f"The latest posts from {name}."


def columns() -> list:
    """Return the row's columns, for a query that reads them beside something else."""
    return [SiteState.name, SiteState.description, SiteState.version, SiteState.changed_at,
            SiteState.settings_version, SiteState.settings_changed_at,
            SiteState.timezone.label("site_timezone"), SiteState.language.label("site_language")]


CURRENT = sa.select(*columns()).where(SiteState.id == SiteState.ROW)  # built once


def info(row: sa.Row | None) -> SiteInfo:
    """Return the site as a page shows it from columns() read (None: no row yet)."""
    config = current_app.config
    if row is None or row.version is None:
        return SiteInfo(config["SITE_NAME"], config["SITE_DESCRIPTION"],
                        timezone=config["SITE_TIMEZONE"], language=config["SITE_LANGUAGE"])
    return SiteInfo(row.name or config["SITE_NAME"],
                    config["SITE_DESCRIPTION"] if row.description is None else row.description,
                    row.version, row.changed_at, row.settings_version,
                    row.settings_changed_at, row.name, row.description,
                    row.site_timezone or config["SITE_TIMEZONE"],
                    row.site_language or config["SITE_LANGUAGE"],
                    row.site_timezone, row.site_language)


def current(conn: sa.Connection | None = None) -> SiteInfo:
    """Read the site's settings and version (one primary-key read), on conn if given."""
    return info((conn or db.session.connection()).execute(CURRENT).one_or_none())


def bump(now: datetime) -> None:
    """Add "public pages changed at now" to the current transaction (the caller commits)."""
    db.session.execute(BUMP_SQL, {"row": SiteState.ROW, "now": now})


def check_settings(name: str, description: str, timezone: str = "",
                   language: str = "") -> dict[str, str | None]:
    """Return the settings cleaned, blank as None (the default), or raise naming each field."""
    fields = {"name": " ".join(name.split()), "description": " ".join(description.split()),
              "timezone": timezone.strip(), "language": language.strip()}
    errors = {}
    for field, limit in (("name", MAX_NAME), ("description", MAX_DESCRIPTION)):
        if len(fields[field]) > limit:
            errors[field] = f"Keep it to {limit} characters (it has {len(fields[field])})."
        elif found := unsafe_character(fields[field]):
            errors[field] = f"Remove the control character {found}: the feed cannot hold it."
    if fields["timezone"] and not is_zone(fields["timezone"]):
        errors["timezone"] = (f"“{fields['timezone'][:64]}” is not a time zone this server "
                              "knows; pick one from the list, such as Europe/Paris.")
    if fields["language"] and not LANGUAGE_TAG.fullmatch(fields["language"]):
        errors["language"] = (f"“{fields['language'][:35]}” is not a language tag; use one "
                              "such as en, fr or pt-BR.")
    if errors:
        raise SiteSettingsError(errors)
    return {field: value or None for field, value in fields.items()}


def save_settings(name: str, description: str, timezone: str = "",
                  language: str = "") -> SiteInfo:
    """Save the site's name, description, zone and language (blank: the default), audited;
    commit. Every public page validates against the change at once and caches purge it."""
    new = check_settings(name, description, timezone, language)
    before = current()
    now = database_now()
    audit.record("site.settings", "site", audit.changes(
        {"name": before.custom_name, "description": before.custom_description,
         "timezone": before.custom_timezone, "language": before.custom_language}, new))
    write_settings(new, now)
    db.session.commit()
    return current()


def write_settings(new: dict[str, str | None], now: datetime, writer: str = "",
                   release: int | None = None) -> None:
    """Add the settings new (name, description, timezone, language; checked: check_settings)
    and their outbox row to the current transaction (the caller commits); release names the
    release that carries them."""
    db.session.execute(SAVE_SQL, {"row": SiteState.ROW, "now": now, **new})
    # every public page shows the name (and its dates, its lang): the caches purge their
    # "site" key, from the outbox like any change readers see, in this transaction
    # (webapp.plugins.purges)
    payload: dict = dict(new)
    if release is not None:
        payload["release_id"] = release
    db.session.add(OutboxEvent(topic="site.settings", created_at=now, instance=writer,
                               payload=payload, dedupe_key=f"site.settings:{now.isoformat()}"))
    wake_scheduler("plugins")
