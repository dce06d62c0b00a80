"""This process's one scheduler: started after the fork, stopped at exit, told of SIGTERM.

gunicorn calls start() in post_worker_init and stop() in worker_exit; `flask run`
starts it through init_app(). request_stop() is what a SIGTERM handler calls.
"""

import logging
import os

import click
from flask import Flask
from werkzeug.serving import is_running_from_reloader

from . import engines
from .runner import Scheduler

log = logging.getLogger("soloist.scheduler")

_current: Scheduler | None = None
_current_pid: int | None = None


def start(app: Flask) -> Scheduler | None:
    """Start this process's scheduler (once per process) unless it is disabled, on engines
    of its own (webapp.scheduling.engines) made from app's settings."""
    global _current, _current_pid
    if not app.config["SCHEDULER_ENABLED"]:
        log.info("scheduler disabled by SCHEDULER_ENABLED")
        return None
    if _current is not None and _current_pid == os.getpid() and _current.alive:
        return _current
    _current, _current_pid = Scheduler(app, engines=engines.build(app.config)), os.getpid()
    _current.start()
    return _current


def request_stop() -> None:
    """Start handing this process's keys over at once (from a SIGTERM handler)."""
    if _current is not None and _current_pid == os.getpid():
        _current.request_stop()


def stop(timeout: float = 20.0) -> bool:
    """Stop this process's scheduler, handing its keys over; it is not current any more."""
    global _current
    if _current is None or _current_pid != os.getpid():
        return True
    stopped, _current = _current, None
    return stopped.stop(timeout)


def current() -> Scheduler | None:
    """Return this process's running scheduler, if any."""
    return _current if _current_pid == os.getpid() else None


def init_app(app: Flask) -> None:
    """Start a scheduler when the app is served by `flask run` (one process)."""
    if _launched_by_flask_run(app):
        start(app)


def _launched_by_flask_run(app: Flask) -> bool:
    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.info_name != "run":
        return False
    reload = ctx.params.get("reload")
    if reload is None:
        reload = app.debug
    # With the reloader the parent only watches files; the child serves.
    return not reload or is_running_from_reloader()
