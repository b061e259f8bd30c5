"""The one `/v1/{name}` endpoint, a chain of small steps in the contract's check order:
find (404) → method (405) → authenticate (401) → scope (403) → limit (429) → params (415, 413, 400, 422)
→ role (403) → call (in a transaction for writes) → encode. Errors raised anywhere are rendered in one place.

Authentication always asks the database (a remembered credential runs its one lookup again), before the body
is read and without holding a connection while it arrives. A write then confirms the credential once more as
the first statement of its own transaction, so that a key revoked, a user removed or a role changed while the
body was arriving stops the write (CONTRACT.md §23).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from rpc.auth.authenticate import Authenticator
from rpc.auth.principal import Principal
from rpc.auth.remembered import Credential
from rpc.core.context import Context
from rpc.core.envelope import Params, encode_result
from rpc.core.errors import Forbidden, InsufficientScope, MethodNotAllowed, UnknownProcedure
from rpc.core.params import read_params
from rpc.core.registry import Procedure, Registry
from rpc.core.responses import error_response, json_response, render
from rpc.core.types import Connection
from rpc.db.pool import Pool
from rpc.limits.ratelimit import Quota, RateLimiter
from rpc.ops.metrics import Metrics
from rpc.outbox.emit import Emitter
from rpc.settings import Settings

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
        probes: Mapping[str, str],
    ) -> None:
        self._registry = registry
        self._probes = {proc.name: {name: probes[name] for name in proc.probes} for proc in registry}
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
        probes = self._probes[proc.name]
        if request.method == "GET":  # no body to wait for: one connection serves the whole call
            async with self._pool.connection() as conn:
                credential, probed = await self._authenticator.authenticate(conn, authorization, probes)
                params = await self._admit(proc, request, credential.principal, counted)
                return await self._respond(proc, request, credential, params, conn, probed)
        async with self._pool.connection() as conn:  # given back while the body arrives
            credential, probed = await self._authenticator.authenticate(conn, authorization, probes)
        params = await self._admit(proc, request, credential.principal, counted)
        if proc.calls_out:
            return await self._respond(proc, request, credential, params, None, probed)
        async with self._pool.connection() as conn:
            return await self._respond(proc, request, credential, params, conn, probed)

    def _find(self, name: str, method: str) -> Procedure:
        proc = self._registry.get(name)
        if proc is None:
            raise UnknownProcedure(self._registry.unknown(name))
        if method not in proc.methods:
            raise MethodNotAllowed(proc.methods)
        return proc

    async def _admit(self, proc: Procedure, request: Request, principal: Principal, counted: list[Quota]) -> Params:
        """What follows authentication, in the contract's order: scope (403), limit (429), params (415, 413,
        400, 422), role (403)."""
        self._check_scope(proc, principal)
        quota = await self._limiter.count(principal.account_id, principal.plan)
        if quota is not None:
            counted.append(quota)
        params = await read_params(proc, request)
        self._check_role(proc, principal)
        return params

    def _check_scope(self, proc: Procedure, principal: Principal) -> None:
        if not principal.has_scope(proc.scope):
            raise InsufficientScope(proc.scope, principal.granted(self._registry.scopes))

    def _check_role(self, proc: Procedure, principal: Principal) -> None:
        if proc.roles is not None and principal.role not in proc.roles:
            raise Forbidden(f"Your role ({principal.role}) may not call {proc.name}.")

    async def _respond(
        self,
        proc: Procedure,
        request: Request,
        credential: Credential,
        params: Params,
        conn: Connection | None,
        probed: Mapping[str, Any],
    ) -> Response:
        def context(principal: Principal, connection: Connection | None) -> Context:
            return Context(
                principal=principal,
                request_id=getattr(request.state, "request_id", ""),
                client_address=request.client.host if request.client else "",
                settings=self._settings,
                emitter=self._emitter,
                http=self._http,
                connection=connection,
                transactions=lambda: self._transaction(proc, credential),
                emits=frozenset(proc.emits),
                probes=self._probes[proc.name],
                probed=probed,
            )

        if conn is not None and proc.write:
            async with conn.transaction():
                principal = await self._reconfirm(conn, proc, credential)
                result = await proc.handler(context(principal, conn), params)
        else:
            result = await proc.handler(context(credential.principal, conn), params)
        return json_response(encode_result(result))

    async def _reconfirm(self, conn: Connection, proc: Procedure, credential: Credential) -> Principal:
        """The credential confirmed inside the write's transaction: revoked meanwhile is `401`; a principal that
        changed meanwhile must still hold the procedure's scope and role (`403`)."""
        principal = await self._authenticator.confirm(conn, credential)
        if principal != credential.principal:
            self._check_scope(proc, principal)
            self._check_role(proc, principal)
        return principal

    @contextlib.asynccontextmanager
    async def _transaction(self, proc: Procedure, credential: Credential) -> AsyncIterator[Connection]:
        """A connection and transaction of a `calls_out` procedure's own, the credential confirmed inside."""
        async with self._pool.connection() as conn, conn.transaction():
            await self._reconfirm(conn, proc, credential)
            yield conn


async def unknown_version(request: Request) -> Response:
    """Any path under a version other than v1, and a path under v1 that is no procedure name."""
    version, rest = request.path_params["version"], request.path_params["rest"]
    if version != 1:
        return error_response(UnknownProcedure(f"There is no API version {version}; use /v1/<procedure>."))
    dotted = rest.strip("/").replace("/", ".")
    if not dotted:
        return error_response(UnknownProcedure("Name a procedure: /v1/<procedure>, e.g. /v1/jobs.list."))
    return error_response(UnknownProcedure(f"Procedure names use dots: /v1/{dotted[:100]}, not /v1/{rest[:100]}."))
