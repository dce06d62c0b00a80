"""The machine's speed: a fixed loop to read a run's time against, the suite's or a benchmark's.

The same commit's suite took 338 s on one 2-core machine and 808 s on another, whose loop took
from 36 to 69 ms from one minute to the next (a shared host).
"""

import time

REFERENCE_LOOP = 1_000_000


def reference_loop() -> float:
    """Return the seconds this machine takes for REFERENCE_LOOP Python additions, now."""
    started, total = time.perf_counter(), 0
    for i in range(REFERENCE_LOOP):
        total += i
    return time.perf_counter() - started


def machine_speed() -> float:
    """Return the best of three reference loops, in seconds."""
    return min(reference_loop() for _ in range(3))
