"""A randomised chaos run: a fleet hurt every ~2 s while posts fall due, then the reckoning.

Shared by tests/test_chaos.py (short) and bench/faults.py (90 s). The fleet runs on a
throwaway PostgreSQL server (tests/harness/pgserver.py); a local webhook receiver is subscribed to
post.published through the admin API and answers HTTP 500 now and then. Faults, picked at
random (half of them aimed at a leader): SIGKILL a worker, SIGKILL an instance's whole
process group, SIGTERM an instance, SIGSTOP a group for a few seconds then SIGCONT,
pg_terminate_backend every session of the database, and once, a database restart. An
instance that was killed or terminated is replaced at once by a new one.

Live posts carry scheduled changes falling due during the run too, and releases of drafts
fall due every RELEASE_EVERY s. Afterwards every post
must be published exactly once (one post.published outbox row), every change swapped in
exactly once (one post.updated row, nothing left pending, never before its time), every
release applied once and whole (one release.published row, every post of it published in
its transaction with one post.published row, never before its time),
never before its publish_at (database clock), received by the receiver under a single
delivery id, and no process of the fleet may be left running.
"""

import contextlib
import os
import random
import signal
import time
from dataclasses import dataclass, field

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, pid_of, wait_for
from tests.harness.faultkit import FaultFleet, GroupInstance, Outcome
from tests.harness.pgserver import PgServer
from tests.harness.traffic import WebhookReceiver

SECRET = "chaos-receiver-secret-0123456789"
POSTS_PER_SECOND = 4
CHANGES_PER_SECOND = 1  # live posts whose scheduled change falls due during the run
RELEASE_EVERY = 5.0  # seconds between releases falling due during the run
RELEASE_POSTS = 20  # drafts each release publishes
FLEET_ENV = {"WEBHOOK_ALLOW_PRIVATE": "true", "RETRY_SECONDS": "1",
             "WEBHOOK_TIMEOUT_SECONDS": "2"}
WEIGHTS = {"kill_worker": 3, "kill_instance": 2, "term_instance": 2, "stop_group": 2,
           "cut_sessions": 1}

STUCK_SQL = """
SELECT o.post_id, coalesce(w.status, 'no delivery row'), w.attempts, w.last_error,
       coalesce(h.status, 'no hook row'), h.last_error
FROM outbox_events o
LEFT JOIN webhook_deliveries w ON w.event_id = o.id
LEFT JOIN hook_deliveries h ON h.event_id = o.id AND h.plugin = 'webhooks'
WHERE o.topic = 'post.published' AND o.post_id = ANY(%s) ORDER BY o.post_id
"""


def chaos_seed() -> int:
    """Return $SOLOIST_CHAOS_SEED, else a fresh random seed (printed by the callers)."""
    return int(os.environ.get("SOLOIST_CHAOS_SEED") or random.randrange(1 << 30))


@dataclass
class ChaosReport:
    """What a chaos run did and what became of its posts."""

    seed: int
    seconds: float
    ended_at: float = 0.0  # wall-clock time the faults stopped
    faults: list[tuple[float, str, str]] = field(default_factory=list)
    outcome: Outcome | None = None
    not_received: list[int] = field(default_factory=list)
    two_ids: dict[int, set[str]] = field(default_factory=dict)
    unsigned: int = 0
    received_early: list[int] = field(default_factory=list)
    receipt_lags: list[float] = field(default_factory=list)
    stuck: list[tuple] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    instances: int = 0
    changes: dict[str, list] = field(default_factory=dict)  # scheduled changes: faultkit.changed
    releases: dict[str, list] = field(default_factory=dict)  # releases: faultkit.released

    def fault_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _t, kind, _target in self.faults:
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def stuck_counts(self) -> dict[str, int]:
        """Return how many posts not received stand where (webhook delivery, hook run)."""
        counts: dict[str, int] = {}
        for _post, delivery, _attempts, _error, hook, _hook_error in self.stuck:
            where = f"webhook delivery {delivery}, webhooks hook {hook}"
            counts[where] = counts.get(where, 0) + 1
        return counts

    def __str__(self) -> str:
        lines = [f"seed {self.seed} (SOLOIST_CHAOS_SEED={self.seed} repeats the fault plan); "
                 f"{self.instances} instances started; faults {self.fault_counts()}",
                 f"posts: {self.outcome}",
                 f"not received by the webhook receiver: {self.not_received[:20]}",
                 f"posts with two delivery ids: {dict(list(self.two_ids.items())[:5])}",
                 f"unsigned receipts: {self.unsigned}; received before publish_at: "
                 f"{self.received_early[:10]}",
                 f"processes left running: {self.leftovers}",
                 f"scheduled changes not swapped in once (post, events, still pending): "
                 f"{self.changes.get('not_once', [])[:10]}; early {self.changes.get('early')}",
                 f"releases not applied once and whole (id, status, events, items, together, "
                 f"post events): {self.releases.get('not_once', [])[:10]}; early "
                 f"{self.releases.get('early')}",
                 f"where the posts not received stand: {self.stuck_counts()}"]
        lines += [f"  post {row[0]}: webhook delivery {row[1]} (attempts {row[2]}, "
                  f"{row[3]!r}); webhooks hook {row[4]} ({row[5]!r})" for row in self.stuck[:10]]
        lines += [f"  {t:6.2f} s {kind} {target}" for t, kind, target in self.faults]
        return "\n".join(lines)


