"""Outbound requests to subscribers' URLs, made safe: the host is resolved once, every address it
resolves to is checked (no loopback, private, link-local, shared, reserved or metadata address
unless WEBHOOKS_ALLOW_PRIVATE_NETWORKS), and the connection goes to the checked address itself,
with the host name kept for the Host header and TLS (SNI, certificate), so a name that resolves
differently the second time (DNS rebinding) cannot move the request elsewhere. No redirect is
followed (http.client follows none), timeouts are short and the response body is read only up to
a cap."""

import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

# Cloud metadata services: refused even when private networks are allowed.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2")
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class RefusedURL(ValueError):
    """A URL a webhook may not reach; the message says why (no address is echoed beyond the host)."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes  # at most WEBHOOKS_MAX_RESPONSE_BYTES


def address_refused(address: IPAddress, *, allow_private: bool) -> bool:
    """True if a webhook may not connect to `address`."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return True
    if allow_private:
        return address.is_multicast or address.is_unspecified
    return not address.is_global or address.is_multicast


def checked_target(url: str, *, allow_private: bool | None = None) -> tuple[str, int, str, IPAddress]:
    """(scheme, port, host, the address to connect to) for `url`, or RefusedURL. Resolves once."""
    allow = settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS if allow_private is None else allow_private
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedURL("The URL must be http or https and name a host.")
    if parts.username or parts.password:
        raise RefusedURL("The URL may not carry credentials.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise RefusedURL("The URL's port is invalid.") from None
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise RefusedURL(f"The host {parts.hostname} does not resolve.") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses or any(address_refused(a, allow_private=allow) for a in addresses):
        raise RefusedURL(f"The host {parts.hostname} resolves to a loopback, private, link-local or metadata address.")
    return parts.scheme, port, parts.hostname, addresses[0]


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: IPAddress, timeout: float):
        super().__init__(host, port, timeout=timeout)
        self._address = str(address)

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: IPAddress, timeout: float):
        self._tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self._tls)
        self._address = str(address)

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


def post(url: str, body: bytes, headers: dict[str, str]) -> Answer:
    """POST `body` to `url` through a checked, pinned connection. Raises RefusedURL for a URL that
    may not be reached, OSError/HTTPException for a failed exchange."""
    scheme, port, host, address = checked_target(url)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection_class = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
    connection = connection_class(host, port, address, timeout=settings.WEBHOOKS_TIMEOUT_SECONDS)
    try:
        connection.request("POST", path, body=body, headers={**headers, "Content-Type": "application/json"})
        response = connection.getresponse()
        return Answer(response.status, response.read(settings.WEBHOOKS_MAX_RESPONSE_BYTES))
    finally:
        connection.close()
