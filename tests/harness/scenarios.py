"""The moves of the fault scenarios, shared by tests/test_faults.py and bench/faults.py.

Freeze a host as soon as its leader is publishing a burst, hold a chosen worker with a slow
upload or aim any API request at it, the pages of a web load, and what to look at
afterwards: who leads, when a standby took over, which workers answered /readyz.
"""

import collections
import contextlib
import math
import os
import signal
import time
from collections.abc import Callable
from typing import TypeVar

from tests.harness.cluster import PUBLISH_KEY, pid_of, status_of, wait_for
from tests.harness.faultkit import KEYS, FaultFleet, GroupInstance, served_pids
from tests.harness.receiver import Receiver
from tests.harness.traffic import ApiRequest, SlowUpload, serving_pid

Aimable = TypeVar("Aimable", SlowUpload, ApiRequest)

# rows of the burst locked by a transaction in progress (pgrowlocks reads the row headers
# and takes no row lock itself), or some of them published already
BURST_STARTED_SQL = """
SELECT EXISTS (SELECT 1 FROM pgrowlocks('posts') r JOIN posts p ON p.ctid = r.locked_row
               WHERE p.id = ANY(%(ids)s))
    OR EXISTS (SELECT 1 FROM posts WHERE id = ANY(%(ids)s) AND status = 'published')
"""

# Open transactions, but not a standby waiting in the lock queue for a key (no work in hand)
OPEN_TRANSACTIONS_SQL = """
SELECT application_name, state, left(query, 60) FROM pg_stat_activity
WHERE datname = current_database() AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
  AND wait_event IS DISTINCT FROM 'advisory'
"""


def p99(values: list[float]) -> float:
    """Return the nearest-rank 99th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)] if ordered else math.nan


def freeze_when_burst_starts(fleet: FaultFleet, host: GroupInstance, ids: list[int]) -> dict:
    """SIGSTOP host's whole process group as soon as its leader is publishing the burst.

    Return when it froze, how many posts were published by then and the transactions the
    host had open (its leader's, holding the burst's row locks, if the timing caught it).
    """
    fleet.view.query("CREATE EXTENSION IF NOT EXISTS pgrowlocks")
    wait_for(lambda: fleet.view.query(BURST_STARTED_SQL, {"ids": ids})[0][0], 30,
             "the publish leader to start on the burst", interval=0.001)
    frozen_at = host.group_signal(signal.SIGSTOP)
    return {"at": frozen_at, "published": fleet.published(ids),
            "open": open_transactions(fleet, host)}


def open_transactions(fleet: FaultFleet, host: GroupInstance) -> list[tuple]:
    """Return (application_name, state, query) of host's connections inside a transaction."""
    return [row for row in fleet.view.query(OPEN_TRANSACTIONS_SQL)
            if fleet.instance_of(row[0]) is host]


