"""Purgers: tell a cache or CDN to drop its copies, one small class per CACHE_PURGE scheme.

Each takes what to purge (surrogate keys, or paths for purge+http) and whether the purge
is hard (no stale copy may be served: a takedown) or soft (the copy is marked stale and
may be served while it is fetched again), and returns once the cache said yes, or raises
PurgeFailed with a sentence saying what went wrong. Tokens come from the configuration
(FASTLY_API_TOKEN, CLOUDFLARE_API_TOKEN) and are never put into an error, a log line or
a purger's name (name() keeps the URL without its credentials).

- varnish+http://HOST:PORT: `PURGE /` with `xkey-purge: k1 k2` (`xkey-softpurge` when
  soft), as varnish-modules' xkey reads it (the VCL is docs/soloist.vcl).
- fastly://SERVICE_ID: Fastly's batch purge by surrogate key, `POST /service/{id}/purge`
  with `Surrogate-Key: k1 k2`, `Fastly-Key` and `Fastly-Soft-Purge: 1` when soft; up to
  256 keys a request.
- cloudflare://ZONE_ID: `POST /client/v4/zones/{zone}/purge_cache` with `{"tags": [...]}`
  and a Bearer token; 30 tags a request (the lowest plan's limit). Always hard: the API
  has no soft purge of tags.
- purge+http(s)://HOST:PORT: `PURGE <path>` for each path (nginx's proxy_cache_purge and
  the like); paths_for turns an event's keys into them when the purge is queued.
"""

import http.client
import json
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import quote, urlsplit, urlunsplit

from flask import current_app

from . import surrogate

TIMEOUT_SECONDS = 10.0


class PurgeFailed(Exception):
    """A purge the cache did not confirm; retry_after is the seconds it asked us to wait."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def name(url: str) -> str:
    """Return a purger's name: its URL without user name, password or query."""
    parts = urlsplit(url.strip())
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme.lower(), host, parts.path, "", ""))


