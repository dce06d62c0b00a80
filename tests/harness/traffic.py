"""Real traffic for fault tests: slow uploads, aimed requests, web load, a webhook receiver.

- SlowUpload: a POST whose body trickles in over a raw socket, like a phone on a bad
  network; `serving_pid` finds which gunicorn worker accepted it (from /proc).
- ApiRequest: one JSON API request on a socket of its own, connected before it is sent, so
  a test can see which worker accepted the connection first (and aim it at one worker).
- WebLoad: processes x threads issuing real keep-alive HTTP requests, for a bounded time.
- WebhookReceiver: tests/harness/receiver.Receiver answering HTTP 500 now and then, checking
  each delivery's signature.
"""

import contextlib
import http.client
import json
import multiprocessing
import os
import random
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from standardwebhooks import Webhook, WebhookVerificationError

from tests.harness.receiver import Receiver, Request

# --- slow uploads ---------------------------------------------------------------------------


class SlowUpload:
    """A JSON POST to /api/posts whose body arrives a byte at a time over seconds.

    gunicorn's gthread worker hands a request to a thread once its headers are in, and the
    API reads the whole body before its token query: so the upload holds one worker thread
    for its whole length, and a database connection only once the body is in.
    """

    def __init__(self, port: int, token: str, seconds: float, title: str = "slow upload") -> None:
        self.port = port
        self.seconds = seconds
        self.title = f"{title} {os.getpid()}-{time.monotonic_ns()}"
        self.body = json.dumps({"title": self.title, "body": "sent slowly"}).encode()
        self.head = (f"POST /api/posts HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(self.body)}\r\nConnection: close\r\n\r\n").encode()
        self.sock: socket.socket | None = None
        self.status: int | None = None  # the answer's status, once the body is all sent
        self.error: str = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, daemon=True)

    def start(self) -> "SlowUpload":
        """Connect, send the headers, and start sending the body slowly."""
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.sock.sendall(self.head)
        self.started = time.time()
        self._thread.start()
        return self

    @property
    def local_port(self) -> int:
        """Return the client side's TCP port (the server sees it as the remote port)."""
        return self.sock.getsockname()[1]

    @property
    def running(self) -> bool:
        """Return whether the upload is still being sent or answered."""
        return self._thread.is_alive()

    def _trickle(self) -> None:
        gap = self.seconds / len(self.body)
        try:
            for i in range(len(self.body)):
                if self._stop.wait(gap):
                    return
                self.sock.sendall(self.body[i:i + 1])
            first = self.sock.recv(64).decode("latin-1")
            self.status = int(first.split()[1]) if first.startswith("HTTP/") else None
        except (OSError, ValueError, IndexError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        """Abandon the upload (the server sees the client go away)."""
        self._stop.set()
        if self.sock is not None:
            self.sock.close()
        if self._thread.is_alive():
            self._thread.join(5)


class ApiRequest:
    """One JSON API request over a socket of its own, answered on a thread.

    connect() opens the connection without sending anything (gunicorn's gthread worker
    accepts it at once, so `serving_pid` can tell which worker has it); send() sends the
    request and reads the answer (the connection closes after it).
    """

    def __init__(self, port: int, token: str, method: str, path: str,
                 body: object = None, timeout: float = 30) -> None:
        self.port, self.timeout = port, timeout
        data = b"" if body is None else json.dumps(body).encode()
        self.request = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
                        ).encode() + data
        self.sock: socket.socket | None = None
        self.status: int | None = None  # the answer's status, once it came
        self.answer: str = ""  # the answer's body
        self.error: str = ""
        self.sent_at = self.answered_at = 0.0
        self._thread = threading.Thread(target=self._exchange, daemon=True)

    def connect(self) -> "ApiRequest":
        """Open the connection; send nothing yet."""
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        return self

    @property
    def local_port(self) -> int:
        """Return the client side's TCP port (the server sees it as the remote port)."""
        return self.sock.getsockname()[1]

    def send(self) -> "ApiRequest":
        """Send the request; its answer is read on a thread."""
        self.sent_at = time.time()
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        """Return whether the request has been sent and not answered yet."""
        return self._thread.is_alive()

    def json(self) -> object:
        """Return the answer's body as JSON."""
        return json.loads(self.answer)

    def _exchange(self) -> None:
        try:
            self.sock.sendall(self.request)
            chunks = []
            while chunk := self.sock.recv(65536):
                chunks.append(chunk)
            head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
            first = head.decode("latin-1").split("\r\n", 1)[0]
            self.status = int(first.split()[1]) if first.startswith("HTTP/") else None
            self.answer = body.decode(errors="replace")
        except (OSError, ValueError, IndexError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.answered_at = time.time()

    def close(self) -> None:
        """Close the connection (a request not answered yet is abandoned)."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            self.sock.close()
        if self._thread.is_alive():
            self._thread.join(5)


def _tcp_inode(server_port: int, client_port: int) -> int | None:
    """Return the inode of the server-side socket of a loopback connection from client_port."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            parts = line.split()
            local, remote, inode = parts[1], parts[2], int(parts[9])
            if (int(local.rsplit(":", 1)[1], 16) == server_port
                    and int(remote.rsplit(":", 1)[1], 16) == client_port and inode):
                return inode
    return None


def serving_pid(pids: list[int], server_port: int, client_port: int) -> int | None:
    """Return which of pids holds the accepted socket of a connection from client_port."""
    inode = _tcp_inode(server_port, client_port)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return pid
            except OSError:
                continue
    return None


# --- web load -------------------------------------------------------------------------------


@dataclass
class LoadResult:
    """What a web load did: requests answered, by status, errors and latencies (s)."""

    seconds: float = 0.0
    statuses: Counter = field(default_factory=Counter)
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)

    @property
    def requests(self) -> int:
        """Return how many requests were answered."""
        return sum(self.statuses.values())

    @property
    def rate(self) -> float:
        """Return answered requests per second."""
        return self.requests / self.seconds if self.seconds else 0.0

    def add(self, other: dict) -> None:
        self.statuses.update(other["statuses"])
        self.errors += other["errors"]
        self.latencies.extend(other["latencies"])
        self.spans.append((other["started"], other["ended"]))


