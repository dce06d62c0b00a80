"""The editors' post list at 100,000 posts: filters, title search, keyset pages.

Fills a fresh PostgreSQL database with POSTS posts (statuses mixed, 2 kB bodies, titles
from a small vocabulary plus a few rare words), then times each page through the Flask
test client signed in as an editor: ROUNDS requests per page, median and p95, template
rendering included. Then it drops the 0003 indexes (status+id, title trigram) and times
the same pages again, to show what they buy. Before that it times the history pages of one
post with REVISIONS versions of about 5 kB (inserted into post_revisions directly): the
newest page, a page halfway, and the compare page of the oldest against the newest.

    .venv/bin/python bench/posts_list.py [--posts 100000] [--rounds 15] [--revisions 1000]
        [--history-rounds 50]
"""

import argparse
import random
import time

from common import Bench, log, ms, percentile, report, run_main, table

WORDS = ["garden", "river", "market", "winter", "summer", "harbour", "station", "museum",
         "bridge", "valley", "forest", "island", "castle", "meadow", "canyon", "desert",
         "glacier", "lantern", "orchard", "village"]

FILL_SQL = """
INSERT INTO posts (title, slug, body, status, publish_at, published_at, version,
                   created_at, updated_at)
SELECT initcap(w[1 + i %% 20]) || ' ' || w[1 + (i * 7) %% 20] || ' notes ' || i
         || CASE WHEN i %% 20000 = 0 THEN ' zanzibar' ELSE '' END,
       'bench-' || i, repeat('Lorem ipsum dolor sit amet. ', 70),
       (ARRAY['published', 'published', 'published', 'published', 'draft', 'draft', 'draft',
              'scheduled', 'scheduled', 'unpublished'])[1 + s],
       CASE WHEN s IN (7, 8) THEN now() + make_interval(mins => i %% 5000) END,
       CASE WHEN s < 4 THEN now() - make_interval(mins => %(n)s - i) END,
       1, now() - make_interval(mins => %(n)s - i), now() - make_interval(mins => %(n)s - i)
FROM (SELECT i, abs(hashtext('status' || i)) %% 10 AS s
      FROM generate_series(1, %(n)s) AS i) AS numbered,
     (SELECT %(words)s::text[] AS w) AS vocabulary
"""

# one post with REVISIONS versions: revision r has 10 + r/250 paragraphs of about 420
# characters (about 5 kB in all), paragraph k saying which of its k * r / REVISIONS drafts it
# is, so the oldest and the newest differ in a word of every paragraph and in 4 more
HISTORY_POST_SQL = """
INSERT INTO posts (title, slug, body, status, publish_at, published_at, version,
                   created_at, updated_at)
VALUES (%(title)s, %(slug)s, '', 'published', now() - interval '1 year',
        now() - interval '1 year', %(n)s, now() - interval '1 year', now())
RETURNING id
"""

HISTORY_SQL = """
INSERT INTO post_revisions (post_id, title, body, author, reason, was_live, created_at)
SELECT %(post)s, 'A post with a long history' || CASE WHEN r %% 100 = 0 THEN ', take ' || r
                                                      ELSE '' END,
       (SELECT string_agg(format('Paragraph %%s, draft %%s. %%s', k, k * r / %(n)s,
                                 repeat('Lorem ipsum dolor sit amet, consectetur adipiscing. ',
                                        8)), E'\n\n' ORDER BY k)
        FROM generate_series(1, 10 + r / 250) AS k),
       'bench@example.com', CASE WHEN r = 1 THEN 'create' ELSE 'edit' END, r %% 10 = 0,
       now() - make_interval(hours => %(n)s - r)
FROM generate_series(1, %(n)s) AS r ORDER BY r
RETURNING id
"""

DROP_INDEXES_SQL = "DROP INDEX ix_posts_title_trgm; DROP INDEX ix_posts_status_id"


