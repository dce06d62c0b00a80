"""Nothing leaves before a replica has it: the gate an event's deliveries (and purges) pass.

A lossy failover takes the database back in time: commits that never reached the standby
are gone on the promoted server, and a publication there is done again. Its webhook keeps
its id (ids come from what happened), but a receiver that acted on the first send heard
of something the database no longer knows. So where the primary streams to a standby, an
event's side effects wait until a standby has replayed the event's commit.

Which position: an LSN read inside the writing transaction is before its commit record,
and the commit's own LSN is known only after it. The plugin leader's fan-out, though,
reads only events already committed (visible to its snapshot), whose commit records were
inserted before that snapshot was taken; pg_current_wal_insert_lsn() read after that
read (stamp) is at or past every one of them. One number per fan-out batch, stored on
the rows it writes, so a claim is one comparison with the standbys' replay position, read
once per statement (replayed). A standby reports its replay position when it flushes WAL
and again when it has replayed all it has and waits for more, so on a quiet primary the
gate opens within milliseconds, not at wal_receiver_status_interval.

A send also waits for its own bookkeeping (confirmed): its claim is on a standby before
the request leaves (else the claim is handed back and the send waits), and its outcome
after; an outcome the standby did not confirm is written again, by the same sender, until
it is (webapp.plugins.webhook_sends), so a lossy failover whose new primary still shows
the claim "sending" learns it was delivered from the process that sent it, not by
sending it again. What it does not cover: a sender whose process dies with the primary
(at-least-once, as for any crash).

The wait is bounded: an event older than DELIVER_AFTER_REPLICA_MAX_SECONDS is sent
whatever the standby says (a standby that stopped replaying must not stop the site's
webhooks); such a send can be one a lossy failover undoes. DELIVER_AFTER_REPLICA is
auto (wait while a physical standby streams: pg_stat_replication has a streaming row
that is no logical slot's), on (wait even with none streaming, up to the bound) or off.
SQLite has no standby: off. Logical walsenders (CDC) are not standbys and never count.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from flask import current_app
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql.expression import ColumnElement, FunctionElement

from ..db import is_postgres
from ..extensions import db

MODES = ("auto", "on", "off")
CONFIRM_SECONDS = 2.0  # how long a send waits for a standby to have its claim
FIRST_LOOK = 0.005  # s: replication on a LAN catches up in a millisecond or two
LAST_LOOK = 0.1  # s: the slowest a waiting tick looks again (10 statements a second)
NEVER = 2**63 - 1

# the physical standbys streaming from here; their positions as bytes from 0/0 (bigint)
_STANDBYS = ("FROM pg_stat_replication r WHERE r.state = 'streaming' AND NOT EXISTS "
             "(SELECT 1 FROM pg_replication_slots s WHERE s.active_pid = r.pid "
             "AND s.slot_type = 'logical')")
_LSN = "pg_wal_lsn_diff({}, '0/0')::bigint"


class replayed(FunctionElement):  # noqa: N801  (an SQL function's name, as sa.func's)
    """The furthest replay position of a streaming standby (bigint), NULL with none."""

    type = sa.BigInteger()
    inherit_cache = True
    name = "replayed"


@compiles(replayed)
def _replayed_pg(_element: replayed, _compiler: object, **_kw: object) -> str:
    return f"(SELECT max({_LSN.format('r.replay_lsn')}) {_STANDBYS})"


@compiles(replayed, "sqlite")
def _replayed_sqlite(_element: replayed, _compiler: object, **_kw: object) -> str:
    return "NULL"  # no standby streams from a file


def mode() -> str:
    """Return DELIVER_AFTER_REPLICA: auto, on or off (off on SQLite)."""
    if not is_postgres():
        return "off"
    return current_app.config["DELIVER_AFTER_REPLICA"]


def bound() -> timedelta:
    """Return how long after its event a delivery waits for a standby at most."""
    return timedelta(seconds=current_app.config["DELIVER_AFTER_REPLICA_MAX_SECONDS"])


def stamp() -> int | None:
    """Return the WAL position a standby must replay before events read so far may leave.

    Call it in the transaction that read the events, after reading them (see the module's
    docstring); None when nothing waits (off, SQLite, auto with no standby streaming).
    """
    gate = mode()
    if gate == "off":
        return None
    return db.session.scalar(sa.text(
        f"SELECT {_LSN.format('pg_current_wal_insert_lsn()')} "
        f"WHERE :on OR EXISTS (SELECT 1 {_STANDBYS})"), {"on": gate == "on"})


def confirmed(pause: Callable[[float], None] | None, timeout: float = CONFIRM_SECONDS) -> bool:
    """Return whether a standby has replayed everything committed here so far.

    For a send: its claim before the request leaves, its outcome after. True at once when
    nothing waits (off, SQLite, auto with no standby streaming). With pause (the
    scheduler's sleep, lent to its sender threads) it looks again, first after 1 ms, until
    timeout; without, it looks once.
    """
    target = stamp()
    db.session.rollback()
    if target is None:
        return True
    deadline, wait = time.monotonic() + timeout, 0.001
    while True:
        reached = db.session.scalar(sa.select(replayed()))
        db.session.rollback()
        if reached is not None and reached >= target:
            return True
        left = deadline - time.monotonic()
        if pause is None or left <= 0:
            return False
        pause(min(wait, left))
        wait = min(wait * 2, 0.05)


def held(lsn: QueryableAttribute[int | None]) -> ColumnElement[bool]:
    """A row stamped with lsn that no standby has replayed yet (the bound aside).

    The mode is a parameter read at each execution, so a statement built once (the plugin
    tick's look) follows the app it runs in.
    """
    gate = sa.bindparam("replica_gate", type_=sa.String, unique=True, callable_=mode)
    if_none = sa.case((gate == "on", -1), else_=NEVER)  # no standby: on waits, auto does not
    return sa.and_(gate != "off", lsn.is_not(None), lsn > sa.func.coalesce(replayed(), if_none))


def passes(lsn: QueryableAttribute[int | None], since: QueryableAttribute[datetime],
           now: datetime) -> ColumnElement[bool]:
    """A row that may leave at now: not held, or its event older than the bound."""
    return sa.or_(~held(lsn), since < now - bound())


def next_look(now: datetime, waiting_since: datetime) -> datetime:
    """Return when a tick with deliveries held since waiting_since looks again.

    Soon after the event (replication takes milliseconds), then less often the longer it
    waits, never more than LAST_LOOK apart: no spin, and the bound is met on time.
    """
    age = max((now - waiting_since).total_seconds(), 0.0)
    pause = timedelta(seconds=min(max(age / 20, FIRST_LOOK), LAST_LOOK))
    return min(now + pause, max(waiting_since + bound(), now))


@dataclass(frozen=True)
class Standby:
    """What the status page says about the gate."""

    mode: str
    standbys: int = 0  # walsenders to physical standbys (any state)
    streaming: int = 0  # of them, streaming and readable by this role
    lag_bytes: int | None = None  # WAL written here that no standby has replayed yet
    lag_seconds: float | None = None  # the standbys' own replay_lag (NULL when idle)

    @property
    def waits(self) -> bool:
        """Return whether deliveries wait for a standby now."""
        return self.mode == "on" or (self.mode == "auto" and self.streaming > 0)

    @property
    def hidden(self) -> bool:
        """Return whether standbys stream but this role may not read where (pg_monitor)."""
        return self.standbys > 0 and self.streaming == 0 and self.mode != "off"


def status() -> Standby:
    """Return the gate's mode, the standbys streaming from here and how far they are behind."""
    gate = mode()
    if not is_postgres():
        return Standby(gate)
    row = db.session.execute(sa.text(
        "SELECT count(*), count(*) FILTER (WHERE r.state = 'streaming'), "
        f"{_LSN.format('pg_current_wal_lsn()')} - max({_LSN.format('r.replay_lsn')}) "
        "FILTER (WHERE r.state = 'streaming'), "
        "extract(epoch FROM min(r.replay_lag) FILTER (WHERE r.state = 'streaming')) "
        "FROM pg_stat_replication r WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots s "
        "WHERE s.active_pid = r.pid AND s.slot_type = 'logical')")).one()
    db.session.rollback()
    lag = None if row[3] is None else float(row[3])
    return Standby(gate, row[0], row[1], None if row[2] is None else max(int(row[2]), 0), lag)
