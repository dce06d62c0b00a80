"""The seed's scheduler loop, for comparison: every INTERVAL s take the lock, tick, release.

Run by the benchmarks (not by hand) as one plain python process per "worker", with
DATABASE_URL and INSTANCE_NAME in the environment. Each tick is recorded as a row of
bench_seed_ticks (created by the benchmark) so the benchmark can time it.
"""

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from webapp import create_app  # noqa: E402
from webapp.db import database_now  # noqa: E402
from webapp.extensions import db  # noqa: E402
from webapp.leadership import with_scheduler_leader_lock  # noqa: E402
from webapp.leadership.keys import PUBLISH  # noqa: E402
from webapp.posts import publish_due  # noqa: E402

TICK_SQL = sa.text(
    "INSERT INTO bench_seed_ticks (pid, instance, published) VALUES (:pid, :instance, :n)"
)


def tick(instance: str, publish: bool) -> int:
    """The seed's unit of work: publish what is due (optionally), then record the tick."""
    published = publish_due(database_now(), holder=instance) if publish else []
    db.session.execute(TICK_SQL, {"pid": os.getpid(), "instance": instance,
                                  "n": len(published)})
    db.session.commit()
    return len(published)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--phase", type=float, default=0.0, help="seconds before the first tick")
    parser.add_argument("--publish", action="store_true", help="publish due posts in each tick")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = create_app({"SCHEDULER_ENABLED": False})
    instance = app.config["INSTANCE_NAME"]
    start = time.monotonic() + args.phase
    n = 0
    while True:
        time.sleep(max(0.0, start + n * args.interval - time.monotonic()))
        with app.app_context():
            try:
                with_scheduler_leader_lock(db.session, PUBLISH.value,
                                           lambda: tick(instance, args.publish))
            finally:
                db.session.remove()
        # a fixed rate, like the seed's `every 10 s`; a slow tick skips the missed beats
        n = max(n + 1, int((time.monotonic() - start) // args.interval) + 1)


if __name__ == "__main__":
    main()
