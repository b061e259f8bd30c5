"""The webhook worker's HTTP client.

aiohttp rather than the httpx the rest of the service uses: a worker posts many small requests at once, and
httpx spends about ten times aiohttp's CPU on each of them at that concurrency (encode/httpx#3215; measured
here at 10 in flight: 2.7 ms against 0.25 ms per POST), which alone held a worker under 300 deliveries/s.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import aiohttp
import httpx
from yarl import URL

from rpc.outbox.ssrf import AddressGuard

EXCERPT_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Answer:
    status_code: int
    excerpt: str  # the first KiB of the body; the rest is never read


class Sender:
    """POSTs webhook bodies. With a guard (production), each request goes to the address the guard checked,
    TLS verified against the host name, on a new connection: a kept-alive connection is keyed by address, so
    one checked for one host name must never carry another name's delivery to the same address."""

    def __init__(self, guard: AddressGuard | None, verify: ssl.SSLContext | bool = True) -> None:
        self._guard = guard
        self._verify = verify
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._verify, force_close=self._guard is not None, limit=0),
            cookie_jar=aiohttp.DummyCookieJar(),  # a receiver's cookies are never sent back, to it or another
            timeout=aiohttp.ClientTimeout(total=None),  # the caller's deadline is the only one
            auto_decompress=False,  # the stored excerpt is what the receiver sent
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(self, raw_url: str, body: bytes, headers: dict[str, str]) -> Answer:
        """One POST, redirects not followed; raises BlockedDestination or the client's error."""
        assert self._session is not None, "use the sender as an async context manager"
        url = httpx.URL(raw_url)  # the form the endpoint's URL was checked in when it was registered
        server_hostname = None
        if self._guard is not None:
            address = await self._guard.resolve(url)
            headers = {**headers, "Host": url.netloc.decode("ascii")}
            server_hostname = url.host
            url = url.copy_with(host=address)
        async with self._session.post(
            URL(str(url), encoded=True),
            data=body,
            headers=headers,
            allow_redirects=False,
            server_hostname=server_hostname,
        ) as response:
            excerpt = await _excerpt(response.content)
            return Answer(response.status, excerpt)


async def _excerpt(content: aiohttp.StreamReader) -> str:
    collected = b""
    while len(collected) < EXCERPT_BYTES:
        chunk = await content.read(EXCERPT_BYTES - len(collected))
        if not chunk:
            break
        collected += chunk
    return collected.decode("utf-8", errors="replace")


def describe_failure(exc: Exception) -> str:
    """An attempt's failure in words a receiver's owner can act on (the panel shows it), not a class name."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS handshake failed: the receiver's certificate was not accepted ({exc.certificate_error})"[:500]
    if isinstance(exc, aiohttp.ClientSSLError):
        return f"TLS handshake failed with {exc.host}:{exc.port}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror or str(exc.os_error)
        return f"could not connect to {exc.host}:{exc.port} ({reason})"[:500]
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the receiver closed the connection without answering"
    if isinstance(exc, aiohttp.InvalidURL):
        return "the endpoint's URL cannot be requested"
    if isinstance(exc, aiohttp.ClientResponseError | aiohttp.ClientPayloadError):
        return "the receiver's answer was not valid HTTP"
    return f"the request failed: {exc}"[:500] if str(exc) else "the request failed"
