"""Stand-ins for the caches' purge APIs: http.server in a thread, answering as each does.

One server plays Varnish with xkey (PURGE /, xkey-purge / xkey-softpurge), Fastly's batch
purge by surrogate key (POST /service/{id}/purge, Fastly-Key, Surrogate-Key,
Fastly-Soft-Purge; JSON of each key's purge id; 401 without the right key; at most 256 keys)
and Cloudflare's purge by tag (POST /zones/{zone}/purge_cache, Bearer token, JSON
{"tags": [...]}; {"success": true, ...}; 403 with errors for a wrong token; at most 30
tags). It records every request it understood; `limited` makes the next answers 429 with
Retry-After, `down` 503.
"""

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "tok-SECRET-4f1e9b"


@dataclass
class Purge:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class CacheAPI:
    """A local stand-in of the purge APIs; start() it, point a purger at .url, close() it."""

    def __init__(self) -> None:
        self.requests: list[Purge] = []
        self.limited = 0  # answer this many requests 429 (Retry-After: retry_after)
        self.retry_after = 7
        self.down = False
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_PURGE(self) -> None:  # noqa: N802 (http.server's naming)
                api.answer(self)

            def do_POST(self) -> None:  # noqa: N802
                api.answer(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def start(self) -> "CacheAPI":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        """Check the request as the real API would and answer like it."""
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        found = Purge(handler.command, handler.path, dict(handler.headers), body)
        status, extra, reply = self.judge(found)
        if status < 300:
            self.requests.append(found)
        handler.send_response(status)
        for name, value in {"Content-Type": "application/json", **extra}.items():
            handler.send_header(name, value)
        data = json.dumps(reply).encode()
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def judge(self, purge: Purge) -> tuple[int, dict, object]:
        if self.down:
            return 503, {}, {"msg": "Service Unavailable"}
        if self.limited:
            self.limited -= 1
            return 429, {"Retry-After": str(self.retry_after)}, {"msg": "Too Many Requests"}
        if purge.method == "PURGE":
            return 200, {}, {"purged": purge.headers.get("xkey-purge")
                             or purge.headers.get("xkey-softpurge") or purge.path}
        if purge.path.startswith("/service/") and purge.path.endswith("/purge"):
            return self.fastly(purge)
        if purge.path.startswith("/zones/") and purge.path.endswith("/purge_cache"):
            return self.cloudflare(purge)
        return 404, {}, {"msg": "Record not found"}

    @staticmethod
    def fastly(purge: Purge) -> tuple[int, dict, object]:
        if purge.headers.get("Fastly-Key") != TOKEN:
            return 401, {}, {"msg": "Provided credentials are missing or invalid"}
        keys = purge.headers.get("Surrogate-Key", "").split()
        if not keys or len(keys) > 256:
            return 400, {}, {"msg": "Bad request", "detail": "1 to 256 surrogate keys"}
        return 200, {}, {key: f"{i}-purge-id" for i, key in enumerate(keys)}

    @staticmethod
    def cloudflare(purge: Purge) -> tuple[int, dict, object]:
        if purge.headers.get("Authorization") != f"Bearer {TOKEN}":
            return 403, {}, {"success": False, "errors": [{"message": "Authentication error"}],
                             "messages": [], "result": None}
        tags = json.loads(purge.body or b"{}").get("tags") or []
        if not tags or len(tags) > 30 or purge.headers.get("Content-Type") != "application/json":
            return 400, {}, {"success": False, "errors": [{"message": "Invalid tags"}],
                             "messages": [], "result": None}
        return 200, {}, {"success": True, "errors": [], "messages": [],
                         "result": {"id": "zone-purge-id"}}

    def keys(self) -> list[list[str]]:
        """Return the keys of each xkey purge, in order."""
        return [(r.headers.get("xkey-purge") or r.headers.get("xkey-softpurge") or "").split()
                for r in self.requests if r.method == "PURGE"]
