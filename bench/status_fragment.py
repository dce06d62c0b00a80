"""The status page's live fragment, now that it carries the plain sentence and the timeline.

A throwaway database holds a day of leadership: --terms terms per key spread over the last
24 hours (each ended by a release, a kill or an eviction in turn, a deploy every 4 hours),
and a lock session holding both keys with a fresh heartbeat. A viewer signs in through the
Flask test client and GETs /status/live --requests times:

- redrawn: everything a worker keeps dropped first (snapshot, fragment, timeline), so the
  request reads pg_locks, the verdict, builds and draws the timeline and renders: what a
  poll costs after a leadership change or a deploy, or every 30 s;
- fresh: the snapshot and fragment dropped, the timeline's drawing kept (nothing changed):
  what one poll a second per worker costs, whoever polls;
- shared: the fragment as pollers get it within the second (rendered once per snapshot).

Also the timeline alone (build_timeline), for its share of a redrawn request.

    .venv/bin/python bench/status_fragment.py [--terms 2000] [--requests 200]
"""

import argparse
import statistics
import time
from datetime import UTC, datetime, timedelta

from common import Bench, log, report, run_main, table

from tests.harness.cluster import PLUGINS_KEY, PUBLISH_KEY, holding
from tests.harness.support import AuthActions, make_app, record_term
from webapp.extensions import db
from webapp.models import Deploy, LeaderEvent
from webapp.ops.deploys import build_timeline

ENDS = ("released", "ended", "evicted")


def seed(app, terms: int) -> None:
    """Write terms terms per key over the last day, and a deploy every 4 hours."""
    now = datetime.now(UTC)
    step = timedelta(days=1) / terms
    with app.app_context():
        for key in (PUBLISH_KEY, PLUGINS_KEY):
            rows = []
            for term in range(1, terms + 1):
                began = now - timedelta(days=1) + step * (term - 1)
                holder = f"soloist:web.{term % 3 + 1}:{100 + term}:abcdefgh"
                rows.append(LeaderEvent(key=key, kind="acquired", term=term, holder=holder,
                                        at=began, detail=""))
                if term < terms:
                    rows.append(LeaderEvent(key=key, kind=ENDS[term % 3], term=term,
                                            holder=holder, at=began + step * 0.99, detail=""))
            db.session.add_all(rows)
        db.session.add_all(Deploy(version=f"v{h}", source="bench", at=now - timedelta(hours=h))
                           for h in range(4, 24, 4))
        db.session.commit()


def timed(fn, count: int) -> list[float]:
    """Return the milliseconds of count calls of fn."""
    spent = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        spent.append((time.perf_counter() - start) * 1000)
    return spent


def row(name: str, spent: list[float]) -> list[object]:
    ordered = sorted(spent)
    p95 = ordered[max(0, round(len(ordered) * 0.95) - 1)]
    return [name, len(spent), f"{statistics.median(spent):.1f} ms", f"{p95:.1f} ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--terms", type=int, default=2000, help="per key, over 24 hours")
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with Bench("status_fragment") as bench:
        app = make_app(bench.url)
        seed(app, args.terms)
        client = app.test_client()
        AuthActions(client).login("viewer")

        def redrawn() -> None:
            app.extensions.pop("soloist_status_timeline", None)
            fresh()

        def fresh() -> None:
            app.extensions.pop("soloist_status_snapshot", None)
            app.extensions.pop("soloist_status_html", None)
            shared()

        def shared() -> None:
            answer = client.get("/status/live", headers={"HX-Request": "true"})
            assert answer.status_code == 200 and 'id="verdict"' in answer.get_data(as_text=True)

        def timeline() -> None:
            with app.app_context():
                build_timeline(datetime.now(UTC))

        with holding(bench.url, "soloist:web.1:99:abcdefgh", PUBLISH_KEY, PLUGINS_KEY) as conn:
            record_term(app, PUBLISH_KEY, conn, term=args.terms + 1)
            record_term(app, PLUGINS_KEY, conn, term=args.terms + 1)
            log("warming up")
            timed(redrawn, 3)
            rows = [row("redrawn (snapshot, verdict, timeline built and drawn, render)",
                        timed(redrawn, max(args.requests // 10, 5))),
                    row("fresh (snapshot, verdict, the timeline's drawing kept, render)",
                        timed(fresh, args.requests)),
                    row("shared within the second", timed(shared, args.requests)),
                    row("the timeline alone (build_timeline)",
                        timed(timeline, max(args.requests // 10, 5)))]
        with app.app_context():
            db.session.remove()
            db.engine.dispose()
    report("Status live fragment", [(
        f"{args.terms} terms per key over 24 hours, 5 deploys; Flask test client, one process",
        table(["request", "n", "p50", "p95"], rows))],
        ["A worker renders a fresh fragment at most once a second (shared_snapshot); "
         "every other poll in that second is the shared row."])


if __name__ == "__main__":
    run_main(main)
