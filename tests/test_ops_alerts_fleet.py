"""Ops alerts on a real fleet: a SIGSTOPped leader is reported at a local receiver, and the
dead-man's switch hears from the publish leader only, and nothing once no process leads."""

import json
import signal
import time

import pytest
from standardwebhooks import Webhook

from tests.harness.cluster import PUBLISH_KEY, drop_database, migrated_database, wait_for
from tests.harness.faultkit import FaultFleet
from tests.harness.receiver import Receiver
from tests.harness.support import postgres_or_skip
from webapp.plugins.signing import new_secret

pytestmark = pytest.mark.slow

PING_EVERY = 0.5


@pytest.fixture
def pinging_fleet(tmp_path):
    """Two instances of one worker each, quick to evict, pinging a local dead-man's switch."""
    postgres_or_skip()
    pings, url = Receiver().start(), migrated_database("soloist_ops")
    fleet = FaultFleet(url, tmp_path, prefix="o", migrated=True, LEADER_STALE_SECONDS="2",
                       WEBHOOK_ALLOW_PRIVATE="true", RETRY_SECONDS="1",
                       DEADMAN_URL=f"{pings.url}/ping", DEADMAN_EVERY_SECONDS=str(PING_EVERY))
    fleet.pings = pings
    try:
        fleet.start(2, workers=1)
        yield fleet
    finally:
        fleet.close()
        pings.close()
        drop_database(url)


def pinged_by(receiver: Receiver, start: int = 0) -> list[str]:
    """Return who sent each ping from the start-th on (the lock session's name)."""
    return [r.headers["X-Soloist-Instance"] for r in receiver.received()[start:]]


def test_a_frozen_leader_is_reported_and_only_the_publish_leader_pings(pinging_fleet, receiver):
    fleet = pinging_fleet
    slack, secret = Receiver().start(), new_secret()
    try:
        for url, body_format in ((f"{receiver.url}/hook", "standard"), (slack.url, "slack")):
            status, _ = fleet.api("POST", "/api/webhooks", {
                "url": url, "events": ["ops.leader_evicted"], "secret": secret,
                "payload_format": body_format})
            assert status == 201
        frozen_name = fleet.view.holder(PUBLISH_KEY)
        held = sorted(k for k, name in fleet.view.holders().items() if name == frozen_name)
        wait_for(lambda: len(pinged_by(fleet.pings)) >= 2, 10, "the leader's pings")
        assert set(pinged_by(fleet.pings)) == {frozen_name}
        frozen, _pid = fleet.leader()
        frozen.group_signal(signal.SIGSTOP)  # the whole host stops, its locks stay held
        successor = wait_for(lambda: (name := fleet.view.holder(PUBLISH_KEY)) != frozen_name
                             and name, 30, "a standby to evict the frozen leader")
        received = wait_for(lambda: len(receiver.received()) >= len(held) and
                            receiver.received(), 30, "the ops.leader_evicted deliveries")
        bodies = [Webhook(secret).verify(r.body, r.headers) for r in received]
        assert sorted(b["data"]["key"] for b in bodies) == sorted(
            {PUBLISH_KEY: "publish"}.get(k, "plugins") for k in held)  # one per key it held
        assert {(b["event"], b["data"]["holder"]) for b in bodies} == {
            ("ops.leader_evicted", frozen_name)}
        assert len({r.headers["webhook-id"] for r in received}) == len(received)
        texts = [json.loads(r.body) for r in wait_for(slack.received, 30, "the Slack body")]
        assert "was evicted" in texts[0]["text"] and set(texts[0]) == {"text"}
        first = len(fleet.pings.received())
        wait_for(lambda: len(pinged_by(fleet.pings, first)) >= 2, 10, "the successor's pings")
        assert set(pinged_by(fleet.pings, first)) == {successor}
        for instance in fleet.instances:
            if instance is not frozen:
                instance.group_signal(signal.SIGSTOP)  # now no process leads
        silent_from = len(fleet.pings.received())
        # watch for as long as eight pings would take: at most one already on its way arrives
        deadline = time.monotonic() + 8 * PING_EVERY
        wait_for(lambda: time.monotonic() > deadline, 10, "the observation window")
        assert len(fleet.pings.received()) - silent_from <= 1
    finally:
        slack.close()
