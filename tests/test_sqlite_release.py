"""SQLite mode: a released term is closed before the next holder can take the key."""

import contextlib
import sqlite3
import threading

from tests.harness.cluster import wait_for
from webapp.leadership.files import FileLockSession
from webapp.leadership.keys import PUBLISH

KEY = PUBLISH.value


def test_the_next_holder_finds_the_released_term_closed(sqlite_url):
    old, new = FileLockSession(sqlite_url, "old"), FileLockSession(sqlite_url, "new")
    assert old.try_lock(KEY)
    term = old.record_acquired(KEY)
    writing = threading.Event()
    real_db = old._db

    @contextlib.contextmanager
    def noted_db():  # says when the release starts writing its record
        writing.set()
        with real_db() as conn:
            yield conn

    old._db = noted_db
    # another worker's write transaction: the release's record waits for it
    other = sqlite3.connect(old.db_file, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    releasing = threading.Thread(target=old.release, args=(KEY, term, "graceful stop"))
    releasing.start()
    try:
        wait_for(writing.is_set, 10, "the release to start writing its record")
        assert not new.try_lock(KEY), "the key came free before its release was recorded"
    finally:
        other.execute("ROLLBACK")
        other.close()
        releasing.join(20)
    assert new.try_lock(KEY)
    assert new.record_acquired(KEY) == term + 1
    with contextlib.closing(sqlite3.connect(old.db_file)) as conn:
        kinds = conn.execute("SELECT kind, term, holder FROM leader_events ORDER BY id").fetchall()
    assert kinds == [("acquired", term, old.name), ("released", term, old.name),
                     ("acquired", term + 1, new.name)]
    new.close()