def pages(deep_before: int) -> list[tuple[str, str]]:
    """Return (what, url) for every page timed."""
    return [
        ("list, all statuses, first page", "/admin/posts/"),
        ("list, status=draft", "/admin/posts/?status=draft"),
        ("list, status=unpublished", "/admin/posts/?status=unpublished"),
        (f"list, deep keyset page (before={deep_before})",
         f"/admin/posts/?before={deep_before}"),
        ("list, deep keyset page, status=draft", f"/admin/posts/?status=draft&before="
                                                 f"{deep_before}"),
        ("search, common word (q=garden, ~10 %)", "/admin/posts/?q=garden"),
        ("search, rare word (q=zanzibar, 5 posts)", "/admin/posts/?q=zanzibar"),
        ("search, no match (q=xylophone)", "/admin/posts/?q=xylophone"),
        ("search + status (q=harbour, published)", "/admin/posts/?q=harbour&status=published"),
        ("search + status, rare (q=zanzibar, draft)", "/admin/posts/?q=zanzibar&status=draft"),
        ("search, two letters (q=ga, no trigram)", "/admin/posts/?q=ga"),
        ("search, in every title (q=notes)", "/admin/posts/?q=notes"),
        ("polled rows fragment", "/admin/posts/rows"),
        ("calendar, this month (8 posts a day shown, all counted)", "/admin/calendar/"),
        ("calendar, this week, timers' runs too", "/admin/calendar/?view=week&timers=1"),
        ("dashboard", "/admin/"),
        ("public home, page 1", "/"),
        ("public home, page 1000 (offset 20,000)", "/?page=1000"),
        ("public feed.xml", "/feed.xml"),
    ]


class SqlClock:
    """Adds up the time the app's engine spends in the database (cursor execute to return)."""

    def __init__(self, engine) -> None:
        from sqlalchemy import event

        self.total = 0.0
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, conn, *_args) -> None:
        conn.info.setdefault("started", []).append(time.perf_counter())

    def _after(self, conn, *_args) -> None:
        self.total += time.perf_counter() - conn.info["started"].pop()


def history_post(bench: Bench, n: int) -> tuple[int, int, int, int]:
    """Add a published post with n revisions (its text the newest); return (post id,
    oldest revision, newest revision, mean body length)."""
    post = bench.query(HISTORY_POST_SQL, {"title": "A post with a long history",
                                          "slug": "bench-history", "n": n})[0][0]
    ids = [r[0] for r in bench.query(HISTORY_SQL, {"post": post, "n": n})]
    bench.execute("UPDATE posts SET body = r.body FROM post_revisions r "
                  "WHERE posts.id = %s AND r.id = %s", (post, ids[-1]))
    bench.execute("ANALYZE post_revisions")
    mean = bench.query("SELECT avg(length(body))::int FROM post_revisions")[0][0]
    return post, ids[0], ids[-1], mean


def one_paragraph_post(bench: Bench) -> tuple[int, int, int]:
    """Add a post whose body is one paragraph of about 5 kB, in two versions with one word
    in ten changed (prose-like: a tenth of the words from ten common ones); return (post id,
    older revision, newer revision)."""
    rng = random.Random(5)
    common = ["the", "of", "and", "a", "to", "in", "is", "that", "for", "it"]
    vocabulary = ["".join(rng.choice("bcdfglmnprstv") + rng.choice("aeiou")
                          for _ in range(rng.randint(1, 4))) for _ in range(2000)]
    words = [rng.choice(common if rng.random() < 0.3 else vocabulary) for _ in range(850)]
    edited = [rng.choice(vocabulary) if i % 10 == 5 else w for i, w in enumerate(words)]
    post = bench.query(HISTORY_POST_SQL, {"title": "One long paragraph",
                                          "slug": "bench-paragraph", "n": 2})[0][0]
    ids = [bench.query("INSERT INTO post_revisions (post_id, title, body, author, reason, "
                       "was_live, created_at) VALUES (%s, 'One long paragraph', %s, '', 'edit', "
                       "false, now()) RETURNING id", (post, " ".join(text) + "."))[0][0]
           for text in (words, edited)]
    return post, ids[0], ids[1]


def history_pages(post: int, oldest: int, newest: int, n: int,
                  paragraph: tuple[int, int, int]) -> list[tuple[str, str]]:
    """Return (what, url) for the history pages timed."""
    return [
        (f"history, newest 50 of {n:,} versions", f"/admin/posts/{post}/history"),
        (f"history, a page halfway (before the {n // 2}th)",
         f"/admin/posts/{post}/history?before={oldest + n // 2}"),
        ("compare the oldest with the newest (word-marked diff)",
         f"/admin/posts/{post}/compare?a={oldest}&b={newest}"),
        ("compare two versions of a 5 kB one-paragraph body, 1 word in 10 changed",
         f"/admin/posts/{paragraph[0]}/compare?a={paragraph[1]}&b={paragraph[2]}"),
    ]


