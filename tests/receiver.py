"""A webhook receiver for tests: http.server on 127.0.0.1 in a thread.

It records each request as it arrived on the wire (path, headers, body; a GET has no
body) and answers with the statuses it is told to, 200 once they run out.
"""

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A real local HTTP endpoint; start() it, subscribe .url, close() it."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.answers: list[int] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def start(self) -> "Receiver":
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def received(self) -> list[Request]:
        """Return the requests so far."""
        with self.lock:
            return list(self.requests)

    def _record(self, request: Request) -> int:
        with self.lock:
            self.requests.append(request)
            return self.answers.pop(0) if self.answers else 200

    def _handler(self) -> type:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = receiver._record(Request(self.path, dict(self.headers), body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802  (a dead-man's switch ping)
                status = receiver._record(Request(self.path, dict(self.headers), b""))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        return Handler
