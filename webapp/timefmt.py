"""Format times one way: in the reader's zone, as hints and durations, and as ISO 8601."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flask import Flask, current_app, g
from flask_login import current_user
from markupsafe import Markup

UNSET = "—"  # what a page shows for a time that is not set


def iso(moment: datetime | None) -> str | None:
    """Return a moment as UTC ISO 8601 with a Z (2026-03-29T09:00:00Z), or None."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else None


def html_datetime(moment: datetime | None) -> str | None:
    """Return a moment for a <time datetime>: UTC ISO 8601 to the whole second, or None.

    HTML's date strings allow at most three digits of a second; stored times carry six.
    """
    return iso(moment.replace(microsecond=0)) if moment else None


def to_local(moment: datetime, zone: str | None) -> datetime:
    """Return an aware moment in zone (UTC when zone is unset or unknown, or out of range)."""
    return _in_zone(moment, zone)[0]


def _in_zone(moment: datetime, zone: str | None) -> tuple[datetime, bool]:
    """Return moment in zone and True, or in UTC and False when zone cannot show it."""
    try:
        return moment.astimezone(ZoneInfo(zone or "UTC")), True  # unset: UTC, as for a new user
    except (ZoneInfoNotFoundError, ValueError, OverflowError):
        # an unknown zone, or a row stored before times were range-checked (past year 9999 there)
        return moment.astimezone(UTC), False


def format_local(moment: datetime | None, zone: str | None, *, show_zone: bool = True) -> str:
    """Format a moment in zone: 2026-03-29 11:00 CEST ("" for None).

    Seconds show only when the moment has them, so a time typed to the minute reads back as
    typed. The abbreviation tells the two 02:30 of a night when clocks go back apart;
    show_zone=False leaves it out for text that names the zone itself, unless the moment
    could not be shown in that zone (then it says UTC).
    """
    if moment is None:
        return ""
    local, in_zone = _in_zone(moment, zone)
    precise = local.second or local.microsecond
    text = local.strftime("%Y-%m-%d %H:%M:%S" if precise else "%Y-%m-%d %H:%M")
    return f"{text} {local.tzname()}" if show_zone or not in_zone else text


def zone_label(zone: str | None) -> str:
    """Name a zone as people say it: "Paris time", "Los Angeles time", "UTC"."""
    if not zone or zone in ("UTC", "Etc/UTC", "Etc/GMT", "GMT"):
        return "UTC"
    if not _in_zone(datetime.now(UTC), zone)[1]:
        return f"{zone} (a zone unknown here)"
    return zone.rsplit("/", 1)[-1].replace("_", " ") + " time"


def human(moment: datetime | None, zone: str | None, now: datetime | None = None) -> str:
    """Format a moment as people write it, in zone: "Tue 1 Dec, 10:13 Paris time".

    The year shows when it is not this year's, seconds when the moment has them ("" for
    None), the zone's abbreviation in the hour the clocks go back, which happens twice
    ("Sun 25 Oct, 02:30 Paris time (CEST)"). The one way the app says a moment to a person,
    beside format_local's stamps.
    """
    if moment is None:
        return ""
    local_, in_zone = _in_zone(moment, zone)
    this_year = (now or datetime.now(UTC)).astimezone(local_.tzinfo).year
    day = f"{local_:%a} {local_.day} {local_:%b}" + (
        f" {local_.year}" if local_.year != this_year else "")
    clock_ = local_.strftime("%H:%M:%S" if local_.second else "%H:%M")
    twice = local_.replace(fold=1 - local_.fold).utcoffset() != local_.utcoffset()
    return f"{day}, {clock_} {zone_label(zone if in_zone else 'UTC')}" + (
        f" ({local_.tzname()})" if twice else "")


def reader_date(moment: datetime | None, zone: str | None = None) -> str:
    """Format a date for readers of the public site: "1 December 2026" ("" for None)."""
    if moment is None:
        return ""
    local_ = to_local(moment, zone or _site_zone())
    return f"{local_.day} {local_:%B %Y}"


