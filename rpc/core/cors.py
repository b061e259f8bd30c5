"""Browsers on other origins (docs/security.md): pure ASGI middleware that answers their preflights and marks
the answers of the addresses a web application may call.

Starlette's CORSMiddleware does not fit: the contract wants `204` for a preflight, one set of paths only (never
the panel or the web pages), and, on the token endpoints, origins that live in the database — those of public
OAuth clients' redirect URIs, so that a single-page application can finish PKCE without being listed in
`CORS_ALLOWED_ORIGINS`. An origin that is not allowed gets no `Access-Control-*` header at all, and its
preflight goes on to the app like any other request.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Collection

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOW_HEADERS = "Authorization, Content-Type, Idempotency-Key, X-Request-Id"
EXPOSE_HEADERS = (
    "X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, Idempotent-Replayed"
)
ALLOW_METHODS = "GET, HEAD, POST"
MAX_AGE = "600"
# What a web application may call: the API, the token endpoints, the documents; the built-in identity provider's
# JSON endpoints. Never the panel or the web pages.
PREFIXES = ("/v1/", "/.well-known/", "/auth/password-reset")
PATHS = frozenset({"/openapi.json", "/oauth/token", "/oauth/revoke", "/auth/login", "/auth/refresh", "/auth/signup"})
TOKEN_PATHS = frozenset({"/oauth/token", "/oauth/revoke"})

# A public client whose registered redirect URIs include one on this origin.
_PUBLIC_CLIENT_ORIGIN = """
SELECT EXISTS (
    SELECT FROM oauth_clients, unnest(redirect_uris) AS uri
    WHERE secret_hash IS NULL AND (uri = %(origin)s OR starts_with(uri, %(origin)s || '/'))
) AS known
"""


def origin_of(uri: str) -> str | None:
    """`scheme://host[:port]` of an http(s) URI, as a browser writes it in `Origin`."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


class CorsMiddleware:
    """Preflights answered `204`, answers marked, for the origins allowed on each path."""

    def __init__(self, app: ASGIApp, allowed_origins: Collection[str]) -> None:
        self.app = app
        self.allowed = frozenset(origin.rstrip("/").lower() for origin in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _covered(scope["path"]):
            await self.app(scope, receive, send)
            return
        origin = Headers(scope=scope).get("origin")
        allowed = origin is not None and await self._allows(scope, origin.lower())
        if allowed and scope["method"] == "OPTIONS" and "access-control-request-method" in Headers(scope=scope):
            await _preflight(origin or "", send)
            return
        await self.app(scope, receive, _marked(send, origin if allowed else None))

    async def _allows(self, scope: Scope, origin: str) -> bool:
        if origin in self.allowed:
            return True
        if scope["path"] not in TOKEN_PATHS:
            return False
        services = scope.get("state", {}).get("services")
        if services is None:
            return False
        async with services.pool.connection() as conn:
            cursor = await conn.execute(_PUBLIC_CLIENT_ORIGIN, {"origin": origin})
            row = await cursor.fetchone()
        return bool(row and row["known"])


def _covered(path: str) -> bool:
    return path in PATHS or path.startswith(PREFIXES)


async def _preflight(origin: str, send: Send) -> None:
    headers = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-methods", ALLOW_METHODS.encode()),
        (b"access-control-allow-headers", ALLOW_HEADERS.encode()),
        (b"access-control-max-age", MAX_AGE.encode()),
        (b"vary", b"Origin"),
    ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _marked(send: Send, origin: str | None) -> Send:
    """`send`, adding `Vary: Origin` to every answer of a covered path, and, for an allowed origin, the
    headers that let its script read the answer."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers.add_vary_header("Origin")
            if origin is not None:
                headers["Access-Control-Allow-Origin"] = origin
                headers["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
        await send(message)

    return sending
