"""A deploy sends nothing twice: SIGTERM to the plugins leader while its senders wait on a
slow receiver, and the successor leaves their claims alone while their process lives; every
delivery arrives, none under its id twice. (A crash mid-send may still send one twice:
at-least-once stays the contract, docs/webhooks.md.)"""

import signal

import pytest

from tests.harness.cluster import PLUGINS_KEY, candidate_of, fleet_ready, wait_for
from tests.harness.handover import queue_deliveries, received
from tests.harness.receiver import Receiver

pytestmark = pytest.mark.slow

# 8 deliveries, not the 50: a process sends 4 at a time (its send slots), so 50
# answers of 5 s take a minute; bench/deliveries.py --only handover runs the 50
ENDPOINTS = 4  # one sender each, every send slot of the leader busy at the SIGTERM
EVENTS = 2  # 4 in flight at the SIGTERM, 4 left for the successor
ANSWER_SECONDS = 5.0
ALLOW = {"WEBHOOK_ALLOW_PRIVATE": "true"}


def test_a_sigterm_of_the_plugins_leader_with_slow_sends_in_flight_sends_nothing_twice(
        launch, fleet_db):
    url, view = fleet_db
    a = launch("a", workers=1, **ALLOW)
    wait_for(lambda: fleet_ready(view, 1), 30, "a to lead both keys")
    b = launch("b", workers=1, **ALLOW)
    wait_for(lambda: candidate_of(view, b), 30, "b to stand by")
    assert a.owns(view.holder(PLUGINS_KEY))
    receiver = Receiver().start()
    receiver.answers = [ANSWER_SECONDS] * 100  # each answer takes 5 s, then 200
    try:
        ids = queue_deliveries(url, receiver.url, ENDPOINTS, EVENTS)
        assert len(ids) == ENDPOINTS * EVENTS
        wait_for(lambda: receiver.calls >= ENDPOINTS, 20, "a send in flight to every endpoint")
        a.signal(signal.SIGTERM)  # a deploy: the leader hands over with its sends in flight
        wait_for(lambda: b.owns(view.holder(PLUGINS_KEY)), 10, "b to lead the plugins key")
        wait_for(lambda: set(received(receiver)) == ids, 40, "every delivery at the receiver",
                 state=lambda: received(receiver))
        wait_for(lambda: view.query("SELECT count(*) FROM webhook_deliveries "
                                    "WHERE status <> 'delivered'")[0][0] == 0, 20,
                 "every delivery recorded delivered",
                 state=lambda: view.query("SELECT status, claimed_holder FROM webhook_deliveries"))
        twice = {key: count for key, count in received(receiver).items() if count > 1}
        assert twice == {}, f"received more than once: {twice}"
    finally:
        receiver.close()