def _load_thread(port: int, paths: list[tuple[str, dict]], until: float, out: dict,
                 lock: threading.Lock) -> None:
    rng = random.Random()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    statuses, errors, latencies = Counter(), 0, []
    while time.time() < until:
        path, headers = rng.choice(paths)
        started = time.perf_counter()
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            statuses[response.status] += 1
            latencies.append(time.perf_counter() - started)
            if response.will_close:
                conn.close()
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            time.sleep(0.05)  # a refused connection: do not spin
    conn.close()
    with lock:
        out["statuses"].update(statuses)
        out["errors"] += errors
        out["latencies"].extend(latencies)


def _load_process(port: int, paths: list, connections: int, seconds: float, queue,
                  ready) -> None:
    # the time starts here, not in the parent: a spawned interpreter takes seconds to import
    # on a slow machine, and a deadline set before it would leave the load no time to run
    ready.put(True)
    started = time.time()
    until = started + seconds
    out = {"statuses": Counter(), "errors": 0, "latencies": [], "started": started}
    lock = threading.Lock()
    threads = [threading.Thread(target=_load_thread, args=(port, paths, until, out, lock))
               for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out["ended"] = time.time()
    queue.put(out)


class WebLoad:
    """processes x connections threads sending GETs to one port until seconds have passed.

    paths are (path, headers) pairs, picked at random for each request.
    """

    def __init__(self, port: int, paths: list[tuple[str, dict]], seconds: float,
                 processes: int = 2, connections: int = 8) -> None:
        self.port, self.paths, self.seconds = port, paths, seconds
        self.processes, self.connections = processes, connections
        self._ctx = multiprocessing.get_context("spawn")  # no inherited database connections
        self._queue, self._ready = self._ctx.Queue(), self._ctx.Queue()
        self._procs: list = []

    def start(self) -> "WebLoad":
        """Start the load processes and return once each is sending; each stops on its own
        seconds after it began."""
        for _ in range(self.processes):
            proc = self._ctx.Process(target=_load_process, daemon=True, args=(
                self.port, self.paths, self.connections, self.seconds, self._queue,
                self._ready))
            proc.start()
            self._procs.append(proc)
        for _ in self._procs:
            self._ready.get(timeout=60)
        return self

    def join(self) -> LoadResult:
        """Wait for the load to end; return what it did."""
        result = LoadResult()
        for _ in self._procs:
            result.add(self._queue.get(timeout=self.seconds + 60))
        for proc in self._procs:
            proc.join(10)
        # from the first process's start to the last one's end (not counting their imports)
        result.seconds = max(e for _, e in result.spans) - min(s for s, _ in result.spans)
        return result

    def stop(self) -> None:
        """End the load processes at once (on an error)."""
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
            proc.join(5)


# --- webhook receiver ----------------------------------------------------------------------


@dataclass
class Receipt:
    """One webhook request as the receiver saw it."""

    delivery_id: str
    event: str
    post_id: int | None
    signed: bool
    status: int
    at: float


class WebhookReceiver(Receiver):
    """tests/harness/receiver.Receiver at /hook that fails now and then: at random (fail_rate), or
    every fail_every-th request when that is set; each receipt says whether it was signed."""

    def __init__(self, secret: str, fail_rate: float = 0.15, seed: int | None = None,
                 fail_every: int = 0) -> None:
        self.secret = secret
        rng = random.Random(seed)

        def answer(n: int) -> int:
            failed = n % fail_every == 0 if fail_every else rng.random() < fail_rate
            return 500 if failed else 200

        super().__init__(path="/hook", answer=answer)

    def receipt(self, request: Request) -> Receipt:
        """Return what a delivery's request says: ids, event, signature, answer."""
        headers = {k.lower(): v for k, v in request.headers.items()}
        return Receipt(headers.get("x-soloist-delivery", ""), headers.get("x-soloist-event", ""),
                       request.post_id(), self.verifies(request.body, headers),
                       request.status, request.at)

    def verifies(self, body: bytes, headers: dict[str, str]) -> bool:
        """Return whether a delivery verifies as a receiver checks it: Standard Webhooks'
        signature over its id, time and body (a typed secret is the key's bytes)."""
        key = self.secret if self.secret.startswith("whsec_") else self.secret.encode()
        try:
            Webhook(key).verify(body, headers)
        except WebhookVerificationError:
            return False
        return True

    def by_post(self) -> dict[int | None, list[Receipt]]:
        """Return every receipt grouped by post id."""
        return {post_id: [self.receipt(r) for r in requests]
                for post_id, requests in super().by_post().items()}
