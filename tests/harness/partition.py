"""The publish leader's host cut from the database by a silent partition, then healed.

Shared by tests/test_partition.py (15 s) and bench/faults.py (30 s). The leader runs in a
network namespace (tests/harness/netfault.py) and reaches PostgreSQL over a veth that a blackhole
qdisc cuts; a standby runs in the root namespace. `run_partition` records what a receiver,
an editor and ops would see; `PartitionRun` holds the numbers the tests assert.
"""

import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from functools import partial

from tests.harness.cluster import PUBLISH_KEY, pid_of, status_of, wait_for
from tests.harness.faultkit import FaultFleet, Outcome
from tests.harness.netfault import Netns, NetnsInstance
from tests.harness.pgserver import PgServer
from tests.harness.scenarios import HookReceiver, await_receipts, handover_after, two_ids

LOCK_ACTIVITY_SQL = """
SELECT application_name, extract(epoch FROM greatest(query_start, backend_start))::float8
FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'soloist:%'
"""


@dataclass
class PartitionRun:
    """What happened around one partition."""

    cut_at: float = 0.0
    healed_at: float = 0.0
    takeover: float | None = None  # s from the cut to a standby acquiring the publish key
    requests: list[tuple[str, int | None, float]] = field(default_factory=list)  # path, status, s
    sessions_gone: float | None = None  # s from the cut until the server had none of the host's
    lingering: list[tuple] = field(default_factory=list)  # the host's sessions at the end of it
    rejoined: dict[int, float] = field(default_factory=dict)  # candidate -> s after heal
    readyz_ok_while_stuck: list[tuple[int, float]] = field(default_factory=list)  # pid, s
    outcome: Outcome | None = None
    not_received: list[int] = field(default_factory=list)
    two_ids: dict[int, set[str]] = field(default_factory=dict)


def start_partition_fleet(pg: PgServer, netns: Netns, fleet: FaultFleet) -> NetnsInstance:
    """Start the instance in netns (it leads both keys), then a standby in the root one."""
    url = pg.url(fleet.dbname, scheme="postgres", host=netns.db_host)
    host = fleet.spawn(2, kind=partial(NetnsInstance, netns), DATABASE_URL=url)
    wait_for(lambda: all(host.owns(fleet.view.holder(k)) for k in (PUBLISH_KEY,)), 60,
             "the namespaced instance to lead", interval=0.05)
    fleet.spawn(2)
    fleet.wait_settled()
    return host


def _probe(url: str, headers: dict, timeout: float, into: list, lock: threading.Lock) -> None:
    started = time.monotonic()
    request = urllib.request.Request(url, headers={"Connection": "close", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError:
        status = None
    with lock:
        into.append((url.split("/", 3)[-1], status, time.monotonic() - started))


def run_partition(fleet: FaultFleet, netns: Netns, host: NetnsInstance, receiver: HookReceiver,
                  posts: int, spread: float, seconds: float, stale: float) -> PartitionRun:
    """Schedule posts due over spread s, cut host for seconds, heal, and reckon."""
    run = PartitionRun()
    first = fleet.last_event_id()
    ids = fleet.schedule("cut", posts, lead=1.0, spread=spread)
    before = {row[0] for row in fleet.sessions_of(host)}
    run.cut_at = netns.partition()
    lock, threads = threading.Lock(), []
    token = {"Authorization": f"Bearer {fleet.token}"}
    for path, headers in (("readyz", {}), ("", {}), ("api/posts", token), ("readyz", {})):
        thread = threading.Thread(target=_probe, daemon=True, args=(
            f"{host.url}/{path}", headers, stale + 30, run.requests, lock))
        thread.start()
        threads.append(thread)
    _watch_cut(fleet, host, run, first, before, seconds)
    run.healed_at = netns.heal()
    _watch_heal(fleet, host, run, stale)
    for thread in threads:
        thread.join(stale + 30)
    wait_for(lambda: fleet.published(ids) == len(ids), spread + 30, "every post published")
    run.outcome = fleet.outcome(ids)
    run.not_received = await_receipts(receiver, ids, 30)
    run.two_ids = two_ids(receiver, ids)
    return run


def _watch_cut(fleet: FaultFleet, host: NetnsInstance, run: PartitionRun, first: int,
               before: set[str], seconds: float) -> None:
    """While cut: when a standby took over, when the server dropped the host's sessions."""
    while time.time() < run.cut_at + seconds:
        if run.takeover is None:
            run.takeover = handover_after(fleet, first, host, run.cut_at)
        if run.sessions_gone is None:
            left = [row for row in fleet.sessions_of(host) if row[0] in before]
            if not left:
                run.sessions_gone = time.time() - run.cut_at
            run.lingering = left
        time.sleep(0.1)  # polling the outcome of a fault that lasts `seconds` by design


def _watch_heal(fleet: FaultFleet, host: NetnsInstance, run: PartitionRun, stale: float) -> None:
    """After heal: when the host's candidate had a lock session busy again (its siblings
    stand by on the host, with none); which /readyz said 200 while it had not come back."""
    run.rejoined = {}
    deadline = run.healed_at + 10
    while time.time() < deadline and not run.rejoined:
        for name, active in fleet.view.query(LOCK_ACTIVITY_SQL):
            if host.owns(name) and active >= run.healed_at:
                run.rejoined[pid_of(name)] = time.time() - run.healed_at
        status_of(host.url + "/readyz", 2)
        time.sleep(0.2)  # one /readyz and one look at pg_stat_activity every 0.2 s
    back_at = run.healed_at + min(run.rejoined.values(), default=float("inf"))
    for pid, stamp in readyz_answers(host, 200, run.cut_at):
        if stamp < back_at - 0.3:  # any worker: a standby answers for its candidate
            run.readyz_ok_while_stuck.append((pid, stamp - run.cut_at))


def readyz_answers(instance: NetnsInstance, status: int, since: float) -> list[tuple[int, float]]:
    """Return (worker pid, time) of each `GET /readyz` answered status since since, from the
    access log (its lines carry the time to the millisecond and the pid)."""
    found = []
    for line in instance.read_log().splitlines():
        if f'"GET /readyz HTTP/1.1" {status} ' not in line or "gunicorn.access" not in line:
            continue
        try:
            stamp = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
            stamp += int(line[20:23]) / 1000
            pid = int(line.split("] [", 1)[1].split("]", 1)[0])
        except (ValueError, IndexError):
            continue
        if stamp >= since:
            found.append((pid, stamp))
    return found
