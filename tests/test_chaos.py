"""A fleet hurt at random every ~2 s still publishes every post and release once, on time, to
webhooks."""


import pytest

from tests.harness.chaos import FLEET_ENV, SECRET, Chaos, chaos_seed
from tests.harness.faultkit import FaultFleet
from tests.harness.scenarios import p99
from tests.harness.traffic import WebhookReceiver

pytestmark = pytest.mark.slow

CHAOS_SECONDS = 35
LAG_P99 = 12.0
# a delivery whose sender died is sent again once its claim's lease has passed:
# WEBHOOK_TIMEOUT_SECONDS (2 here) + 60 s
RECEIPT_WAIT = 75


def test_chaos_publishes_every_post_once_never_early_with_one_delivery_id(pg_server, tmp_path):
    url = pg_server.create_database("soloist_chaos")
    fleet = FaultFleet(url, tmp_path, prefix="c", **FLEET_ENV)
    receiver = WebhookReceiver(SECRET, fail_rate=0.15, seed=1).start()
    seed = chaos_seed()
    try:
        fleet.start(3, workers=2)
        chaos = Chaos(fleet, pg_server, receiver, seed)
        chaos.report.instances = 3
        report = chaos.run(CHAOS_SECONDS, receipt_wait=RECEIPT_WAIT, log=print)
    finally:
        fleet.close()
        receiver.close()
    outcome = report.outcome
    assert not outcome.missing and not outcome.not_once, f"posts not published once:\n{report}"
    assert not outcome.early, f"posts published before their publish_at:\n{report}"
    assert not report.two_ids, f"a post delivered under two delivery ids:\n{report}"
    assert not report.not_received, f"posts the webhook receiver never got:\n{report}"
    assert not report.unsigned and not report.received_early, str(report)
    assert not report.leftovers, f"processes of the fleet left running:\n{report}"
    assert report.changes["lags"] and not report.changes["not_once"], (
        f"scheduled changes not swapped in exactly once:\n{report}")
    assert not report.changes["early"], f"scheduled changes swapped in early:\n{report}"
    assert report.releases["lags"] and not report.releases["not_once"], (
        f"releases not applied once and whole:\n{report}")
    assert not report.releases["early"], f"releases applied early:\n{report}"
    assert p99(outcome.lags) <= LAG_P99, (
        f"publish lag p99 {p99(outcome.lags):.1f} s (target ≤ {LAG_P99:g} s):\n{report}")
