"""A gunicorn master clears the metrics directories of masters that died, and only those:
known by a lock their owner holds for its life, not by a pid (containers share pids)."""

import subprocess
import sys
import tempfile

from webapp import gunicorn_conf

HOLD = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
        "fcntl.flock(fd, fcntl.LOCK_SH); print('held', flush=True); sys.stdin.read()")


def test_a_live_masters_directory_stays_whatever_its_pid_and_a_dead_ones_goes(
        tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # pid 1 and a pid this namespace has not got: a live master in another container
    live = tmp_path / "soloist-metrics-1-live"
    elsewhere = tmp_path / "soloist-metrics-4194999-elsewhere"
    dead = tmp_path / "soloist-metrics-4194998-dead"  # its owner gone, nobody holds it
    old_dead = tmp_path / "soloist-metrics-4194997-old"  # made before the lock: by its pid
    for directory in (live, elsewhere, dead, old_dead):
        directory.mkdir()
    (dead / gunicorn_conf.HELD).touch()
    owners = [subprocess.Popen([sys.executable, "-c", HOLD, str(d / gunicorn_conf.HELD)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
              for d in (live, elsewhere)]
    try:
        assert [o.stdout.readline().strip() for o in owners] == ["held", "held"]
        gunicorn_conf._remove_dead_masters_directories()
        assert live.exists() and elsewhere.exists()
        assert not dead.exists() and not old_dead.exists()
    finally:
        for owner in owners:
            owner.stdin.close()
            owner.wait(10)
            owner.stdout.close()
    gunicorn_conf._remove_dead_masters_directories()  # their owners have exited now
    assert not live.exists() and not elsewhere.exists()
