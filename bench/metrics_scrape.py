"""What one GET /metrics costs with a long history: 100,000 posts, 1,000,000 deliveries.

Fills a fresh PostgreSQL database (posts with mixed statuses, a few due and late; webhook
deliveries mostly delivered; unprocessed outbox events), then scrapes /metrics through the
Flask test client with METRICS_TOKEN: ROUNDS scrapes after a warm-up, median and p95,
with the time spent in the database driver and each statement's share.

    .venv/bin/python bench/metrics_scrape.py [--posts 100000] [--deliveries 1000000]
"""

import argparse
import secrets
import time

from common import Bench, log, ms, percentile, report, run_main, table
from posts_list import FILL_SQL, WORDS, SqlClock

DELIVERIES_SQL = """
INSERT INTO webhook_endpoints (url, description, events, secret, active, created_at, failures,
                               last_error)
VALUES ('https://hooks.example.com/', '', '["post.published"]', 'whsec_x', true, now(), 0, '');
INSERT INTO webhook_deliveries (delivery_id, endpoint_id, topic, body, status, attempts,
                                last_error, created_at, claim, claimed_term)
SELECT 'bench-' || i, 1, 'post.published', '{}',
       CASE WHEN i %% 100 = 0 THEN 'pending' WHEN i %% 100 = 1 THEN 'failed'
            ELSE 'delivered' END, 1, '', now(), '', 0
FROM generate_series(1, %(n)s) AS i;
INSERT INTO outbox_events (topic, payload, instance, created_at)
SELECT 'post.published', '{}', 'bench', now() FROM generate_series(1, 50);
UPDATE posts SET publish_at = now() - interval '90 seconds' WHERE id IN (
    SELECT id FROM posts WHERE status = 'scheduled' ORDER BY id LIMIT 3)
"""


class Statements:
    """Times each statement the scrape sends, by its first words."""

    def __init__(self, engine) -> None:
        from sqlalchemy import event

        self.took: dict[str, list[float]] = {}
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, conn, _cursor, statement, *_args) -> None:
        conn.info["statement"] = (" ".join(statement.split())[:60], time.perf_counter())

    def _after(self, conn, *_args) -> None:
        what, started = conn.info.pop("statement")
        self.took.setdefault(what, []).append((time.perf_counter() - started) * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=100_000)
    parser.add_argument("--deliveries", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    from tests.harness.support import make_app
    from webapp.extensions import db

    token = secrets.token_urlsafe(32)
    with Bench("metrics") as bench:
        log(f"inserting {args.posts:,} posts and {args.deliveries:,} deliveries")
        bench.execute(FILL_SQL, {"n": args.posts, "words": list(WORDS)})
        for statement in DELIVERIES_SQL.split(";"):
            bench.execute(statement, {"n": args.deliveries} if "%(n)s" in statement else None)
        bench.execute("VACUUM ANALYZE")
        app = make_app(bench.url, METRICS_TOKEN=token)
        with app.app_context():
            clock, statements = SqlClock(db.engine), Statements(db.engine)
        client = app.test_client()
        headers = {"Authorization": f"Bearer {token}"}
        assert client.get("/metrics", headers=headers).status_code == 200  # warm-up
        statements.took.clear()
        took, sql = [], []
        for _ in range(args.rounds):
            clock.total = 0.0
            started = time.perf_counter()
            response = client.get("/metrics", headers=headers)
            took.append((time.perf_counter() - started) * 1000)
            sql.append(clock.total * 1000)
        body = response.get_data(as_text=True)
        with app.app_context():
            db.engine.dispose()
    shown = [line for line in body.splitlines()
             if line.startswith(("soloist_posts", "soloist_webhook_deliveries{"))]
    rows = [[what, len(times) // args.rounds, ms(percentile(times, 50)),
             ms(percentile(times, 95))] for what, times in statements.took.items()]
    report(f"GET /metrics at {args.posts:,} posts and {args.deliveries:,} deliveries", [
        (f"One scrape through the Flask test client ({args.rounds} scrapes)",
         table(["", "median", "p95"], [["whole scrape", ms(percentile(took, 50)),
                                        ms(percentile(took, 95))],
                                       ["in the database driver", ms(percentile(sql, 50)),
                                        ms(percentile(sql, 95))]])),
        ("Each statement", table(["statement", "per scrape", "median", "p95"], rows)),
        ("What it counted", "```\n" + "\n".join(shown) + "\n```"),
    ], ["The counts per status read whole indexes (posts by status, deliveries by status "
        "and next attempt); late posts, the oldest late one and the outbox backlog read "
        "partial indexes."])


if __name__ == "__main__":
    run_main(main)
