"""A database slow on every outbox insert, and the publish leader's work all due at once:
shared by tests/test_long_ticks.py and bench/long_ticks.py."""

SLOW_OUTBOX_SQL = """
CREATE OR REPLACE FUNCTION slow_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep({seconds}); RETURN NULL; END $$;
CREATE TRIGGER slow_outbox AFTER INSERT ON outbox_events FOR EACH {each}
EXECUTE FUNCTION slow_outbox();
"""
UNDO_SQL = ("DROP TRIGGER IF EXISTS slow_outbox ON outbox_events; "
            "DROP FUNCTION IF EXISTS slow_outbox()")

# 1,500 posts due, and as many units of each other kind of the publish leader's work as
# one batch holds (a takedown, a scheduled change of a live post): three slow batches back
# to back were one tick, past the stale bound, before the tick worked to a budget
DUE_SQL = """
INSERT INTO posts (title, slug, body, status, publish_at, published_at, unpublish_at, version,
                   created_at, updated_at)
SELECT 'Post ' || i, k || '-' || i, '', CASE k WHEN 'p' THEN 'scheduled' ELSE 'published' END,
       now() - interval '1 hour', CASE k WHEN 'p' THEN NULL ELSE now() - interval '1 hour' END,
       CASE k WHEN 't' THEN now() END, 1, now(), now()
FROM (VALUES ('p', %(posts)s), ('t', %(batch)s), ('c', %(batch)s)) AS kinds (k, n),
     generate_series(1, n) AS i
"""
CHANGES_SQL = """
INSERT INTO scheduled_changes (post_id, title, body, apply_at, base_version, base_digest,
                               author, created_at, updated_at)
SELECT id, title, 'changed', now(), version, '', '', now(), now() FROM posts
WHERE slug LIKE 'c-%'
"""

# each kind's units done once: the post in its new state with one outbox row of its topic
ONCE_SQL = """
SELECT count(*) FILTER (WHERE k = 'p' AND status = 'published' AND done = 1),
       count(*) FILTER (WHERE k = 't' AND status = 'unpublished' AND done = 1),
       count(*) FILTER (WHERE k = 'c' AND body = 'changed' AND done = 1),
       (SELECT count(*) FROM outbox_events WHERE topic LIKE 'post.%%')
FROM (SELECT left(p.slug, 1) AS k, p.status, p.body,
             (SELECT count(*) FROM outbox_events o WHERE o.post_id = p.id AND o.topic =
              CASE left(p.slug, 1) WHEN 'p' THEN 'post.published'
                   WHEN 't' THEN 'post.unpublished' ELSE 'post.updated' END) AS done
      FROM posts p) AS units
"""


def slow_outbox(conn, seconds: float, each: str = "STATEMENT") -> None:
    """Make every outbox INSERT statement (each="STATEMENT") or row ("ROW") take seconds."""
    conn.execute(SLOW_OUTBOX_SQL.format(seconds=seconds, each=each))


def make_due(conn, posts: int, batch: int) -> None:
    """Make posts publications, and batch takedowns and scheduled changes, due at one moment
    (one transaction), and wake the publish leader."""
    with conn.transaction():
        conn.execute(DUE_SQL, {"posts": posts, "batch": batch})
        conn.execute(CHANGES_SQL)
        conn.execute("SELECT pg_notify('soloist_wake', 'publish')")


def units_done_once(conn) -> tuple[int, int, int, int]:
    """Return (publications, takedowns, changes) done exactly once, and the post events."""
    return conn.execute(ONCE_SQL).fetchone()