def _send(base: str, method: str, path: str, headers: dict[str, str],
          body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """Make one request to base (http or https URL) and return its status, headers, body."""
    parts = urlsplit(base)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=TIMEOUT_SECONDS)  # config: one
    try:
        connection.request(method, parts.path.rstrip("/") + path, body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read(65536)
    except TimeoutError:
        raise PurgeFailed(f"{base} did not answer within {TIMEOUT_SECONDS:g} s.") from None
    except (OSError, http.client.HTTPException) as exc:
        raise PurgeFailed(f"{base} could not be reached: {type(exc).__name__}: {exc}") from None
    finally:
        connection.close()


def _check(what: str, status: int, headers: dict[str, str], body: bytes) -> None:
    """Raise PurgeFailed unless status is a success; a 429 carries its Retry-After."""
    if 200 <= status < 300:
        return
    retry = headers.get("retry-after", "")
    text = body[:200].decode("utf-8", "replace").strip()
    raise PurgeFailed(f"{what} answered HTTP {status}: {text}" if text else
                      f"{what} answered HTTP {status}.",
                      float(retry) if retry.isdigit() else None)


def _host(url: str) -> str:
    """Return the id a fastly:// or cloudflare:// URL names, as written (ids are case-sensitive)."""
    return urlsplit(url).netloc.rpartition("@")[2]


def _chunks(items: Sequence[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start:start + size])


class Varnish:
    """Varnish with varnish-modules' xkey: PURGE / with the keys in one header."""

    max_keys = 100  # a header of 100 keys is ~2 kB, well inside Varnish's 8 kB

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.base = f"http://{parts.netloc.rpartition('@')[2]}"

    def purge(self, keys: Sequence[str], hard: bool) -> None:
        """Purge keys (hard: gone; soft: stale, refetched in the background)."""
        header = "xkey-purge" if hard else "xkey-softpurge"
        for chunk in _chunks(keys, self.max_keys):
            _check(f"Varnish at {self.base}",
                   *_send(self.base, "PURGE", "/", {header: " ".join(chunk)}))


class Fastly:
    """Fastly: purge by surrogate key through its API, up to 256 keys a request."""

    max_keys = 256

    def __init__(self, url: str, token: str, api: str) -> None:
        self.service, self.token, self.api = _host(url), token, api

    def purge(self, keys: Sequence[str], hard: bool) -> None:
        """Purge keys from the service (soft unless hard)."""
        if not self.token:
            raise PurgeFailed("FASTLY_API_TOKEN is not set: Fastly refuses a purge without it.")
        headers = {"Fastly-Key": self.token, "Accept": "application/json"}
        if not hard:
            headers["Fastly-Soft-Purge"] = "1"
        for chunk in _chunks(keys, self.max_keys):
            answer = _send(self.api, "POST", f"/service/{quote(self.service, safe='')}/purge",
                           headers | {"Surrogate-Key": " ".join(chunk)})
            _check(f"Fastly (service {self.service})", *answer)


class Cloudflare:
    """Cloudflare: purge by cache tag through its API, 30 tags a request."""

    max_keys = 30

    def __init__(self, url: str, token: str, api: str) -> None:
        self.zone, self.token, self.api = _host(url), token, api

    def purge(self, keys: Sequence[str], hard: bool) -> None:
        """Purge tags from the zone (always hard: tags have no soft purge)."""
        if not self.token:
            raise PurgeFailed("CLOUDFLARE_API_TOKEN is not set: Cloudflare refuses a purge "
                              "without it.")
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        for chunk in _chunks(keys, self.max_keys):
            status, answer_headers, body = _send(
                self.api, "POST", f"/zones/{quote(self.zone, safe='')}/purge_cache", headers,
                json.dumps({"tags": chunk}).encode())
            _check(f"Cloudflare (zone {self.zone})", status, answer_headers, body)
            _cloudflare_success(self.zone, body)


def _cloudflare_success(zone: str, body: bytes) -> None:
    """Raise PurgeFailed unless Cloudflare's answer says success (its errors say why)."""
    try:
        answer = json.loads(body or b"{}")
    except ValueError:
        raise PurgeFailed(f"Cloudflare (zone {zone}) answered something not JSON.") from None
    if not answer.get("success"):
        errors = "; ".join(str(e.get("message", e)) for e in answer.get("errors") or [])
        raise PurgeFailed(f"Cloudflare (zone {zone}) refused the purge: {errors or answer}")


class PlainPurge:
    """A cache that takes `PURGE <path>`, one request a path (nginx, Squid, a proxy)."""

    max_keys = 1000

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        scheme = parts.scheme.lower().removeprefix("purge+")
        self.base = f"{scheme}://{parts.netloc.rpartition('@')[2]}"

    def purge(self, paths: Sequence[str], hard: bool) -> None:
        """PURGE each path (every purge is hard: the method has no soft form)."""
        for path in paths:
            status, headers, body = _send(self.base, "PURGE", path, {})
            if status != 404:  # nothing cached there: nothing to drop
                _check(f"{self.base} (PURGE {path})", status, headers, body)

    @staticmethod
    def paths_for(keys: Iterable[str], payload: dict, old_slug: str | None = None,
                  published: int = 0) -> list[str]:
        """Return the paths an event's keys name: the post's URL (and its old one when the
        slug changed), every page of the home, the feed, the sitemap, a file's widths."""
        adapter = current_app.url_map.bind("")
        slugs = [s for s in (payload.get("slug"), old_slug, *payload.get("slugs", ())) if s]
        paths: list[str] = []
        for key in keys:
            if key.startswith("post-"):  # a release names many: its slugs, once
                paths += [adapter.build("site.post", {"slug": slug}) for slug in slugs]
                slugs = []
            elif key.startswith("media-"):
                paths += payload.get("paths") or []
            elif key in (surrogate.HOME, surrogate.SITE):
                paths += home_pages(published)
            else:
                paths.append({surrogate.FEED: "/feed.xml", surrogate.SITEMAP: "/sitemap.xml"}[key])
        return list(dict.fromkeys(paths))


MAX_HOME_PAGES = 100


def home_pages(published: int) -> list[str]:
    """Return the home's pages as a PURGE names them, given how many posts are live: /,
    then /?page=2 and on, one past the last (a takedown leaves the last page one short).
    A plain PURGE has no keys, and each page's query is its own cached copy; past
    MAX_HOME_PAGES the older pages keep their lifetime (docs/deploying.md)."""
    pages = min(MAX_HOME_PAGES, published // surrogate.HOME_PAGE_SIZE + 2)
    return ["/", *(f"/?page={n}" for n in range(2, pages + 1))]


Purger = Varnish | Fastly | Cloudflare | PlainPurge
BUILDERS: dict[str, Callable[[str, dict], Purger]] = {
    "varnish+http": lambda url, _config: Varnish(url),
    "fastly": lambda url, config: Fastly(url, config["FASTLY_API_TOKEN"],
                                         config["FASTLY_API_URL"]),
    "cloudflare": lambda url, config: Cloudflare(url, config["CLOUDFLARE_API_TOKEN"],
                                                 config["CLOUDFLARE_API_URL"]),
    "purge+http": lambda url, _config: PlainPurge(url),
    "purge+https": lambda url, _config: PlainPurge(url),
}


def configured(config: dict | None = None) -> dict[str, Purger]:
    """Return the purgers CACHE_PURGE lists, by name."""
    config = current_app.config if config is None else config
    return {name(url): BUILDERS[urlsplit(url).scheme.lower()](url, config)
            for url in config["CACHE_PURGE"]}


def targets(purger: Purger, keys: Sequence[str], payload: dict, old_slug: str | None = None,
            published: Callable[[], int] = lambda: 0) -> list[str]:
    """Return what purger is asked to purge for an event's keys: the keys, or their paths
    (published: how many posts are live, read only for a plain PURGE of the home)."""
    if isinstance(purger, PlainPurge):
        return purger.paths_for(keys, payload, old_slug, published())
    return list(keys)
