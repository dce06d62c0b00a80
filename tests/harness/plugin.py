"""The suite's pytest hooks, registered by tests/conftest.py: the order the test files are
handed to the xdist workers, the machine's speed after the run, and the gunicorn logs a failed
test left."""

from collections import Counter
from pathlib import Path

import pytest

from tests.harness.speed import REFERENCE_LOOP, machine_speed

# The modules that take longest (each runs whole on one xdist worker: --dist loadfile), handed
# out first so that none starts last and keeps the run waiting on one worker; fleets, browsers
# and throwaway servers alternate so that the first minutes are not four fleets at once.
# Then the modules that mostly wait (on a fleet, a timeout, a poll): while they wait, the
# other workers' tests use the CPU, and none of them is left at the end, when nothing else
# runs beside it (the last 15 s of a run were a test waiting on an idle machine). The rest
# follow, most tests first.
# From a profile of the run (call + setup + teardown a file, seconds, on a fast moment):
# failover 68, faults 65, editor_browser 49, chaos 46, every_page_browser 44, api_contract 31,
# cluster 28, candidates 27, authz_matrix 27, auth 26, pooler_fleet 23, silent_holders 22,
# status 22, partition 21, hostile_forms 20, edge_fleet 19, every_page_on_a_phone 17,
# long_ticks 17.
RUN_FIRST = ["test_failover", "test_editor_browser", "test_faults", "test_every_page_browser",
             "test_chaos", "test_api_contract", "test_cluster", "test_authz_matrix",
             "test_candidates", "test_auth", "test_pooler_fleet", "test_status",
             "test_silent_holders", "test_hostile_forms", "test_partition",
             "test_every_page_on_a_phone", "test_edge_fleet", "test_long_ticks",
             "test_previous_release",
             "test_deploy_report", "test_webhook_senders", "test_ops_alerts_fleet", "test_freezes",
             "test_status_browser", "test_calendar", "test_metrics_fleet", "test_hung_plugins",
             "test_procfile_on_heroku", "test_scheduler_thread", "test_passkeys_browser",
             "test_frozen_process", "test_containers",
             "test_deliveries_wait_for_a_replica", "test_handover_sends", "test_site_browser",
             "test_keyboard_browser",
             "test_media_fleet", "test_media_browser", "test_status_phone"]


def pytest_collection_modifyitems(items):
    """Order the modules as RUN_FIRST says (make test runs xdist with --no-loadscope-reorder)."""
    module = {item: item.module.__name__.rpartition(".")[2] for item in items}
    counts = Counter(module.values())

    def rank(item) -> tuple[int, int, str]:
        name = module[item]
        first = RUN_FIRST.index(name) if name in RUN_FIRST else len(RUN_FIRST)
        return first, -counts[name], name

    items.sort(key=rank)  # stable: each module keeps its own tests' order


def pytest_terminal_summary(terminalreporter):
    """Print how fast this machine ran a fixed loop just now, to read the run's time against
    (tests/harness/speed.py)."""
    terminalreporter.write_line(
        f"machine speed: {REFERENCE_LOOP:,} Python additions in {machine_speed() * 1000:.0f} ms "
        "(best of 3, after the run; the suite's time grows with it)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the tail of every gunicorn log a failed test left in its tmp_path."""
    report = yield
    tmp = item.funcargs.get("tmp_path") if hasattr(item, "funcargs") else None
    if report.failed and tmp is not None:
        for log in sorted(Path(tmp).rglob("soloist-*.log")):
            tail = log.read_text(errors="replace").splitlines()[-60:]
            report.sections.append((f"gunicorn log {log.name}", "\n".join(tail)))
    return report
