"""The PostgreSQL backend's statements: poll, heartbeat, terms, events, eviction, views."""

import sqlalchemy as sa

from .base import ENDED_DETAIL
from .keys import KEYS

# The bigint key of an advisory lock taken with pg_advisory_lock(bigint).
KEY_SQL = "((l.classid::bigint << 32) | l.objid::bigint)"
ADVISORY = (
    "l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)

# A key's registered name ("publish"), or its number as text.
KEY_NAME_SQL = ("CASE k " + " ".join(f"WHEN {key.value} THEN '{key.name}'" for key in KEYS.values())
                + " ELSE k::text END")

# When the holder of a key last showed life: the one rule, read by the poll, the eviction
# and the status page alike (s: the key's leader_state row, a: the holder's pg_stat_activity).
# Its term's heartbeat when the term is its own (holder_pid is its backend); else what its
# lock session last did: a session granted the key that never recorded its term (frozen
# before its "acquired" committed, or a plain session), or one whose eviction failed after
# its term was cleared. Never unknown: a session always has a start.
RECORDED_SQL = "coalesce(s.holder_pid = a.pid, false)"
LAST_SIGN_SQL = (f"CASE WHEN {RECORDED_SQL} THEN s.heartbeat_at "
                 "ELSE greatest(a.state_change, a.query_start, a.backend_start) END")

# The holders of keys: each lock row with its session (pg_stat_activity's own function,
# for that one backend: a fraction of the view's cost) and its key's term.
HOLDER_FROM_SQL = f"""pg_locks l CROSS JOIN LATERAL pg_stat_get_activity(l.pid) a
LEFT JOIN leader_state s ON s.key = {KEY_SQL}
WHERE {ADVISORY}"""

# Try every key; for each key another session holds, that holder's age by the rule above
# (the longest silent, should a key ever be held by more than one) and whether it is the
# age of a recorded heartbeat. One scan of pg_locks for all the keys not taken.
POLL_SQL = f"""
WITH tried AS MATERIALIZED (
  SELECT k.key, pg_try_advisory_lock(k.key) AS got FROM unnest(%s::bigint[]) AS k(key)
), held AS MATERIALIZED (
  SELECT DISTINCT ON ({KEY_SQL}) {KEY_SQL} AS key, {LAST_SIGN_SQL} AS sign,
         {RECORDED_SQL} AS recorded
  FROM {HOLDER_FROM_SQL} AND {KEY_SQL} IN (SELECT key FROM tried WHERE NOT got)
  ORDER BY {KEY_SQL}, {LAST_SIGN_SQL}
)
SELECT t.key, t.got, extract(epoch FROM now() - h.sign)::float8, coalesce(st.term, 0),
       coalesce(h.recorded, false)
FROM tried t LEFT JOIN leader_state st ON st.key = t.key LEFT JOIN held h ON h.key = t.key
"""

# Wait in the server's lock queue, at most %s (lock_timeout, set for this statement only: the
# subquery runs first). The server grants the lock the instant its holder's session ends.
WAIT_SQL = """
SELECT pg_advisory_lock(%s) FROM (SELECT set_config('lock_timeout', %s, true) OFFSET 0) AS t
"""

# a step-down request counts only when it was meant for this session (the holder it names)
HEARTBEAT_SQL = f"""
UPDATE leader_state s SET heartbeat_at = now()
WHERE s.key = ANY(%s) AND s.holder_pid = pg_backend_pid()
  AND EXISTS (SELECT 1 FROM pg_locks l
              WHERE l.pid = pg_backend_pid() AND {ADVISORY} AND {KEY_SQL} = s.key)
RETURNING s.key, s.step_down_requested AND s.holder = %s, now()
"""

ACQUIRED_SQL = f"""
WITH prev AS MATERIALIZED (
  -- FOR UPDATE: an eviction still committing clears holder_pid first; wait and see it
  SELECT st.term, st.holder, st.heartbeat_at FROM leader_state st
  WHERE st.key = %(key)s AND st.holder_pid IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM leader_events e WHERE e.key = st.key AND e.term = st.term
                    AND e.kind IN ('released', 'lost', 'evicted', 'ended'))
  FOR UPDATE OF st
), ended AS (
  -- the last holder never said goodbye: its session ended (killed, cut off, timed out)
  INSERT INTO leader_events (key, kind, term, holder, detail, at)
  SELECT %(key)s, 'ended', term, holder, '{ENDED_DETAIL}',
         least(coalesce(heartbeat_at, now()), now() - interval '1 microsecond') FROM prev
), s AS (
  INSERT INTO leader_state AS st (key, term, holder, holder_pid, acquired_at, heartbeat_at,
                                  last_result, step_down_requested)
  -- read prev (and lock its row) first: FOR UPDATE skips a row this statement changed
  SELECT %(key)s, 1, %(holder)s, pg_backend_pid(), now(), now(), '', false
  FROM (SELECT count(*) FROM prev) AS first
  ON CONFLICT (key) DO UPDATE SET term = st.term + 1, holder = excluded.holder,
    holder_pid = excluded.holder_pid, acquired_at = now(), heartbeat_at = now(),
    step_down_requested = false
  RETURNING term)
INSERT INTO leader_events (key, kind, term, holder, detail, at)
SELECT %(key)s, 'acquired', term, %(holder)s, %(detail)s, now() FROM s RETURNING term
"""

EVENT_SQL = """
INSERT INTO leader_events (key, kind, term, holder, detail, at)
VALUES (%(key)s, %(kind)s,
        coalesce(%(term)s, (SELECT term FROM leader_state WHERE key = %(key)s), 0),
        %(holder)s, %(detail)s, coalesce(%(at)s, now()))
"""

# Close this session's term of %(key)s, if it still holds the key; unlocking comes after, in
# a statement of its own: a standby waiting in the lock queue is granted the key the instant
# it is unlocked, and its "acquired" must find this term closed (else it writes "ended").
RELEASED_SQL = f"""
WITH held AS MATERIALIZED (
  SELECT EXISTS (SELECT 1 FROM pg_locks l
                 WHERE l.pid = pg_backend_pid() AND {ADVISORY} AND {KEY_SQL} = %(key)s) AS yes
), st AS (UPDATE leader_state SET holder_pid = NULL, heartbeat_at = NULL
          WHERE key = %(key)s AND holder_pid = pg_backend_pid() AND (SELECT yes FROM held)),
   ev AS (INSERT INTO leader_events (key, kind, term, holder, detail, at)
          SELECT %(key)s, 'released', %(term)s, %(holder)s, %(detail)s, now()
          FROM held WHERE yes)
SELECT yes FROM held
"""

def evict_sql(victim: str, notify: bool = False) -> str:
    """Return the statement that ends the process whose lock session holds %(key)s.

    victim chooses the lock session. Every other connection of that session's process
    (its web pool and its scheduler's, named soloist-<role>:<instance>:<pid>:<nonce> with
    the session's nonce, from whatever address: a pooler, a unix socket) ends too, and
    none the process opened under a newer nonce after it came back: a frozen process's
    open transaction would otherwise keep row locks that its successor skips. In the same
    statement it records an "evicted" event for each of %(ours)s the session held
    (parameter %(detail)s), and with notify wakes the standbys. It also writes each such
    key's ops.leader_evicted alert to the outbox (once per term, see webapp.ops.alerts) and
    wakes the plugin leader to send it. It returns the session's application_name, every
    key it held and how many other connections ended; no row if victim matched nobody.
    """
    wake = ", pg_notify('soloist_handover', %(key)s::text)" if notify else ""
    return f"""
WITH victim AS MATERIALIZED (
  SELECT a.pid, a.application_name, a.client_addr,
         (SELECT array_agg({KEY_SQL.replace("l.", "h.")}) FROM pg_locks h
          WHERE h.pid = a.pid AND {ADVISORY.replace("l.", "h.")}) AS keys
  FROM {HOLDER_FROM_SQL} AND {KEY_SQL} = %(key)s AND a.pid <> pg_backend_pid() AND {victim}
), lost AS MATERIALIZED (
  SELECT k AS key, coalesce((SELECT term FROM leader_state WHERE key = k), 0) AS term,
         v.application_name AS holder, {KEY_NAME_SQL} AS name
  FROM victim v, unnest(v.keys) AS k WHERE k = ANY(%(ours)s)
), cleared AS (
  -- the terms end here, row-locked before any session is terminated: a standby granted a
  -- key the instant its holder goes waits for this statement and writes no "ended". A
  -- holder that outlives its termination is judged next by its session (LAST_SIGN_SQL)
  -- and evicted again at the next poll.
  UPDATE leader_state SET holder_pid = NULL, heartbeat_at = NULL
  WHERE key IN (SELECT key FROM lost) RETURNING key
), events AS (
  -- once per term and holder: a holder that outlived its eviction is evicted again
  INSERT INTO leader_events (key, kind, term, holder, detail, at)
  SELECT key, 'evicted', term, holder, %(detail)s, now() FROM lost
  WHERE NOT EXISTS (SELECT 1 FROM leader_events e WHERE e.key = lost.key
                    AND e.term = lost.term AND e.kind = 'evicted' AND e.holder = lost.holder)
), alerts AS (
  -- ops.leader_evicted (webapp.ops.alerts), once per evicted term however many evict it
  INSERT INTO outbox_events (topic, payload, instance, created_at, dedupe_key)
  SELECT 'ops.leader_evicted',
         json_build_object('key', name, 'key_value', key, 'term', term, 'holder', holder,
                           'detail', %(detail)s::text,
                           'by', current_setting('application_name'), 'at', now()),
         current_setting('application_name'), now(),
         -- the holder's name carries its session nonce: a term number a lossy failover
         -- handed out again names another occurrence
         'ops.leader_evicted:' || name || ':' || term || ':' || holder
  FROM lost ON CONFLICT (dedupe_key) DO NOTHING
), process AS MATERIALIZED (
  SELECT pg_terminate_backend(b.pid, 2000) AS ended
  FROM pg_stat_activity b, victim v
  WHERE b.pid <> v.pid AND b.pid <> pg_backend_pid() AND b.application_name LIKE 'soloist-%%'
    AND substr(b.application_name, strpos(b.application_name, ':'))
        = substr(v.application_name, strpos(v.application_name, ':'))
    AND b.datname = current_database()
)
SELECT v.application_name, v.keys, pg_terminate_backend(v.pid, 2000),
       (SELECT count(*) FROM process WHERE ended){wake}, pg_notify('soloist_wake', 'plugins')
FROM victim v, (SELECT count(*) FROM cleared) AS c
"""


# A holder silent for more than %(stale)s seconds by the one rule (LAST_SIGN_SQL).
EVICT_STALE_SQL = evict_sql(f"now() - {LAST_SIGN_SQL} > make_interval(secs => %(stale)s)")

# Every held key of keys: its holder's backend, whether the age is a recorded heartbeat's,
# and the age by the one rule, for the status page (its own clock: a request's transaction
# may have begun earlier).
HELD_SQL = sa.text(f"""
SELECT {KEY_SQL}, a.pid, {RECORDED_SQL},
       extract(epoch FROM statement_timestamp() - {LAST_SIGN_SQL})::float8
FROM {HOLDER_FROM_SQL} AND {KEY_SQL} = ANY(CAST(:keys AS bigint[]))
""")


def sessions_sql(versions: bool) -> sa.TextClause:
    """Return every lock session with the keys it holds and, when versions, the version and
    schema its process recorded (process_versions, by its boot id; NULL if none)."""
    recorded = "v.version, v.schema_head" if versions else "NULL, NULL"
    joined = ("LEFT JOIN process_versions v ON a.application_name LIKE 'soloist:%' "
              "AND v.boot = split_part(a.application_name, ':', -2)") if versions else ""
    return sa.text(f"""
SELECT a.pid, a.application_name, host(a.client_addr), a.backend_start,
       coalesce(array_agg({KEY_SQL} ORDER BY {KEY_SQL}) FILTER (WHERE l.pid IS NOT NULL),
                '{{}}') AS keys, {recorded}
FROM pg_stat_activity a
LEFT JOIN pg_locks l ON l.pid = a.pid AND {ADVISORY} AND {KEY_SQL} = ANY(CAST(:keys AS bigint[]))
{joined}
WHERE a.datname = current_database()
  AND (a.application_name LIKE 'soloist:%' OR l.pid IS NOT NULL)
GROUP BY a.pid, a.application_name, a.client_addr, a.backend_start, 6, 7
ORDER BY a.application_name, a.pid
""")


SESSIONS_SQL = sessions_sql(versions=True)
UNVERSIONED_SESSIONS_SQL = sessions_sql(versions=False)  # a database without process_versions
VERSIONS_KNOWN_SQL = sa.text("SELECT to_regclass('process_versions') IS NOT NULL")

# The code this process runs, recorded by its lock session when it connects; the rows of
# processes that have been gone an hour go on the way
VERSION_SQL = """
WITH gone AS (
  DELETE FROM process_versions p
  WHERE p.seen_at < now() - interval '1 hour'
    AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                    WHERE a.datname = current_database() AND a.application_name LIKE 'soloist%%'
                      AND split_part(a.application_name, ':', -2) = p.boot))
INSERT INTO process_versions (boot, instance, pid, version, source, schema_head, started_at,
                              seen_at)
VALUES (%(boot)s, %(instance)s, %(pid)s, %(version)s, %(source)s, %(schema)s, now(), now())
ON CONFLICT (boot) DO UPDATE SET seen_at = now(), version = EXCLUDED.version,
  source = EXCLUDED.source, schema_head = EXCLUDED.schema_head
"""

HOLDER_SQL = sa.text(f"""
SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE {ADVISORY} AND {KEY_SQL} = :key
""")

# Any connection of one process (soloist[-role]:<instance>:<pid>:<boot>:<nonce>), whatever
# its nonce: the process whose boot id is :boot is alive and reaches the database.
# pg_stat_activity is read once per transaction and kept: this drops the copy.
CLEAR_SNAPSHOT_SQL = sa.text("SELECT pg_stat_clear_snapshot()")

PROCESS_SQL = sa.text("""
SELECT EXISTS (SELECT 1 FROM pg_stat_activity
               WHERE datname = current_database() AND application_name LIKE 'soloist%'
                 AND split_part(application_name, ':', -2) = :boot)
""")

# The holder the admin confirmed, by name; the standbys are woken at once.
EVICT_SQL = evict_sql("a.application_name = %(expected)s", notify=True)
