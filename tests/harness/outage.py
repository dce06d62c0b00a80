"""The database away for a while under a fleet: CPU each instance burns, and the way back.

Shared by tests/test_faults.py and bench/outage_cpu.py. CPU is read from /proc (utime +
stime of each instance's master and workers), so it counts what the instance itself used,
however busy the machine is with other work.
"""

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.cluster import wait_for
from tests.harness.faultkit import FaultFleet
from tests.harness.pgserver import PgServer
from tests.harness.scenarios import keys_led_by_workers

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """Return the CPU seconds (user + system) the processes pids have used so far."""
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:  # gone: an outage test notices a worker that died by other means
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    return total / CLOCK_TICKS


@dataclass
class Outage:
    """What a fleet did while its database was away, and how soon it led again."""

    seconds: float  # how long the server was down
    cpu: dict[str, float] = field(default_factory=dict)  # instance -> CPU s per s of outage
    back_after: float = 0.0  # s from the server accepting again to both keys led by workers

    @property
    def worst(self) -> float:
        """Return the most CPU a second any instance used while the server was away."""
        return max(self.cpu.values(), default=0.0)


def database_away(fleet: FaultFleet, pg: PgServer, seconds: float,
                  back_within: float = 30.0) -> Outage:
    """Stop pg (fast) for seconds under fleet, sampling each instance's CPU meanwhile; start
    it again and wait (up to back_within s) until both keys are led by the fleet's workers."""
    processes = {inst.name: inst.alive() for inst in fleet.instances}
    pg.stop()
    stopped = time.monotonic()
    before = {name: cpu_seconds(pids) for name, pids in processes.items()}
    time.sleep(seconds)  # the outage itself: what is measured is what the fleet does meanwhile
    used = {name: cpu_seconds(pids) - before[name] for name, pids in processes.items()}
    down = time.monotonic() - stopped
    accepting = pg.start()
    wait_for(lambda: fleet.view.quiet(keys_led_by_workers, fleet), back_within,
             "both keys to be led again after the outage", interval=0.02)
    return Outage(down, {name: cpu / down for name, cpu in used.items()},
                  time.time() - accepting)
