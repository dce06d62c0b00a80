"""Outgoing webhook HTTP: refuse non-public addresses, then POST to the address checked.

The host is resolved once and every address it resolves to must be public
(unless WEBHOOK_ALLOW_PRIVATE); the connection then goes to those very addresses,
so a DNS answer that changes between the check and the request cannot point a
delivery at the internal network. Addresses that carry IPv4 (mapped, 6to4, NAT64) are
judged by the IPv4 address they reach. Redirects are not followed.

URLs are stored plain ASCII (`encode_url`): hosts in their IDNA 2008 form (UTS 46
mapping, as browsers do; the stdlib codec is IDNA 2003, which turns faß.de into fass.de,
another site), paths, queries and fragments percent-encoded as RFC 3986 asks.
"""

import http.client
import ipaddress
import re
import socket
import ssl
from urllib.parse import quote, urlsplit, urlunsplit

import idna

MAX_RESPONSE = 64 * 1024
# RFC 3986 3.3-3.5: what may stand unescaped in a path, query or fragment ("%" only to
# start an escape)
URL_SAFE = "-._~!$&'()*+,;=:@/?%"
LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
NAT64 = ipaddress.ip_network("64:ff9b::/96")
# special-purpose blocks that reach private space whatever the ipaddress module calls them
SPECIAL = ((ipaddress.ip_network("2001::/32"), "a Teredo"),
           (ipaddress.ip_network("64:ff9b:1::/48"), "a local-use NAT64"),
           (ipaddress.ip_network("192.0.0.0/24"), "an IETF protocol"),
           (ipaddress.ip_network("192.88.99.0/24"), "a 6to4 relay"))


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


def shown(url: str) -> str:
    """Return a secret URL as a log may show it: its scheme, host and port, and "…" for the
    rest, which may hold a bearer secret (a dead-man's switch's check id, a token)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return "(an unreadable URL)"
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}/…"


def _ascii_host(host: str) -> str:
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except UnicodeError as exc:  # idna.IDNAError is one
        raise UnsafeURL(f"The host {host} is not a valid internationalised domain name "
                        f"({exc}); if it is registered, type its xn-- form.") from None


def _escape(text: str) -> str:
    return quote(LONE_PERCENT.sub("%25", text), safe=URL_SAFE)


def encode_url(url: str) -> str:
    """Return url as plain ASCII: IDNA host, percent-encoded path, query and fragment."""
    parts, _ = split_url(url)
    netloc = parts.netloc
    if not netloc.isascii():  # credentials are refused, so this is the host
        netloc = _ascii_host(parts.hostname)
        netloc += f":{parts.port}" if parts.port is not None else ""
    try:
        rest = [_escape(part) for part in (parts.path, parts.query, parts.fragment)]
    except UnicodeError:  # lone surrogates
        raise UnsafeURL("This is not a valid URL.") from None
    return urlunsplit((parts.scheme, netloc, *rest))


def _embedded(address: ipaddress.IPv4Address | ipaddress.IPv6Address):
    """Return the IPv4 address an IPv6 address reaches (mapped, 6to4, NAT64), or None."""
    if address.version == 4:
        return None
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return address.ipv4_mapped or address.sixtofour


def _kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    for network, word in SPECIAL:
        if address in network:
            return word
    checks = (("loopback", "a loopback"), ("link_local", "a link-local"),
              ("private", "a private"), ("unspecified", "an unspecified"),
              ("multicast", "a multicast"), ("reserved", "a reserved"))
    for attribute, word in checks:
        if getattr(address, f"is_{attribute}"):
            return word
    return None if address.is_global else "a non-public"


def refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Return why an address is not public, or None when it is."""
    inner = _embedded(address)
    word = _kind(address if inner is None else inner)
    if word is None:
        return None
    return f"{word} address ({'' if inner is None else f'{inner} inside '}{address})"


def resolve(url: str, allow_private: bool) -> list[str]:
    """Return the addresses to connect to for url; raise UnsafeURL if any is not public."""
    parts, port = split_url(url)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise UnsafeURL(f"The host {parts.hostname} does not resolve.") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not allow_private:
        for address in addresses:
            why = refusal(ipaddress.ip_address(address.split("%", 1)[0]))
            if why:
                raise UnsafeURL(f"{parts.hostname} resolves to {why}; webhooks may only call "
                                "public addresses (WEBHOOK_ALLOW_PRIVATE allows others).")
    return addresses


def _connect(addresses: list[str], port: int, timeout: float | None) -> socket.socket:
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
    return request("POST", url, body, {"Content-Type": "application/json",
                                       "User-Agent": "Soloist-Webhooks/1", **headers},
                   timeout, allow_private)


def request(method: str, url: str, body: bytes | None, headers: dict[str, str],
            timeout: float, allow_private: bool) -> int:
    """Send one request to url (checked first, its addresses pinned); return the status."""
    url = encode_url(url)  # endpoints stored before URLs were encoded at creation
    parts, port = split_url(url)
    addresses = resolve(url, allow_private)
    kind = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
    conn = kind(parts.hostname, port, addresses, timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read(MAX_RESPONSE)
        return response.status
    finally:
        conn.close()
