"""The webhook receiver of every test and benchmark: http.server in a thread.

It records each request as it arrived on the wire (path, headers, body; a GET has no
body), when, and what it answered: the statuses it is told to (`answers`, in turn; a float
stalls that many seconds, then answers 200), 200 once they run out, or what `answer(n)`
says for the n-th request. It listens on 127.0.0.1, or on an address of choice (a veth
end a network namespace reaches).
"""

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 200  # what the receiver answered
    at: float = field(default_factory=time.time)  # when it arrived

    def post_id(self) -> int | None:
        """Return the post id of a post.* event's body, if it has one."""
        try:
            return json.loads(self.body)["data"]["post_id"]
        except (ValueError, KeyError, TypeError):
            return None


class Receiver:
    """A real local HTTP endpoint; start() it, subscribe .url, close() it."""

    def __init__(self, host: str = "127.0.0.1", path: str = "",
                 answer: Callable[[int], int] | None = None) -> None:
        self.requests: list[Request] = []
        self.answers: list[int | float] = []
        self.answer = answer
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://{host}:{self.server.server_port}{path}"

    def start(self) -> "Receiver":
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def calls(self) -> int:
        """Return how many requests came."""
        with self.lock:
            return len(self.requests)

    def received(self) -> list[Request]:
        """Return the requests so far."""
        with self.lock:
            return list(self.requests)

    def by_post(self) -> dict[int | None, list[Request]]:
        """Return every request grouped by the post id in its body."""
        found: dict[int | None, list[Request]] = {}
        for request in self.received():
            found.setdefault(request.post_id(), []).append(request)
        return found

    def ids_by_post(self) -> dict[int, set[str]]:
        """Return {post id: the webhook-id headers it arrived under} (post.published)."""
        found: dict[int, set[str]] = {}
        for request in self.received():
            post_id = request.post_id()
            if post_id is not None:
                headers = {k.lower(): v for k, v in request.headers.items()}
                found.setdefault(post_id, set()).add(headers.get("webhook-id", ""))
        return found

    def _record(self, request: Request) -> int | float:
        with self.lock:
            self.requests.append(request)
            if self.answer is not None:
                request.status = self.answer(len(self.requests))
                return request.status
            answer = self.answers.pop(0) if self.answers else 200
            request.status = 200 if isinstance(answer, float) else answer
            return answer

    def _handler(self) -> type:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer(receiver._record(Request(self.path, dict(self.headers), body)))

            def do_GET(self) -> None:  # noqa: N802  (a dead-man's switch ping)
                self._answer(receiver._record(Request(self.path, dict(self.headers), b"")))

            def _answer(self, answer: int | float) -> None:
                if isinstance(answer, float):
                    time.sleep(answer)  # a receiver too slow to answer in time
                    answer = 200
                try:
                    self.send_response(answer)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender gave up waiting

            def log_message(self, *_args: object) -> None:
                pass

        return Handler
