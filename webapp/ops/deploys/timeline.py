"""The last hours of leadership, per key, as segments: who held it, and when nobody did.

Built from leader_events (acquired, and the ends of terms: released, lost, evicted,
ended), so it shows what the fleet recorded. A term's end may be written after its
successor began (a holder that learns late that it lost): the key had a leader all
along then, and no gap is drawn. The status page draws it with the deploys on top.
"""

import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa

from ...extensions import db
from ...leadership.keys import KEYS
from ...leadership.status import ENDS
from ...models import Deploy, LeaderEvent
from .record import recent_deploys

SPAN = timedelta(hours=24)
START_GRACE = timedelta(seconds=30)  # a key first led this soon after the fleet began: start-up
LABELS = 90  # the drawing is 1000 wide; the lanes' names take the left of it
SHADES = 6  # holders are told apart by one of this many colours (by instance)
UNSET = object()  # lane()'s first_seen when the caller did not read it
# the axis's steps, in seconds: 1, 2, 5, 10, 15, 30 min; 1, 2, 3, 6 h
THIN = 1.0  # drawing units (of 1000 across): thinner segments in a row are one busy stretch
MARK_GAP = 6.0  # drawing units between two failover marks; closer ones are counted, not drawn
TICK_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600)


@dataclass
class Segment:
    """A stretch of one key's history: held by holder in term, or (holder "") by nobody."""

    start: datetime
    end: datetime
    holder: str = ""
    term: int = 0
    known: bool = True  # False: before the first event ever recorded (no data, not a gap)
    changes: int = 0  # a busy stretch (Timeline.drawn): this many terms and gaps in it
    leaderless_s: float = 0.0  # a busy stretch: its time without a leader, in all

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass
class Timeline:
    """Segments per key name and the deploys between since and until."""

    since: datetime
    until: datetime
    lanes: dict[str, list[Segment]] = field(default_factory=dict)
    deploys: list[Deploy] = field(default_factory=list)
    # per lane: each takeover after a holder went without handing over (killed, cut off,
    # evicted, lost): (when, its kind, seconds without a leader)
    failovers: dict[str, list[tuple[datetime, str, float]]] = field(default_factory=dict)
    starts_at_first_data: bool = False  # since is when Soloist first ran, less than span ago
    drawings: dict[str, str] = field(default_factory=dict)  # its HTML, by the reader's zone

    def x(self, moment: datetime, wide: int = 1000) -> float:
        """Return where moment falls in a drawing wide units across (names on the left)."""
        span = (self.until - self.since).total_seconds() or 1.0
        share = (min(max(moment, self.since), self.until) - self.since).total_seconds() / span
        return round(LABELS + (wide - LABELS) * share, 1)

    def width(self, segment: "Segment", wide: int = 1000) -> float:
        """Return how wide segment is drawn: a gap of seconds still shows, as a thin mark."""
        drawn = self.x(segment.end, wide) - self.x(segment.start, wide)
        if not segment.known:
            return max(drawn, 0.0)  # no data is no news: never drawn wider than it was
        return max(drawn, 0.8 if segment.holder else 2.5)

    def drawn(self, segments: list["Segment"], wide: int = 1000) -> list["Segment"]:
        """Return segments in drawing order, the leaderless ones last, on top; a run of three
        or more each thinner than THIN units is one busy stretch: a flapping day is
        thousands of terms, too thin to see one by one and slow to draw."""
        merged: list[Segment] = []
        run: list[Segment] = []
        for segment in segments:  # oldest first
            if segment.known and self.x(segment.end, wide) - self.x(segment.start, wide) < THIN:
                run.append(segment)
                continue
            merged.extend(busy(run))
            run = []
            merged.append(segment)
        merged.extend(busy(run))
        return sorted(merged, key=lambda s: bool(s.holder or s.changes), reverse=True)

    def marks(self, name: str, wide: int = 1000) -> list[tuple[datetime, str, float, int]]:
        """Return a lane's failover marks at least MARK_GAP units apart: (when, how, seconds
        without a leader, how many more the mark stands for)."""
        shown: list[list] = []
        for at, how, gap in self.failovers.get(name, []):
            if shown and self.x(at, wide) - self.x(shown[-1][0], wide) < MARK_GAP:
                shown[-1][3] += 1
            else:
                shown.append([at, how, gap, 0])
        return [(at, how, gap, more) for at, how, gap, more in shown]

    def instances(self) -> list[str]:
        """Return the instances that held a key in this timeline, for the legend."""
        return sorted({instance_of(s.holder) for lane in self.lanes.values() for s in lane
                       if s.holder})

    def shade(self, holder: str) -> int:
        """Return the colour number of holder's instance: from its name, so an instance keeps
        its colour from one page load to the next whoever else came and went."""
        return shade_of(instance_of(holder))

    def instance_shade(self, instance: str) -> int:
        """Return the colour number of an instance, for the legend."""
        return shade_of(instance)

    def ticks(self, most: int = 8, wide: int = 1000) -> list[datetime]:
        """Return at most `most` round moments between since and until for the axis, spaced
        by a step that suits the span (minutes for a new install, hours for a day)."""
        span = (self.until - self.since).total_seconds()
        step = next((s for s in TICK_STEPS if span / s <= most), TICK_STEPS[-1])
        first = datetime.fromtimestamp((self.since.timestamp() // step + 1) * step,
                                       self.since.tzinfo)
        marks = []
        while first < self.until:
            if self.x(first, wide) < wide - 20:  # room for a label
                marks.append(first)
            first += timedelta(seconds=step)
        return marks

    @property
    def any_busy(self) -> bool:
        """Return whether the wide drawing has a busy stretch (for the legend)."""
        return any(s.changes for lane in self.lanes.values() for s in self.drawn(lane))

    @property
    def any_nodata(self) -> bool:
        """Return whether some lane shows time before its data began (for the legend): more
        than a start-up's moment."""
        return any(not s.known and s.seconds > START_GRACE.total_seconds()
                   for lane in self.lanes.values() for s in lane)


def busy(run: list[Segment]) -> list[Segment]:
    """Return run as it is (fewer than three), or as one busy stretch over it."""
    if len(run) < 3:
        return run
    nobody = sum(s.seconds for s in run if not s.holder)
    return [Segment(run[0].start, run[-1].end, run[-1].holder, run[-1].term,
                    changes=len(run), leaderless_s=nobody)]


def shade_of(instance: str) -> int:
    """Return the colour number of an instance, the same on every page."""
    return zlib.crc32(instance.encode()) % SHADES


def instance_of(holder: str) -> str:
    """Return the instance part of a holder's name (soloist-sched:web.1:4242 -> web.1)."""
    parts = holder.split(":")
    return ":".join(parts[1:-1]) if len(parts) >= 3 else holder


def build_timeline(now: datetime, span: timedelta = SPAN,
                   start_grace: timedelta = START_GRACE) -> Timeline:
    """Return leadership and deploys from span before now, or from the first data (the
    fleet's first event, or a deploy before it) when that is later: a new install's minutes
    fill the drawing.

    A key first taken within start_grace of the fleet's first event shows no data before
    it, not a leaderless sliver: the fleet was starting, not failing.
    """
    firsts = {key.value: first_event_at(key.value) for key in KEYS.values()}  # by index
    first = min((at for at in firsts.values() if at is not None), default=None)
    deploys = recent_deploys(now - span, now)
    data = min((at for at in (first, deploys[0].at if deploys else None) if at is not None),
               default=None)  # a release recorded before the fleet first ran is data too
    since = max(now - span, data) if data is not None and data < now else now - span
    lanes, failovers = {}, {}
    for key in KEYS.values():  # each key's events read once, for its lane and its failovers
        found = events_between(key.value, since, now)
        own = firsts[key.value]
        started = own if first and own and own - first <= start_grace else first
        lanes[key.name] = lane(key.value, since, now, started, found)
        failovers[key.name] = takeovers(found)
    return Timeline(since, now, lanes, deploys, failovers,
                    starts_at_first_data=since != now - span)


UNGRACEFUL = ("lost", "evicted", "ended")


Event = sa.Row[tuple[str, int, str, datetime]]  # kind, term, holder, at: all a lane reads


def events_between(key: int, since: datetime, until: datetime) -> list[Event]:
    """Return key's acquires and ends of terms between since and until, oldest first (rows,
    not models: a flapping day is thousands of them)."""
    return list(db.session.execute(
        sa.select(LeaderEvent.kind, LeaderEvent.term, LeaderEvent.holder, LeaderEvent.at)
        .where(LeaderEvent.key == key, LeaderEvent.at >= since, LeaderEvent.at <= until,
               LeaderEvent.kind.in_(("acquired", *ENDS)))
        .order_by(LeaderEvent.at, LeaderEvent.id)))


def takeovers(events: list[Event]) -> list[tuple[datetime, str, float]]:
    """Return each acquire (of events_between's) that followed an ungraceful end: when, how,
    how long the key was leaderless."""
    found, ended = [], None
    for event in events:
        if event.kind in ENDS and ended is None:
            ended = event
        elif event.kind == "acquired":
            if ended is not None and ended.kind in UNGRACEFUL:
                found.append((event.at, ended.kind,
                              max(0.0, (event.at - ended.at).total_seconds())))
            ended = None
    return found


def lane(key: int, since: datetime, until: datetime, first_seen=UNSET,
         events: list[Event] | None = None) -> list[Segment]:
    """Return key's segments between since and until (held, leaderless, and no data before
    first_seen, the fleet's first event); first_seen and events are read when not given."""
    before = db.session.scalar(
        sa.select(LeaderEvent).where(LeaderEvent.key == key, LeaderEvent.at < since,
                                     LeaderEvent.kind.in_(("acquired", *ENDS)))
        .order_by(LeaderEvent.at.desc(), LeaderEvent.id.desc()).limit(1))
    events = events_between(key, since, until) if events is None else events
    active: dict[int, tuple[str, datetime]] = {}
    if before is not None and before.kind == "acquired":
        active[before.term] = (before.holder, since)
    segments: list[Segment] = []
    nobody_since = None if active else since
    for event in events:
        if event.kind == "acquired":
            if nobody_since is not None and event.at > nobody_since:
                segments.append(Segment(nobody_since, event.at))
            nobody_since = None
            active[event.term] = (event.holder, event.at)
        elif event.term in active:
            holder, start = active.pop(event.term)
            segments.append(Segment(start, event.at, holder, event.term))
            if not active:
                nobody_since = event.at
    segments.extend(Segment(start, until, holder, term)
                    for term, (holder, start) in active.items())
    if nobody_since is not None and until > nobody_since:
        segments.append(Segment(nobody_since, until))
    return no_data_before(sorted(segments, key=lambda s: (s.start, s.end)),
                          first_event_at() if first_seen is UNSET else first_seen)


def changes_mark() -> tuple[int | None, int | None]:
    """Return the newest leadership event's and deploy's ids: a timeline built under another
    mark is out of date (two primary-key reads)."""
    return (db.session.scalar(sa.select(sa.func.max(LeaderEvent.id))),
            db.session.scalar(sa.select(sa.func.max(Deploy.id))))


def first_event_at(key: int | None = None) -> datetime | None:
    """Return when the fleet (or key) recorded its first leadership event (None: never)."""
    query = sa.select(sa.func.min(LeaderEvent.at))
    return db.session.scalar(query if key is None else query.where(LeaderEvent.key == key))


def no_data_before(segments: list[Segment], first: datetime | None) -> list[Segment]:
    """Mark the leaderless time before the fleet's first event as no data (Soloist did not
    run yet), splitting a gap that spans it: a new install is not a day-long outage."""
    marked = []
    for segment in segments:
        if segment.holder or (first is not None and segment.start >= first):
            marked.append(segment)
            continue
        cut = segment.end if first is None else min(segment.end, first)
        marked.append(Segment(segment.start, cut, known=False))
        if cut < segment.end:
            marked.append(Segment(cut, segment.end))
    return marked


def longest_gap(segments: list[Segment], start: datetime, end: datetime) -> float:
    """Return the longest time in [start, end] the segments show nobody leading."""
    longest = 0.0
    for segment in segments:
        if segment.holder or not segment.known:  # before the app first ran is no outage
            continue
        clipped = (min(segment.end, end) - max(segment.start, start)).total_seconds()
        longest = max(longest, clipped)
    return longest
