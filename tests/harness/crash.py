"""A Chromium of a test's own, to kill like a crash, and a typist with a stopwatch."""

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.harness.cluster import wait_for
from tests.harness.support import CHROMIUM, CHROMIUM_ARGS


@contextlib.contextmanager
def own_chromium(browser_type, profile: Path) -> Iterator[tuple[subprocess.Popen, object]]:
    """Start a Chromium in a process group of its own, connected over CDP with browser_type
    (Playwright's chromium); yield (the process, the browser). killed() ends it as a crash."""
    proc = subprocess.Popen([CHROMIUM, *CHROMIUM_ARGS, "--remote-debugging-port=0",
                             f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    port_file = profile / "DevToolsActivePort"
    try:
        wait_for(lambda: port_file.exists() and port_file.read_text().count("\n") >= 1, 30,
                 "the test's own Chromium to listen")
        browser = browser_type.connect_over_cdp(
            f"http://127.0.0.1:{port_file.read_text().split()[0]}")
        yield proc, browser
    finally:
        killed(proc)


def killed(proc: subprocess.Popen) -> float:
    """SIGKILL the browser and every process of its group (no pagehide, no beacon); return
    the moment (time.monotonic) it was sent."""
    at = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    return at


def type_for(tab, seconds: float) -> list[tuple[float, str]]:
    """Type words into tab's focused field for seconds; return (moment, all typed so far)."""
    typed, done, started = "", [], time.monotonic()
    while time.monotonic() - started < seconds:
        word = f"w{len(done)} "
        tab.keyboard.type(word, delay=15)  # a steady typist, never a pause of 2 s
        typed += word
        done.append((time.monotonic(), typed))
    return done


def seconds_lost(typing: list[tuple[float, str]], kept: str, killed_at: float) -> float:
    """Return how many seconds of typing before killed_at are not in kept (typed text that
    kept starts with counts as kept)."""
    moment = next((at for at, text in reversed(typing) if kept.startswith(text)), None)
    return killed_at - (moment if moment is not None else typing[0][0])