class Chaos:
    """Run faults against fleet (size instances x workers) on pg for some seconds."""

    def __init__(self, fleet: FaultFleet, pg: PgServer, receiver: WebhookReceiver, seed: int,
                 size: int = 3, workers: int = 2, period: float = 2.0) -> None:
        self.fleet, self.pg, self.receiver = fleet, pg, receiver
        self.rng = random.Random(seed)
        self.size, self.workers, self.period = size, workers, period
        self.report = ChaosReport(seed, 0.0)
        self.frozen: dict[GroupInstance, float] = {}  # instance -> monotonic time to thaw
        self.t0 = 0.0

    # --- the run ---------------------------------------------------------------------------

    def run(self, seconds: float, receipt_wait: float = 60.0, log=None,
            nudge: bool = True) -> ChaosReport:
        """Schedule posts over seconds, hurt the fleet until then, and check the outcome.

        nudge: while waiting for receipts, ask the webhooks deliver timer to run now every
        3 s (False measures what the fleet delivers on its own).
        """
        self.log = log or (lambda _message: None)
        status, body = self.fleet.api("POST", "/api/webhooks", {
            "url": self.receiver.url, "events": ["post.published"], "secret": SECRET})
        assert status == 201, f"could not subscribe the receiver: {status} {body}"
        ids = self.fleet.schedule("chaos", int(seconds * POSTS_PER_SECOND), lead=3.0,
                                  spread=max(seconds - 5.0, 1.0))
        changes = self.fleet.schedule_changes("live", int(seconds * CHANGES_PER_SECOND),
                                              lead=3.0, spread=max(seconds - 5.0, 1.0))
        releases = self.fleet.schedule_releases("rel", max(int(seconds / RELEASE_EVERY), 1),
                                                RELEASE_POSTS, lead=3.0,
                                                spread=max(seconds - 5.0, 1.0))
        self.t0 = time.monotonic()
        self._hurt(seconds)
        self.report.seconds = time.monotonic() - self.t0
        self.report.ended_at = time.time()
        self._recover()
        self._await_posts(ids, deadline=time.monotonic() + 45)
        self._await_changes(changes, deadline=time.monotonic() + 30)
        self._await_releases(releases, deadline=time.monotonic() + 30)
        self._await_receipts(ids, deadline=time.monotonic() + receipt_wait, nudge=nudge)
        self._reckon(ids)
        self.report.changes = self.fleet.changed(changes)
        self.report.releases = self.fleet.released(releases)
        return self.report

    def _hurt(self, seconds: float) -> None:
        restart_at = self.t0 + self.rng.uniform(0.3, 0.7) * seconds
        while time.monotonic() - self.t0 < seconds:
            self._thaw_due()
            self._reap()
            if restart_at is not None and time.monotonic() >= restart_at:
                restart_at = None
                self._db_restart()
            else:
                kind = self.rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
                getattr(self, kind)()
            time.sleep(self.rng.uniform(0.5, 1.5) * self.period)  # the fault schedule

    def _record(self, kind: str, target: str) -> None:
        at = time.monotonic() - self.t0
        self.report.faults.append((at, kind, target))
        self.log(f"chaos {at:6.2f} s: {kind} {target}")

    # --- picking victims -------------------------------------------------------------------

    def _leader_pid(self) -> int | None:
        holders = self.fleet.view.quiet(self.fleet.view.holders) or {}
        names = [holders[k] for k in (PUBLISH_KEY, PLUGINS_KEY) if k in holders]
        return pid_of(self.rng.choice(names)) if names else None

    def _pick_worker(self) -> tuple[GroupInstance, int] | None:
        live = [i for i in self.fleet.instances if i not in self.frozen]
        leader = self._leader_pid() if self.rng.random() < 0.5 else None
        for inst in live:
            if leader in inst.worker_pids():
                return inst, leader
        choices = [(i, pid) for i in live for pid in i.worker_pids()]
        return self.rng.choice(choices) if choices else None

    def _pick_instance(self) -> GroupInstance | None:
        picked = self._pick_worker()
        return picked[0] if picked else None

    # --- the faults --------------------------------------------------------------------------

    def kill_worker(self) -> None:
        picked = self._pick_worker()
        if picked:
            with contextlib.suppress(ProcessLookupError):  # it may have just died
                os.kill(picked[1], signal.SIGKILL)
            self._record("SIGKILL worker", f"{picked[0].name}:{picked[1]}")

    def kill_instance(self) -> None:
        inst = self._pick_instance()
        if inst:
            inst.group_signal(signal.SIGKILL)
            self._replace(inst)
            self._record("SIGKILL instance group", inst.name)

    def term_instance(self) -> None:
        inst = self._pick_instance()
        if inst:
            inst.signal(signal.SIGTERM)
            self._replace(inst)
            self._record("SIGTERM instance", inst.name)

    def stop_group(self) -> None:
        if self.frozen:
            return self.cut_sessions()  # one frozen host at a time
        inst = self._pick_instance()
        if inst:
            inst.group_signal(signal.SIGSTOP)
            self.frozen[inst] = time.monotonic() + self.rng.uniform(2.0, 5.0)
            self._record("SIGSTOP instance group", inst.name)
        return None

    def cut_sessions(self) -> None:
        spare = (self.fleet.view.quiet(lambda: self.fleet.view.backend_pid) or 0,)
        ended = self.pg.terminate_sessions(self.fleet.dbname, spare=spare)
        self._record("pg_terminate_backend every session", f"{ended} sessions")

    def _db_restart(self) -> None:
        downtime = self.rng.uniform(1.0, 3.0)
        self.pg.restart(downtime=downtime)
        self._record("database restart", f"down {downtime:.1f} s")

    # --- keeping the fleet going -----------------------------------------------------------

    def _replace(self, inst: GroupInstance) -> None:
        self.frozen.pop(inst, None)
        self.fleet.retire(inst)
        while len(self.fleet.instances) < self.size:
            self.fleet.spawn(self.workers)
            self.report.instances += 1

    def _thaw_due(self, everything: bool = False) -> None:
        for inst, until in list(self.frozen.items()):
            if everything or time.monotonic() >= until:
                inst.group_signal(signal.SIGCONT)
                del self.frozen[inst]
                self._record("SIGCONT instance group", inst.name)

    def _reap(self) -> None:
        for inst in self.fleet.gone:
            if inst.exited and not inst.log.closed:
                inst.stop()

    def _recover(self) -> None:
        self._thaw_due(everything=True)
        self.fleet.wait_settled(90)

    # --- the reckoning ---------------------------------------------------------------------

    def _await_posts(self, ids: list[int], deadline: float) -> None:
        try:
            wait_for(lambda: self.fleet.published(ids) == len(ids),
                     max(deadline - time.monotonic(), 0), "every chaos post to be published",
                     interval=0.2)
        except AssertionError:
            self.log("not every post was published in time; reckoning anyway")

    def _await_changes(self, due: dict, deadline: float) -> None:
        pending = "SELECT count(*) FROM scheduled_changes WHERE post_id = ANY(%s)"
        with contextlib.suppress(AssertionError):  # the reckoning says which stayed pending
            wait_for(lambda: self.fleet.view.query(pending, (list(due),))[0][0] == 0,
                     max(deadline - time.monotonic(), 0), "every scheduled change", interval=0.2)

    def _await_releases(self, ids: list[int], deadline: float) -> None:
        going = "SELECT count(*) FROM releases WHERE id = ANY(%s) AND status = 'scheduled'"
        with contextlib.suppress(AssertionError):  # the reckoning says which never went
            wait_for(lambda: self.fleet.view.query(going, (ids,))[0][0] == 0,
                     max(deadline - time.monotonic(), 0), "every release", interval=0.2)

    def _await_receipts(self, ids: list[int], deadline: float, nudge: bool = True) -> None:
        timer = self._deliver_timer() if nudge else None

        def received() -> bool:
            if not self._not_received(ids):
                return True
            if timer is not None:  # send the retries now rather than at the next minute
                with contextlib.suppress(RuntimeError):
                    self.fleet.api("POST", f"/api/timers/{timer}/run")
            return False

        # every 3 s: the run-now request is picked up by the plugin leader in between
        with contextlib.suppress(AssertionError):  # the reckoning says what never arrived
            wait_for(received, max(deadline - time.monotonic(), 0), "every delivery", interval=3)

    def _deliver_timer(self) -> int | None:
        status, body = self.fleet.api("GET", "/api/timers")
        if status != 200:
            return None
        return next((t["id"] for t in body["timers"] if t["action"] == "webhooks.deliver"), None)

    def _not_received(self, ids: list[int]) -> list[int]:
        got = self.receiver.by_post()
        return [i for i in ids if not any(r.status == 200 for r in got.get(i, []))]

    def _reckon(self, ids: list[int]) -> None:
        report = self.report
        report.outcome = self.fleet.outcome(ids)
        report.not_received = self._not_received(ids)
        due = dict(self.fleet.view.query(
            "SELECT id, extract(epoch FROM publish_at)::float8 FROM posts WHERE id = ANY(%s)",
            (ids,)))
        for post_id, receipts in self.receiver.by_post().items():
            delivery_ids = {r.delivery_id for r in receipts}
            if len(delivery_ids) > 1:
                report.two_ids[post_id] = delivery_ids
            report.unsigned += sum(not r.signed for r in receipts)
            first = min(r.at for r in receipts)
            if post_id in due and first < due[post_id]:
                report.received_early.append(post_id)
            if post_id in due:
                report.receipt_lags.append(first - due[post_id])
        if report.not_received:
            report.stuck = self.fleet.view.query(STUCK_SQL, (report.not_received,))
        report.leftovers = self.fleet.close()
