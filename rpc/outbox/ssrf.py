"""Where a production deployment may send webhooks: `https` only, to globally routable addresses.

The host is resolved and every address must pass; the caller then connects to the checked address (TLS
still verified against the host name), so a DNS answer that changes between check and use cannot steer
a delivery to a private address. IPv4 addresses hidden inside IPv6 (mapped, NAT64, 6to4, Teredo) are
judged by the IPv4 address they carry.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Sequence

import httpx

from rpc.settings import Settings

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

# Not globally reachable (IANA special-purpose registries), though some Python versions' `is_global` says so:
# 192.0.0.0/24 (IETF protocol assignments) and 192.88.99.0/24 (the deprecated 6to4 relay anycast).
_NOT_GLOBAL: tuple[Network, ...] = (
    ipaddress.IPv4Network("192.0.0.0/24"),
    ipaddress.IPv4Network("192.88.99.0/24"),
)


class BlockedDestination(Exception):
    """A webhook URL this deployment refuses to call; the message says why."""


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, if it carries one."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def permitted(address: IPAddress, allowed: Sequence[Network]) -> bool:
    """Globally routable (and so is any IPv4 address inside it), or in an allowed on-premise network."""
    if any(address in network for network in allowed if network.version == address.version):
        return True
    inner = embedded_ipv4(address)
    if inner is not None:
        return permitted(inner, allowed)
    return _routable(address)


def _routable(address: IPAddress) -> bool:
    """`is_global`, and none of what some Python versions still count as global: multicast (224/4, ff00::/8),
    reserved ranges (240/4; ::/8, which holds IPv4-compatible, IPv4-translated and local-use NAT64 addresses
    that carry an IPv4 address elsewhere than the forms above), the deprecated site-local fec0::/10."""
    if not address.is_global or address.is_multicast or address.is_reserved:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return False
    return not any(address in network for network in _NOT_GLOBAL if network.version == address.version)


class AddressGuard:
    """Resolves a webhook URL's host and answers the one address to connect to, or refuses."""

    def __init__(self, allowed: Sequence[Network] = ()) -> None:
        self._allowed = tuple(allowed)

    async def resolve(self, url: httpx.URL) -> str:
        if url.scheme != "https":
            raise BlockedDestination("webhook URLs must use https")
        host = url.host
        port = 443 if url.port is None else url.port
        if not 0 < port < 65536:  # getaddrinfo passes a numeric port through; the connect would fail oddly
            raise BlockedDestination(f"{port} is not a port")
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:  # UnicodeError: a name IDNA cannot encode (a label too long)
            raise BlockedDestination(f"cannot resolve {host}") from exc
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        if not addresses:
            raise BlockedDestination(f"cannot resolve {host}")
        refused = sorted({str(a) for a in addresses if not permitted(a, self._allowed)})
        if refused:  # the message reaches the endpoint's owner: it names no address of our network
            log.info("webhook host %s refused: it resolves to %s", host, ", ".join(refused))
            raise BlockedDestination(f"the address of {host} is not allowed: it is not publicly routable")
        return str(addresses[0])


def guard(settings: Settings) -> AddressGuard | None:
    """The guard of production deployments; development and tests may call loopback receivers."""
    return AddressGuard(settings.allowed_networks) if settings.production else None