def process_states(host: GroupInstance) -> list[str]:
    """Return the state letter (T = stopped) of every process of host's group."""
    states = []
    for pid in host.alive():
        try:
            with open(f"/proc/{pid}/stat") as stat:
                states.append(stat.read().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:
            continue
    return states


def _aimed(instance: GroupInstance, pid: int, open_one: Callable[[], Aimable],
           what: str) -> Aimable:
    """Open a connection with open_one() that worker pid accepts.

    The workers of an instance share its listening socket, and whichever is first to call
    accept() takes each connection: not a coin toss, a busy leader loses to an idle sibling
    (16 tries in a row went to the sibling on a loaded machine). The siblings are stopped
    (SIGSTOP, well under LEADER_STALE_SECONDS) until pid has the connection.
    """
    siblings = [p for p in instance.worker_pids() if p != pid]
    for sibling in siblings:
        os.kill(sibling, signal.SIGSTOP)
    try:
        opened = open_one()
        try:
            wait_for(lambda: serving_pid([pid], instance.port, opened.local_port) == pid, 5,
                     f"worker {pid} to accept the {what}", interval=0.01)
        except BaseException:
            opened.close()
            raise
        return opened
    finally:
        for sibling in siblings:
            with contextlib.suppress(ProcessLookupError):
                os.kill(sibling, signal.SIGCONT)


def upload_to(fleet: FaultFleet, instance: GroupInstance, pid: int,
              seconds: float) -> SlowUpload:
    """Open slow uploads to instance until worker pid serves one; abandon the others."""
    return _aimed(instance, pid, lambda: SlowUpload(instance.port, fleet.token, seconds).start(),
                  "slow upload")


def request_to(fleet: FaultFleet, instance: GroupInstance, pid: int, method: str, path: str,
               body: object = None) -> ApiRequest:
    """Send an API request (as the fleet's admin) that worker pid of instance serves."""
    return _aimed(instance, pid, lambda: ApiRequest(instance.port, fleet.token, method, path,
                                                    body).connect(), f"{method} {path}").send()


def load_paths(fleet: FaultFleet, published: int = 20) -> list[tuple[str, dict]]:
    """Mixed pages for a web load: the public site and the JSON API with a token."""
    fleet.add_published(f"page{time.monotonic_ns()}", published)
    slugs = [r[0] for r in fleet.view.query(
        "SELECT slug FROM posts WHERE status = 'published' ORDER BY id DESC LIMIT %s",
        (published,))]
    token = {"Authorization": f"Bearer {fleet.token}"}
    return ([("/", {}), ("/feed.xml", {}), ("/sitemap.xml", {}), ("/api/leaders", token),
             ("/api/posts", token)] + [(f"/posts/{slug}", {}) for slug in slugs])


def keys_led_by_workers(fleet: FaultFleet) -> bool:
    """Both keys held, each by a live worker of the fleet."""
    holders = fleet.view.holders()
    workers = fleet.worker_pids()
    return all(k in holders and pid_of(holders[k]) in workers for k in KEYS)


def readyz_on_every_worker(fleet: FaultFleet, since: float) -> bool:
    """GET /readyz once per instance; true once every worker has answered 200 since since."""
    for inst in fleet.instances:
        status_of(inst.url + "/readyz")
    return all(set(inst.worker_pids()) <= served_pids(inst, "/readyz", 200, since)
               for inst in fleet.instances)


def handover_after(fleet: FaultFleet, first: int, leaving: GroupInstance,
                   sent: float) -> float | None:
    """Seconds from sent to the first 'acquired' of the publish key by another instance
    (leadership events after event id first), or None while there is none."""
    for kind, key, _term, holder, at, _detail in fleet.events_since(first):
        if kind == "acquired" and key == PUBLISH_KEY and not leaving.owns(holder):
            return at - sent
    return None


# --- what a webhook receiver sees ----------------------------------------------------------

class HookReceiver(Receiver):
    """tests/harness/receiver.Receiver at /hook on an address of choice (127.0.0.1 by default)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host, path="/hook")


def subscribe(fleet: FaultFleet, receiver: HookReceiver) -> None:
    """Subscribe receiver to post.published through the admin API."""
    status, body = fleet.api("POST", "/api/webhooks", {
        "url": receiver.url, "events": ["post.published"], "secret": "fault-receiver-secret-0123"})
    assert status == 201, f"could not subscribe the receiver: {status} {body}"


def await_receipts(receiver: HookReceiver, ids: list[int], timeout: float) -> list[int]:
    """Wait up to timeout s for every post of ids to reach receiver; return those that did
    not."""
    def missing() -> list[int]:
        got = receiver.ids_by_post()
        return [i for i in ids if i not in got]

    with contextlib.suppress(AssertionError):
        wait_for(lambda: not missing(), timeout, "every post at the receiver", interval=0.2)
    return missing()


def sent_again(receiver: HookReceiver, ids: list[int]) -> int:
    """Return how many posts of ids reached receiver more than once under one webhook-id
    (a publication a lossy failover undid and the new primary redid, or a retry)."""
    counts = collections.Counter(
        (request.post_id(), {k.lower(): v for k, v in request.headers.items()}.get("webhook-id"))
        for request in receiver.received())
    return len({post for (post, _id), n in counts.items() if n > 1 and post in ids})


def two_ids(receiver: HookReceiver, ids: list[int]) -> dict[int, set[str]]:
    """Return the posts of ids that reached receiver under more than one webhook-id."""
    return {i: found for i, found in receiver.ids_by_post().items()
            if i in ids and len(found) > 1}
