"""Pure ASGI middleware: request ids, and HTTPS enforcement for production deployments."""

from __future__ import annotations

import re
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rpc.core.envelope import encode_error
from rpc.core.errors import HttpsRequired

_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
HSTS = "max-age=63072000; includeSubDomains"
# Liveness and readiness probes of an orchestrator come over plain HTTP from inside the cluster.
_PLAIN_HTTP_PATHS = frozenset({"/healthz", "/readyz"})


def with_header(send: Send, name: str, value: str) -> Send:
    """`send`, adding one header (that nothing else sets) to the response: appended to the raw list, which
    costs a fraction of a `MutableHeaders` on every response."""
    header = (name.lower().encode("latin-1"), value.encode("latin-1"))

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), header]
        await send(message)

    return sending


class RequestIdMiddleware:
    """Keeps a client's `X-Request-Id` when it is sane, else makes one; echoes it on every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = next((v for k, v in scope["headers"] if k == b"x-request-id"), b"").decode("latin-1")
        request_id = sent if _VALID_REQUEST_ID.match(sent) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        await self.app(scope, receive, with_header(send, "X-Request-Id", request_id))


class HttpsOnlyMiddleware:
    """On production deployments: refuse plain HTTP first of all (`403 https_required`), send HSTS.

    The scheme is the one uvicorn's proxy-header support decided (`X-Forwarded-Proto` from trusted proxies).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["scheme"] != "https" and scope["path"] not in _PLAIN_HTTP_PATHS:
            error = HttpsRequired()
            body = encode_error(error.code, error.message)
            await send(
                {
                    "type": "http.response.start",
                    "status": error.status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, with_header(send, "Strict-Transport-Security", HSTS))
