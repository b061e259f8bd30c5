"""The one `/v1/{name}` endpoint, a chain of small steps in the contract's check order:
find (404) → method (405) → authenticate (401) → scope (403) → limit (429) → params (415, 413, 400, 422)
→ role (403) → call (in a transaction for writes) → encode. Errors raised anywhere are rendered in one place.

A GET with a remembered credential takes the same steps with the remembered principal and confirms the
credential inside the call (`rpc.auth.remembered`): one statement in all for a list. Should the check fail,
nothing of that call is answered: it is given back to the rate limiter and dispatched afresh, from authenticate.
"""

from __future__ import annotations

import logging
import time

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from rpc.auth.authenticate import Authenticator
from rpc.auth.principal import Principal
from rpc.auth.remembered import CredentialCheck, Remembered, StaleCredential
from rpc.context import Context
from rpc.db import Pool
from rpc.envelope import Params, encode_result
from rpc.errors import Forbidden, InsufficientScope, MethodNotAllowed, UnknownProcedure
from rpc.events import Emitter
from rpc.metrics import Metrics
from rpc.params import read_params
from rpc.ratelimit import Quota, RateLimiter
from rpc.registry import Procedure, Registry
from rpc.responses import error_response, json_response, render
from rpc.settings import Settings
from rpc.types import Connection

log = logging.getLogger(__name__)

ANY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class Dispatcher:
    """Serves every registered procedure."""

    def __init__(
        self,
        registry: Registry,
        pool: Pool,
        authenticator: Authenticator,
        limiter: RateLimiter,
        settings: Settings,
        emitter: Emitter,
        http: httpx.AsyncClient,
        metrics: Metrics,
    ) -> None:
        self._registry = registry
        self._metrics = metrics
        self._limiter = limiter
        self._http = http
        self._pool = pool
        self._authenticator = authenticator
        self._settings = settings
        self._emitter = emitter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The `/v1/{name}` route's ASGI app: no request-response wrapper between the server and the call."""
        response = await self.answer(Request(scope, receive))
        await response(scope, receive, send)

    async def answer(self, request: Request) -> Response:
        started = time.perf_counter()
        name = request.path_params.get("name", "")
        counted: list[Quota] = []  # filled once the call passes the limit step: then every answer says so
        try:
            response = await self._dispatch(request, name, counted)
        except Exception as exc:
            response = render(exc, name, self._registry)
        for quota in counted:
            response.headers.update(quota.headers())
        label = name if self._registry.get(name) else "unknown"  # never a label per made-up name
        self._metrics.observe(label, response.status_code, started)
        return response

    async def _dispatch(self, request: Request, name: str, counted: list[Quota]) -> Response:
        proc = self._find(name, request.method)
        authorization = request.headers.get("authorization")
        if request.method == "GET":  # no body to wait for: one connection serves the whole call
            async with self._pool.connection() as conn:
                remembered = self._authenticator.remembered(authorization)
                if remembered is not None:
                    digest, memory = remembered
                    try:
                        return await self._call_remembered(proc, conn, request, memory, counted)
                    except StaleCredential:  # answer nothing of it: authenticate afresh, count afresh
                        self._authenticator.forget(digest)
                        if counted:
                            await self._limiter.release(memory.principal.account_id, memory.principal.plan)
                            counted.clear()
                principal = await self._authenticator.authenticate(conn, authorization)
                params = await self._admit(proc, request, principal, counted)
                return await self._respond(proc, conn, request, principal, params)
        async with self._pool.connection() as conn:  # given back while the body arrives
            principal = await self._authenticator.authenticate(conn, authorization)
        params = await self._admit(proc, request, principal, counted)
        async with self._pool.connection() as conn:
            return await self._respond(proc, conn, request, principal, params)

    async def _call_remembered(
        self, proc: Procedure, conn: Connection, request: Request, memory: Remembered, counted: list[Quota]
    ) -> Response:
        """A read for a remembered credential: its check rides in the read's statement, or runs after the read;
        either way it is confirmed before anything of the call, an error included, is answered."""
        check = CredentialCheck(memory)
        try:
            params = await self._admit(proc, request, memory.principal, counted)
            response = await self._respond(proc, conn, request, memory.principal, params, check)
        except StaleCredential:
            raise
        except Exception:
            await check.confirm(conn)
            raise
        await check.confirm(conn)
        return response

    def _find(self, name: str, method: str) -> Procedure:
        proc = self._registry.get(name)
        if proc is None:
            raise UnknownProcedure(f"No procedure named '{name}' exists in v1.")
        if method not in proc.methods:
            raise MethodNotAllowed(proc.methods)
        return proc

    async def _admit(self, proc: Procedure, request: Request, principal: Principal, counted: list[Quota]) -> Params:
        """What follows authentication, in the contract's order: scope (403), limit (429), params (415, 413,
        400, 422), role (403)."""
        if not principal.has_scope(proc.scope):
            raise InsufficientScope(proc.scope, principal.granted(self._registry.scopes))
        quota = await self._limiter.count(principal.account_id, principal.plan)
        if quota is not None:
            counted.append(quota)
        params = await read_params(proc, request)
        if proc.roles is not None and principal.role not in proc.roles:
            raise Forbidden(f"Your role ({principal.role}) may not call {proc.name}.")
        return params

    async def _respond(
        self,
        proc: Procedure,
        conn: Connection,
        request: Request,
        principal: Principal,
        params: Params,
        credential: CredentialCheck | None = None,
    ) -> Response:
        ctx = Context(
            principal=principal,
            conn=conn,
            request_id=getattr(request.state, "request_id", ""),
            client_address=request.client.host if request.client else "",
            settings=self._settings,
            emitter=self._emitter,
            http=self._http,
            credential=credential,
        )
        if proc.write:
            async with conn.transaction():
                result = await proc.handler(ctx, params)
        else:
            result = await proc.handler(ctx, params)
        return json_response(encode_result(result))


async def unknown_version(request: Request) -> Response:
    """Any path under a version other than v1."""
    return error_response(UnknownProcedure("This API version does not exist; use /v1."))
