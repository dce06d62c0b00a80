"""Clock changes (daylight saving time) of a zone: when they happen and what they do.

zoneinfo does not list a zone's transitions, so they are found by comparing UTC offsets
a day apart and narrowing down to the second; no zone changes its clocks twice a day.
Wall times here are naive datetimes: what a clock on the wall in that zone reads.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

DAY = timedelta(days=1)
_SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class ClockChange:
    """One change of a zone's UTC offset, at an instant (aware UTC)."""

    zone: ZoneInfo
    at: datetime
    before: timedelta
    after: timedelta

    @property
    def shift(self) -> timedelta:
        """Return by how much the clocks move (negative when they go back)."""
        return self.after - self.before

    @property
    def forward(self) -> bool:
        return self.shift > timedelta(0)

    @property
    def wall_before(self) -> datetime:
        """Return the wall time the clocks read as they change (02:00 in spring in Paris)."""
        return (self.at + self.before).replace(tzinfo=None)

    @property
    def wall_after(self) -> datetime:
        """Return the wall time they read just after (03:00 in spring in Paris)."""
        return (self.at + self.after).replace(tzinfo=None)

    def skips(self, wall: datetime) -> bool:
        """Return whether the clocks skip this wall time (it does not exist)."""
        return self.forward and self.wall_before <= wall < self.wall_after

    def repeats(self, moment: datetime) -> bool:
        """Return whether the wall time of moment happens twice because of this change."""
        return not self.forward and self.at + self.shift <= moment < self.at - self.shift

    def names(self) -> tuple[str, str]:
        """Return the zone's abbreviations before and after (CET, CEST)."""
        return ((self.at - _SECOND).astimezone(self.zone).tzname() or "",
                self.at.astimezone(self.zone).tzname() or "")

    def headline(self) -> str:
        """Say the change: 'clocks go forward 1 h at 02:00 on Sun 29 Mar 2026 (CET → CEST)'."""
        way = "forward" if self.forward else "back"
        before, after = self.names()
        wall = self.wall_before
        return (f"clocks go {way} {span(abs(self.shift))} at {clock(wall)} on "
                f"{wall:%a} {wall.day} {wall:%b %Y} ({before} → {after})")


def span(delta: timedelta) -> str:
    """Say a shift of the clocks: 1 h, 30 min, 1 h 30 min."""
    hours, minutes = divmod(int(delta.total_seconds()) // 60, 60)
    return " ".join(part for part in (f"{hours} h" if hours else "",
                                      f"{minutes} min" if minutes else "") if part)


def clock(wall: datetime) -> str:
    """Show a wall time of day: 02:30 (with seconds only when it has them)."""
    return wall.strftime("%H:%M:%S" if wall.second else "%H:%M")


def utc_offset(moment: datetime, zone: ZoneInfo) -> timedelta:
    """Return the zone's offset from UTC at moment (a ZoneInfo always has one)."""
    return moment.astimezone(zone).utcoffset() or timedelta(0)


def _narrow(zone: ZoneInfo, low: datetime, high: datetime) -> ClockChange:
    """Return the change between low (old offset) and high (new offset), to the second."""
    before, after = utc_offset(low, zone), utc_offset(high, zone)
    low = low.replace(microsecond=0)
    while high - low > _SECOND:
        middle = low + (high - low) / 2
        middle = middle.replace(microsecond=0)
        if utc_offset(middle, zone) == before:
            low = middle
        else:
            high = middle
    return ClockChange(zone, high.replace(microsecond=0), before, after)


def changes_between(zone: ZoneInfo, start: datetime, end: datetime) -> list[ClockChange]:
    """Return the zone's clock changes after start and at or before end (aware moments)."""
    found: list[ClockChange] = []
    low, offset = start, utc_offset(start, zone)
    while low < end:
        high = min(low + DAY, end)
        next_offset = utc_offset(high, zone)
        if next_offset != offset:
            found.append(_narrow(zone, low, high))
        low, offset = high, next_offset
    return found


def post_warning(moment: datetime, zone_name: str, within: timedelta = DAY) -> str | None:
    """Warn about a clock change within a day of a post's publish time, or return None.

    A wall time typed in a repeated hour means its first occurrence (timezones.parse_local);
    one the clocks skip is refused before this is asked.
    """
    zone = ZoneInfo(zone_name)
    try:
        changes = changes_between(zone, moment - within, moment + within)
    except OverflowError:  # within a day of the calendar's ends: no zone changes there
        return None
    if not changes:
        return None
    change = min(changes, key=lambda c: abs(c.at - moment))
    words = change.headline()
    if change.repeats(moment):
        local = moment.astimezone(zone)
        return (f"{words[0].upper()}{words[1:]}: {clock(local.replace(tzinfo=None))} happens "
                f"twice; this post uses the first ({local.tzname()}, "
                f"{moment.astimezone(UTC):%H:%M} UTC). For the second, pick the zone UTC and "
                f"type {(moment - change.shift).astimezone(UTC):%Y-%m-%d %H:%M}.")
    side = "before" if moment < change.at else "after"
    return (f"{words[0].upper()}{words[1:]}, within a day of this time, which is {side} "
            f"the change ({moment.astimezone(zone).tzname()}).")
