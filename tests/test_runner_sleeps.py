"""Every path of the scheduler loop sleeps: a lock session that is down costs no CPU."""

import os
import time
from pathlib import Path

from tests.cluster import free_port
from tests.support import make_app
from webapp.scheduling.runner import Scheduler

RUN = 1.5  # seconds the loop runs against a closed port


def _count(obj, name: str) -> list[float]:
    """Wrap obj.name so each call's monotonic time is noted; return the notes."""
    real, calls = getattr(obj, name), []

    def counted(*args, **kwargs):
        calls.append(time.monotonic())
        return real(*args, **kwargs)

    setattr(obj, name, counted)
    return calls


def thread_cpu(tid: int) -> float:
    """Return the CPU seconds one thread of this process has used (utime + stime)."""
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_scheduler_sleeps_between_tries_while_its_database_is_away(tmp_path):
    url = f"postgresql://root@127.0.0.1:{free_port()}/away"  # nothing listens there
    app = make_app(url, LEASE_DIR=str(tmp_path), FOLLOWER_POLL_SECONDS=0.5)
    scheduler = Scheduler(app)
    steps, tries = _count(scheduler, "step"), _count(scheduler.locks, "connect")
    scheduler.start()
    time.sleep(RUN)  # the outage itself: what is measured is what the loop does meanwhile
    used = thread_cpu(scheduler.thread.native_id)  # its own: not other tests' threads
    assert scheduler.stop(5)
    # a loop that never slept would turn 180,000 times in 3 s, a whole core; a few turns,
    # each one a connect try
    assert len(steps) <= 20, f"{len(steps)} loop turns in {RUN} s with the database away"
    assert used <= 0.3, f"{used:.2f} s of CPU in {RUN} s with the database away"
    # back-off capped at FOLLOWER_POLL_SECONDS: a server that is back is tried again soon
    gaps = [b - a for a, b in zip(tries, tries[1:], strict=False)]
    # (each gap is the back-off plus the try itself, on a machine that may be busy; uncapped,
    # the back-off would reach RECONNECT_MAX, 2 s)
    assert len(tries) >= 3 and max(gaps) <= 0.5 + 0.5, f"connect tries {tries}, gaps {gaps}"