def time_pages(client, clock: SqlClock, urls: list[tuple[str, str]],
               rounds: int) -> dict[str, tuple]:
    """Return {url: (median ms, p95 ms, median SQL ms, status)} over rounds after a warm-up."""
    results = {}
    for _what, url in urls:
        response = client.get(url)
        took, sql = [], []
        for _ in range(rounds):
            clock.total = 0.0
            started = time.perf_counter()
            response = client.get(url)
            took.append((time.perf_counter() - started) * 1000)
            sql.append(clock.total * 1000)
        results[url] = (percentile(took, 50), percentile(took, 95), percentile(sql, 50),
                        response.status_code)
    return results


def signed_in_client(app):
    from tests.harness.support import AuthActions

    client = app.test_client()
    AuthActions(client).login("editor", email="bench@example.com")
    return client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--revisions", type=int, default=1000, help="of the history post")
    parser.add_argument("--history-rounds", type=int, default=50)
    args = parser.parse_args()
    from tests.harness.support import make_app
    from webapp.extensions import db

    with Bench("posts_list") as bench:
        log(f"inserting {args.posts} posts")
        started = time.monotonic()
        bench.execute(FILL_SQL, {"n": args.posts, "words": list(WORDS)})
        bench.execute("VACUUM ANALYZE posts")
        log(f"inserted in {time.monotonic() - started:.1f} s; adding a post with "
            f"{args.revisions:,} revisions")
        post, oldest, newest, mean_body = history_post(bench, args.revisions)
        paragraph = one_paragraph_post(bench)
        app = make_app(bench.url)
        with app.app_context():
            clock = SqlClock(db.engine)
        client = signed_in_client(app)
        urls = pages(deep_before=args.posts // 50)
        log("timing with the 0003 indexes")
        indexed = time_pages(client, clock, urls, args.rounds)
        log("timing the history pages")
        versions = history_pages(post, oldest, newest, args.revisions, paragraph)
        kept = time_pages(client, clock, versions, args.history_rounds)
        bench.execute(DROP_INDEXES_SQL)
        bench.execute("ANALYZE posts")
        log("timing without them")
        plain = time_pages(client, clock, urls, args.rounds)
        with app.app_context():
            db.engine.dispose()
    rows = [[what, indexed[url][3], ms(indexed[url][0]), ms(indexed[url][1]),
             ms(indexed[url][2]), ms(plain[url][0]), ms(plain[url][2])] for what, url in urls]
    history = [[what, kept[url][3], ms(kept[url][0]), ms(kept[url][1]), ms(kept[url][2]),
                "p95 ≤ 100 ms", "yes" if kept[url][1] <= 100 else "**no**"]
               for what, url in versions]
    report(f"Post list at {args.posts:,} posts", [(
        f"Response time through the Flask test client ({args.rounds} requests each)",
        table(["page", "status", "median", "p95", "SQL (median)", "median, no 0003 indexes",
               "SQL, no 0003 indexes"], rows)), (
        f"A post's history at {args.revisions:,} versions, bodies {mean_body:,} characters "
        f"on average ({args.history_rounds} requests each)",
        table(["page", "status", "median", "p95", "SQL (median)", "target", "met"], history))], [
        "SQL = time in the database driver per request (the part the indexes change); the "
        "rest is Python: routing, the session, template rendering.",
        "The no-index run comes second, on a warm cache. Statuses here are common (10-40 %); "
        "the (status, id) index matters for a rare one (say 20 scheduled posts in 100,000), "
        "where a newest-first scan of the primary key would read the whole table.",
        "Each list page also counts posts per status for the filter tabs, capped at 10,000 a "
        "status (shown as 10,000+), so the count reads at most 40,004 index entries.",
        "Keyset pages (before=<id>) cost the same at any depth; the public home page uses "
        "page numbers (OFFSET over the (status, published_at) index).",
    ])


if __name__ == "__main__":
    run_main(main)
