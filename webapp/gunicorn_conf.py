"""gunicorn settings: start the scheduler after fork, hand leadership over on exit.

Read by `gunicorn -c webapp/gunicorn_conf.py "webapp:create_app()"` (see Procfile).
"""

import fcntl
import os
import queue
import re
import shutil
import signal
import tempfile
from pathlib import Path

from gunicorn.glogging import Logger

from webapp.config import metrics_dir, read_dotenv, server_settings, set_metrics_dir

read_dotenv()  # a local .env, as `flask run` reads it; the real environment wins
_settings = server_settings()
_instance = _settings["INSTANCE_NAME"]

bind = f"0.0.0.0:{_settings['PORT']}"
workers = _settings["WEB_CONCURRENCY"]
worker_class = "gthread"
threads = _settings["GUNICORN_THREADS"]
preload_app = False  # each worker builds its app (and lock session) after the fork
graceful_timeout = 25  # below Heroku's 30 s between SIGTERM and SIGKILL
timeout = 30
keepalive = 5
control_socket_disable = True  # several instances may share one host (and one $HOME)
accesslog = "-"
errorlog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms'
PREVIEW_TOKEN = re.compile(r"(/preview/)[^\s/?]+")


class AccessLogger(Logger):
    """gunicorn's logger, writing a preview link's token as "…": a log line is no link."""

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        for name in ("r", "U"):  # the request line and the path
            atoms[name] = PREVIEW_TOKEN.sub(r"\1…", atoms[name])
        return atoms


logger_class = AccessLogger

_format = f"%(asctime)s [{_instance}] [%(process)d] %(levelname)s %(name)s: %(message)s"
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"soloist": {"format": _format}},
    "handlers": {
        "stdout": {"class": "logging.StreamHandler", "formatter": "soloist",
                   "stream": "ext://sys.stdout"},
    },
    "root": {"level": "INFO", "handlers": ["stdout"]},
    "loggers": {
        "gunicorn.error": {"level": "INFO", "handlers": ["stdout"], "propagate": False},
        "gunicorn.access": {"level": "INFO", "handlers": ["stdout"], "propagate": False},
    },
}


def when_ready(server):
    """Give this instance's workers a fresh directory for their Prometheus histograms.

    Set once the master listens (a failed bind leaves nothing behind) and before any
    worker is forked and imports prometheus_client, which picks multiprocess mode from
    the environment; GET /metrics adds up every worker's files.
    """
    _remove_dead_masters_directories()
    made = Path(tempfile.mkdtemp(prefix=f"soloist-metricsnew-{os.getpid()}-"))
    _hold(made)  # held before another master's clean-up can see it under its final name
    path = str(made.with_name(made.name.replace("soloist-metricsnew-", "soloist-metrics-")))
    made.rename(path)
    set_metrics_dir(path)
    _import_code(Path(path))


# A metrics directory's owner holds a flock on this file in it for its life (its workers
# inherit the descriptor): the kernel lets go when the last of them is gone. Pids say
# nothing across PID namespaces (containers sharing /tmp): every master is pid 1 there,
# and another namespace's pids look dead, so a pid test removed live instances' metrics.
HELD = ".held"
_held_fd: list[int] = []


def _hold(directory: Path) -> None:
    fd = os.open(directory / HELD, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    _held_fd.append(fd)


# The code each worker runs, imported once in the master before it forks: a worker (and
# every respawned one) then starts with it in memory and spends its boot on its own apps,
# engines and lock session only (preload_app stays off: no app is made in the master).
# Every module of webapp, and with them every library they use. None of it does anything
# at import (DESIGN.md: no threads, no I/O); the metrics module makes its histograms, whose
# values are files named after the process, on first use in each worker; Flask-Migrate and
# webauthn are imported where they are used, not here. On a 2-core machine a worker boots
# in 0.16-0.19 s of CPU (0.42-0.48 with the libraries only imported here, 1.0-1.2 with
# nothing) and the master in the same 1.1-1.3 s; on a faster one, where the master took
# 0.67-0.76 s with Flask-Migrate and webauthn, it takes 0.56-0.62 s (bench/boot_cost.py).
# A SIGHUP reload therefore keeps the old code: deploys replace processes.
def _import_code(metrics_dir: Path) -> None:
    import importlib
    import pkgutil

    import webapp

    for module in pkgutil.walk_packages(webapp.__path__, "webapp."):
        if module.name != "webapp.gunicorn_conf":  # this file, which gunicorn read
            importlib.import_module(module.name)
    if any(p.name != HELD for p in metrics_dir.iterdir()):  # would count for the master
        raise RuntimeError("importing the app in the master made a Prometheus metric")


def _remove_dead_masters_directories() -> None:
    """Remove the metrics directories of masters that were killed before on_exit ran.

    Known dead when nobody holds the directory's HELD file; a directory without one (made
    before it existed) by its master's pid, as before.
    """
    for path in Path(tempfile.gettempdir()).glob("soloist-metrics-*-*"):
        if not _held(path):
            shutil.rmtree(path, ignore_errors=True)


def _held(directory: Path) -> bool:
    """Return whether a live process still owns a metrics directory."""
    try:
        fd = os.open(directory / HELD, os.O_RDONLY)
    except FileNotFoundError:
        return _pid_alive(directory.name.split("-")[2])
    except OSError:
        return True  # not ours to judge
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _pid_alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (ValueError, PermissionError):
        return True
    return True


def child_exit(server, worker):
    """Drop a dead worker's live gauges (its histogram counts stay: they only add up)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, metrics_dir())


def on_exit(server):
    """Remove the instance's metrics directory."""
    shutil.rmtree(metrics_dir() or "", ignore_errors=True)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)


def post_fork(server, worker):
    """Keep a SIGTERM that reaches a worker still booting, before gunicorn's own handlers.

    Until the worker installs them (init_signals), it runs the master's, which only queue
    the signal for a master loop the child never runs: a worker respawned as the instance
    is told to stop (a deploy just after a crash) missed its SIGTERM and ran on until
    graceful_timeout's SIGKILL, 25 s (seen as 27 s teardowns in the fleet tests).
    """
    def stop_when_booted(signum, frame):
        worker.alive = False  # post_worker_init starts no scheduler; run() returns at once

    for signum in STOP_SIGNALS:
        signal.signal(signum, stop_when_booted)
    # One that came between the fork and the line above ran the master's handler, which put
    # it on this process's copy of the master's queue (seen: a worker respawned as the
    # instance was stopped became its candidate, and the stop waited 25 s for its SIGKILL).
    while True:
        try:
            queued = server.SIG_QUEUE.get_nowait()
        except queue.Empty:
            break
        if queued in STOP_SIGNALS:
            worker.alive = False


def post_worker_init(worker):
    """Start this worker's scheduler thread, after the fork; hand over first on SIGTERM."""
    from webapp.scheduling import process

    if not worker.alive:  # told to stop while it booted (a deploy, a restart): no candidacy
        return
    process.start(worker.wsgi)
    # gunicorn's own SIGTERM handler lets the worker finish its requests, and only then
    # calls worker_exit: a 20 s upload would keep the keys 20 s. Hand them over first.
    graceful = signal.getsignal(signal.SIGTERM)

    def hand_over_then_drain(signum, frame):
        process.request_stop()
        if callable(graceful):
            graceful(signum, frame)

    signal.signal(signal.SIGTERM, hand_over_then_drain)


def worker_exit(server, worker):
    """Hand this worker's keys over before it exits, well inside graceful_timeout."""
    from webapp.scheduling import process

    process.stop(timeout=graceful_timeout - 5)
