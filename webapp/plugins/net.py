"""Outgoing webhook HTTP: refuse non-public addresses, then POST to the address checked.

The host is resolved once and every address it resolves to must be public
(unless WEBHOOK_ALLOW_PRIVATE); the connection then goes to those very addresses,
so a DNS answer that changes between the check and the request cannot point a
delivery at the internal network. Redirects are not followed.
"""

import http.client
import ipaddress
import socket
import ssl
from urllib.parse import urlsplit

MAX_RESPONSE = 64 * 1024


class UnsafeURL(ValueError):
    """A webhook URL Soloist refuses to call."""


def split_url(url: str):
    """Return the URL's parts if it is a plain http(s) URL with a host; raise UnsafeURL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UnsafeURL("This is not a valid URL.") from None
    if parts.scheme not in ("http", "https"):
        raise UnsafeURL("Use an http:// or https:// URL.")
    if not parts.hostname:
        raise UnsafeURL("The URL needs a host name.")
    if parts.username or parts.password:
        raise UnsafeURL("Do not put credentials in the URL; the signature authenticates.")
    return parts, port or (443 if parts.scheme == "https" else 80)


def refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Return why an address is not public, or None when it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    checks = (("loopback", "a loopback"), ("link_local", "a link-local"),
              ("private", "a private"), ("unspecified", "an unspecified"),
              ("multicast", "a multicast"), ("reserved", "a reserved"))
    for attribute, word in checks:
        if getattr(address, f"is_{attribute}"):
            return f"{word} address ({address})"
    return None if address.is_global else f"a non-public address ({address})"


def resolve(url: str, allow_private: bool) -> list[str]:
    """Return the addresses to connect to for url; raise UnsafeURL if any is not public."""
    parts, port = split_url(url)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise UnsafeURL(f"The host {parts.hostname} does not resolve.") from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not allow_private:
        for address in addresses:
            why = refusal(ipaddress.ip_address(address.split("%", 1)[0]))
            if why:
                raise UnsafeURL(f"{parts.hostname} resolves to {why}; webhooks may only call "
                                "public addresses (WEBHOOK_ALLOW_PRIVATE allows others).")
    return addresses


def _connect(addresses: list[str], port: int, timeout: float) -> socket.socket:
    """Connect to the first of the checked addresses that answers."""
    error: OSError = OSError("no address to connect to")
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout)
        except OSError as exc:
            error = exc
    raise error


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, addresses: list[str], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.addresses = addresses

    def connect(self) -> None:
        self.sock = _connect(self.addresses, self.port, self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, addresses: list[str], timeout: float) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self.tls)
        self.addresses = addresses

    def connect(self) -> None:
        sock = _connect(self.addresses, self.port, self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


def post(url: str, body: bytes, headers: dict[str, str], timeout: float,
         allow_private: bool) -> int:
    """POST body to url (checked first) and return the response status."""
    parts, port = split_url(url)
    addresses = resolve(url, allow_private)
    kind = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
    conn = kind(parts.hostname, port, addresses, timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("POST", path, body=body, headers={
            "Content-Type": "application/json", "User-Agent": "Soloist-Webhooks/1", **headers})
        response = conn.getresponse()
        response.read(MAX_RESPONSE)
        return response.status
    finally:
        conn.close()
