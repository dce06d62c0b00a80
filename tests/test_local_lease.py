"""One candidate per instance: the lease file its workers agree on (webapp.leadership.local).

Two LocalLease objects in one process stand for two workers: flock is held by an open file,
so they exclude each other exactly as two processes do.
"""

import os
import time

from tests.harness.cluster import wait_for
from webapp.leadership.local import LocalLease, lease_path

DB = "postgresql://root:s3cret@127.0.0.1:5432/soloist"


def leases(tmp_path, count: int = 2, stale: float = 10.0) -> list[LocalLease]:
    path = lease_path(str(tmp_path), DB, "web.1")
    return [LocalLease(path, stale) for _ in range(count)]


def test_one_worker_is_the_candidate_and_a_sibling_takes_over_when_it_lets_go(tmp_path):
    first, second = leases(tmp_path)
    assert first.take() and first.held
    assert not second.take() and not second.held
    assert second.holder()[0] == os.getpid()
    first.release()  # as the kernel does when the worker exits or is killed
    assert second.take() and not first.take()


def test_a_sibling_breaks_the_lease_of_a_candidate_that_stopped_stamping_it(tmp_path):
    frozen, sibling, third = leases(tmp_path, 3, stale=0.3)
    assert frozen.take()
    assert not sibling.take()  # stamped just now: alive
    wait_for(sibling.take, 5, "the sibling to break the lease no longer stamped")
    assert sibling.held
    assert not third.take()  # the new lease is fresh and held
    assert not frozen.still_held() and not frozen.held  # on waking it learns it lost
    sibling.beat()
    assert sibling.still_held()


def test_a_candidate_that_stamps_its_lease_keeps_it(tmp_path):
    candidate, sibling = leases(tmp_path, stale=0.5)
    assert candidate.take()
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # three stale periods, stamped all along
        candidate.beat()
        assert not sibling.take()
        time.sleep(0.05)  # the stamping cadence under test, not a wait for something
    assert candidate.still_held()


def test_each_instance_and_database_has_its_own_lease_and_no_password_in_its_name(tmp_path):
    here = str(tmp_path)
    names = {lease_path(here, DB, "web.1"), lease_path(here, DB, "web.2"),
             lease_path(here, DB.replace("/soloist", "/other"), "web.1")}
    assert len(names) == 3
    assert lease_path(here, DB, "web.1") == lease_path(here, DB.replace("s3cret", "new"),
                                                      "web.1")
    assert not any("s3cret" in name for name in names)
    assert os.path.basename(lease_path(here, DB, "../../etc x")).startswith(
        "soloist-candidate-.._.._etc_x-")


HOUR = 3600.0


def test_a_wall_clock_step_neither_deposes_a_live_candidate_nor_keeps_a_frozen_one(tmp_path):
    candidate, sibling = leases(tmp_path, stale=0.3)
    assert candidate.take()
    for step in (-HOUR, HOUR):  # NTP steps the clock back or forth: the file's times move
        moved = time.time() + step
        os.utime(candidate.path, (moved, moved))
        assert not sibling.take(), f"a candidate stamped just now deposed by a {step:+.0f} s step"
        pid, age = sibling.holder()
        assert pid == os.getpid() and 0 <= age < 0.3
    ahead = time.time() + HOUR
    os.utime(candidate.path, (ahead, ahead))  # its mtime says "just now" for an hour
    wait_for(sibling.take, 5, "the sibling to break a lease no longer stamped")
    assert not candidate.still_held()


def test_a_sibling_reads_how_long_the_candidate_has_been_offline(tmp_path):
    candidate, sibling = leases(tmp_path)
    assert candidate.take()
    assert sibling.read()[2] is None
    candidate.say_offline(30.0)
    moved = time.time() - HOUR
    os.utime(candidate.path, (moved, moved))
    pid, age, offline = sibling.read()
    assert pid == os.getpid() and age < 1 and 29.9 < offline < 31
    candidate.say_offline(0.0)
    assert sibling.read()[2] is None
