"""A primary lost and its streaming replica promoted under a fleet on a multi-host URL.

Shared by tests/test_failover.py and bench/faults.py. `Failover.run` schedules posts, stops
the primary with -m immediate mid-run (optionally after SIGSTOPping its walsenders so the
last commits never reach the replica: a lossy failover), promotes the replica `gap` s
later, and says how long the keys went unled and what a webhook receiver got.
"""

import collections
import json
import time
from dataclasses import dataclass, field

from tests.harness.cluster import wait_for
from tests.harness.faultkit import FaultFleet, Outcome
from tests.harness.pgserver import PgServer
from tests.harness.scenarios import (
    HookReceiver,
    await_receipts,
    keys_led_by_workers,
    sent_again,
    two_ids,
)

CAUGHT_UP_SQL = "SELECT pg_current_wal_lsn() <= %s::pg_lsn"


@dataclass
class FailoverRun:
    """What one failover did."""

    lossy: bool
    published_before: int = 0  # posts published on the old primary before it stopped
    lost_window: float = 0.0  # s the walsenders were stopped before the hard stop
    led_after_promote: float | None = None  # s from the promotion until both keys were led
    outcome: Outcome | None = None
    not_received: list[int] = field(default_factory=list)
    two_ids: dict[int, set[str]] = field(default_factory=dict)
    receipts: int = 0
    sent_again: int = 0  # posts received more than once under one id (redone, or retried)
    twice: list[str] = field(default_factory=list)  # delivery and event ids received twice


def caught_up(primary: PgServer, replica: PgServer) -> bool:
    """Return whether replica has replayed everything primary has written."""
    import psycopg

    with psycopg.connect(replica.url(), autocommit=True, connect_timeout=3) as conn:
        replayed = conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()[0]
    with psycopg.connect(primary.url(), autocommit=True, connect_timeout=3) as conn:
        return bool(replayed) and conn.execute(CAUGHT_UP_SQL, (replayed,)).fetchone()[0]


def run_failover(fleet: FaultFleet, receiver: HookReceiver, primary: PgServer,
                 replica: PgServer, posts: int, spread: float, lossy: bool = False,
                 gap: float = 2.0, loss: float = 1.2, led_within: float = 10.0,
                 prefix: str = "") -> FailoverRun:
    """Schedule posts over spread s; a third of the way in, lose primary; promote replica
    gap s later; wait for both keys led (up to led_within s), the posts and the receipts."""
    run = FailoverRun(lossy=lossy)
    before = receiver.calls
    wait_for(lambda: caught_up(primary, replica), 30, "the replica to catch up")
    ids = fleet.schedule(prefix or ("lossy" if lossy else "failover"), posts, lead=2.0,
                         spread=spread)
    third = max(posts // 3, 1)
    wait_for(lambda: fleet.published(ids) >= third, spread + 10, f"{third} posts published",
             interval=0.05)
    if lossy:
        paused = time.time()
        primary.pause_walsenders()
        time.sleep(loss)  # commits made now reach no replica: the window the failover loses
        run.lost_window = time.time() - paused
    run.published_before = fleet.published(ids)
    primary.stop(mode="immediate")
    time.sleep(gap)  # the time an operator (or a failover manager) takes to promote
    promoted = replica.promote()
    try:
        wait_for(lambda: fleet.view.quiet(keys_led_by_workers, fleet), led_within + 20,
                 "both keys to be led again", interval=0.05)
        run.led_after_promote = time.time() - promoted
    except AssertionError:
        run.led_after_promote = None
    wait_for(lambda: fleet.view.quiet(fleet.published, ids) == len(ids), spread + 30,
             "every post to be published on the new primary", interval=0.2)
    run.outcome = fleet.outcome(ids)
    run.not_received = await_receipts(receiver, ids, 30)
    run.two_ids = two_ids(receiver, ids)
    run.sent_again = sent_again(receiver, ids)
    run.twice = received_twice(receiver, since=before)
    run.receipts = len(receiver.received())
    return run


def received_twice(receiver: HookReceiver, since: int = 0) -> list[str]:
    """Return every delivery id (webhook-id) and event id (the body's) receiver got twice
    in its requests from the since-th on."""
    seen: collections.Counter = collections.Counter()
    for request in receiver.received()[since:]:
        headers = {k.lower(): v for k, v in request.headers.items()}
        seen[f"delivery {headers.get('webhook-id')}"] += 1
        seen[f"event {json.loads(request.body).get('event_id')}"] += 1
    return sorted(name for name, n in seen.items() if n > 1)


def app_sessions_after(server: PgServer, dbname: str, accepting: float,
                       after: float = 10.0) -> list[tuple[str, str]]:
    """Wait until after s past accepting; return the app's sessions on server then (three
    looks over a second, all of them: a connection that checks and leaves is fine)."""
    wait_for(lambda: time.time() >= accepting + after, after + 5, f"{after:g} s to pass")
    looks = []
    for _ in range(3):
        looks.append(server.app_sessions(dbname))
        time.sleep(0.5)  # three looks over a second
    return looks[-1] if all(looks) else []
