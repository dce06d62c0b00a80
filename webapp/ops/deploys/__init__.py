"""Deploys: the release phase records each one; the status page reports on each window.

A deploy's window runs from its record until the next deploy, at most WINDOW (the
rolling restart that follows a release happens in it). For each window the report
says how many posts fell due, their publish lag (p50, max), how many were late or
missed, and the longest time each key had no leader.
"""

from .record import recent_deploys, record_deploy
from .report import WINDOW, DeployWindow, report
from .timeline import Timeline, build_timeline

__all__ = ["WINDOW", "DeployWindow", "Timeline", "build_timeline", "record_deploy",
           "recent_deploys", "report"]
