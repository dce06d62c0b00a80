"""The scheduler's sleep: until a deadline, a NOTIFY on the lock session, or an interrupt."""

import contextlib
import os
import selectors


class Waiter:
    """Sleep on the lock session's socket and a self-pipe, with selectors (any fd number)."""

    def __init__(self) -> None:
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def interrupt(self) -> None:
        """Wake a wait() in progress from another thread."""
        with contextlib.suppress(BlockingIOError):  # a full pipe wakes the waiter all the same
            os.write(self._wake_w, b"x")

    def wait(self, locks, timeout: float) -> list:
        """Sleep up to timeout; return early with the lock session's notifications."""
        notes = locks.notifies()
        if notes:
            return notes
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_r, selectors.EVENT_READ)
            fileno = locks.fileno()
            if fileno is not None:
                selector.register(fileno, selectors.EVENT_READ)
            ready = selector.select(max(timeout, 0))
        self._drain_pipe()
        return locks.notifies() if ready and fileno is not None else []

    def _drain_pipe(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass

    def close(self) -> None:
        """Close the pipe."""
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