def reader_stamp(moment: datetime, zone: str) -> str:
    """Return a moment for a feed: RFC 3339 at the site zone's offset
    (2026-12-03T00:04:00+01:00), so a reader that shows its date shows the site's day.

    Fractions of a second stay: the feed's updated moves forward at every change."""
    return to_local(moment, zone).isoformat()


def _site_zone() -> str:
    return current_app.config["SITE_TIMEZONE"]


def ago(moment: datetime | None, now: datetime) -> str:
    """Say how far a moment is from now: "in 12 min", "3 h ago", "now" ("" for None)."""
    if moment is None:
        return ""
    seconds = (moment - now).total_seconds()
    span = _span(abs(seconds))
    if span is None:
        return "now"
    return f"in {span}" if seconds > 0 else f"{span} ago"


def _span(seconds: float) -> str | None:
    # static/js/soloist.js words its live hints the same way
    whole = int(seconds)
    if whole < 1:
        return None
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min"
    hours, minutes = divmod(whole // 60, 60)
    if hours < 10 and minutes:
        return f"{hours} h {minutes} min"
    if hours < 48:
        return f"{hours} h"
    return f"{hours // 24} days"


def duration(seconds: float | None) -> str:
    """Show a duration short: 850 ms, 12.3 s, 4 min 5 s, 3 h 2 min, 2 d 4 h."""
    if seconds is None:
        return UNSET
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s"


def reader_zone() -> str:
    """Return the signed-in user's zone name ("" for anyone else, which shows UTC)."""
    return getattr(current_user, "timezone", None) or ""


def page_now() -> datetime:
    """Return the moment a page's hints count from."""
    # the database clock when the view read it (g.db_now), else this host's: reading the
    # database here would end the transaction and expire every row the template still shows
    return g.get("db_now") or datetime.now(UTC)


def local(moment: datetime | None, zone: str | None = None) -> str:
    """Format a moment in zone, the reader's by default ("—" for None): the |local filter."""
    return UNSET if moment is None else format_local(moment, zone or reader_zone())


def clock(moment: datetime | None) -> str:
    """Show the time of day of a moment in the reader's zone (14:00): the |clock filter."""
    return UNSET if moment is None else to_local(moment, reader_zone()).strftime("%H:%M")


def _ago(moment: datetime | None) -> str:
    return ago(moment, page_now())


def when(moment: datetime | None, zone: str | None = None) -> str:
    """Say a moment as people write it, in zone, the reader's by default ("—" for None):
    the |when filter."""
    return UNSET if moment is None else human(moment, zone or reader_zone(), page_now())


def time_tag(moment: datetime | None, relative: bool = True) -> Markup:
    """Return a <time> saying moment in the reader's zone ("Tue 1 Dec, 10:13 Paris time"),
    its exact stamp in UTC as its title, with a live "in 12 min" hint."""
    if moment is None:
        return Markup('<span class="muted">{}</span>').format(UNSET)
    stamp = iso(moment)
    tag = Markup('<time datetime="{}" title="{}">{}</time>').format(
        stamp, format_local(moment, "UTC"), when(moment))
    if relative:
        tag += Markup(' <small class="hint">(<time datetime="{}" data-relative>{}</time>)'
                      '</small>').format(stamp, ago(moment, page_now()))
    return tag


def init_app(app: Flask) -> None:
    """Register the time filters every template uses."""
    app.add_template_filter(local, "local")
    app.add_template_filter(clock, "clock")
    app.add_template_filter(_ago, "ago")
    app.add_template_filter(duration, "duration")
    app.add_template_filter(iso, "iso")
    app.add_template_filter(html_datetime, "html_datetime")
    app.add_template_filter(time_tag, "time_tag")
    app.add_template_filter(human, "human")
    app.add_template_filter(when, "when")
    app.add_template_filter(reader_date, "reader_date")
    app.add_template_filter(reader_stamp, "reader_stamp")
