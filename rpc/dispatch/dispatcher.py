"""The one `/v1/{name}` endpoint, a chain of small steps in the contract's check order:
find (404) → method (405) → authenticate (401) → scope (403) → limit (429) → params (415, 413, 400, 422)
→ role (403) → call (in a transaction for writes) → encode. Errors raised anywhere are rendered in one place.

Authentication always asks the database (a remembered credential runs its one lookup again), before the body
is read and without holding a connection while it arrives. A write then confirms the credential once more as
the first statement of its own transaction, so that a key revoked, a user removed or a role changed while the
body was arriving stops the write (docs/security.md). With replicas, the credential's statement also reads the
primary's WAL position, and a read runs where that position has been replayed (`rpc.db.reads`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import psycopg
from psycopg_pool import PoolTimeout
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from rpc.auth.authenticate import Authenticator
from rpc.auth.remembered import Credential
from rpc.core import idempotency
from rpc.core.database_errors import LOCK_CONFLICTS, translate
from rpc.core.envelope import Params, encode_result
from rpc.core.errors import Forbidden, InsufficientScope, MethodNotAllowed, RpcError, UnknownProcedure
from rpc.core.memory import Memory
from rpc.core.metrics import Metrics
from rpc.core.multipart import Upload, read_upload
from rpc.core.params import read_params
from rpc.core.principal import Principal
from rpc.core.registry import Procedure, Registry
from rpc.core.responses import error_response, json_response, render
from rpc.core.types import Connection
from rpc.db import positions
from rpc.db.reads import Reads
from rpc.dispatch.context import Context
from rpc.dispatch.steps import Steps
from rpc.files.service import Files
from rpc.limits.ratelimit import Quota, RateLimiter
from rpc.mail.outbox import Mail
from rpc.outbox.emit import Emitter
from rpc.settings import Settings

log = logging.getLogger(__name__)

ANY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class Dispatcher:
    """Serves every registered procedure."""

    def __init__(
        self,
        registry: Registry,
        reads: Reads,
        authenticator: Authenticator,
        limiter: RateLimiter,
        settings: Settings,
        emitter: Emitter,
        http: httpx.AsyncClient,
        metrics: Metrics,
        probes: Mapping[str, str],
        indexes: Mapping[str, Any],
        memory: Memory,
        files: Files,
        mail: Mail,
    ) -> None:
        self._files = files
        self._mail = mail
        self._registry = registry
        self._indexes = indexes
        self._memory = memory
        self._probes = {proc.name: {name: probes[name] for name in proc.probes} for proc in registry}
        # What the credential's statement reads for a call: its procedure's probes, and for a read that a replica
        # may answer, the primary's position.
        self._reading = {
            proc.name: {**self._probes[proc.name], positions.PROBE: positions.POSITION_SQL}
            if reads.replicated and not proc.write
            else self._probes[proc.name]
            for proc in registry
        }
        self._metrics = metrics
        self._limiter = limiter
        self._http = http
        self._pool = reads.primary
        self._reads = reads
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
        probes = self._reading[proc.name]
        await self._authenticator.prepare(authorization)
        if request.method in ("GET", "HEAD") and not self._reads.replicated:  # one connection serves the call
            async with self._pool.connection() as conn:
                credential, probed = await self._authenticator.authenticate(conn, authorization, probes)
                call = await self._admit(proc, request, credential, counted, probed)
                self._reads.answered_by_primary()
                return await self._read(call, conn)
        async with self._pool.connection() as conn:  # given back while the body arrives
            credential, probed = await self._authenticator.authenticate(conn, authorization, probes)
        call = await self._admit(proc, request, credential, counted, probed)
        try:
            if not proc.write:
                return await self._reads.run(probed.get(positions.PROBE), lambda conn: self._read(call, conn))
            if proc.calls_out:
                return await self._call_out(call)
            async with self._pool.connection() as conn:
                return await self._write(call, conn)
        finally:
            _discard(call.params)

    def _find(self, name: str, method: str) -> Procedure:
        proc = self._registry.get(name)
        if proc is None:
            raise UnknownProcedure(self._registry.unknown(name))
        if method not in proc.methods:
            raise MethodNotAllowed(proc.methods)
        return proc

    async def _admit(
        self,
        proc: Procedure,
        request: Request,
        credential: Credential,
        counted: list[Quota],
        probed: Mapping[str, Any],
    ) -> _Call:
        """What follows authentication, in the contract's order: scope (403), limit (429), params (415, 413,
        400, 422, the Idempotency-Key among them), role (403)."""
        principal = credential.principal
        self._check_scope(proc, principal)
        quota = await self._limiter.count(principal.account_id, principal.plan)
        if quota is not None:
            counted.append(quota)
        if proc.upload:
            upload = await read_upload(request, self._settings.files_max_bytes)
            params: Params = upload
            # What a retry must repeat, as the JSON the key's fingerprint is made of.
            body: bytes | None = msgspec.json.encode({"filename": upload.filename, "sha256": upload.sha256})
        else:
            params, body = await read_params(proc, request)
        try:
            key = idempotency.key_of(request) if proc.write else None
            self._check_role(proc, principal)
        except BaseException:
            _discard(params)
            raise
        claim = idempotency.claim_for(principal.account_id, principal.user_id, key, proc.name, body) if key else None
        return _Call(proc, request, credential, params, probed, claim)

    def _check_scope(self, proc: Procedure, principal: Principal) -> None:
        if not any(principal.has_scope(scope) for scope in proc.scopes):
            raise InsufficientScope(proc.scope, principal.granted(self._registry.scopes))

    def _check_role(self, proc: Procedure, principal: Principal) -> None:
        if proc.roles is not None and principal.role not in proc.roles:
            raise Forbidden(f"Your role ({principal.role}) may not call {proc.name}.")

    async def _read(self, call: _Call, conn: Connection) -> Response:
        result = await call.proc.handler(self._context(call, call.credential.principal, conn), call.params)
        return json_response(encode_result(result))

    async def _write(self, call: _Call, conn: Connection) -> Response:
        """A write in one transaction, tried once more when a lock conflict (a deadlock with another transaction,
        a lock timeout) rolled the whole of it back: nothing of it was applied and nothing answered yet, and the
        second try usually finds the other transaction gone. A second conflict is reported (`Busy`)."""
        try:
            return await self._write_once(call, conn)
        except LOCK_CONFLICTS as exc:
            log.info("%s met a lock conflict (%s) and is tried once more", call.proc.name, type(exc).__name__)
            return await self._write_once(call, conn)

    async def _write_once(self, call: _Call, conn: Connection) -> Response:
        """A write in one transaction, its credential confirmed first; with an Idempotency-Key, the key claimed
        and the answer kept in the same transaction."""
        async with conn.transaction():
            principal = await self._reconfirm(conn, call.proc, call.credential)
            if call.claim is None:
                result = await call.proc.handler(self._context(call, principal, conn), call.params)
                return json_response(encode_result(result))
            kept = await idempotency.claim(conn, call.claim)
            assert not isinstance(kept, idempotency.Interrupted), "one transaction never stores part of a call"
            if kept is not None:
                return _replayed(kept)
            response = await self._answer(call, self._context(call, principal, conn), savepoint=conn)
            await idempotency.keep(conn, call.claim, response.status_code, bytes(response.body))
            return response

    async def _call_out(self, call: _Call) -> Response:
        """A write that opens its own transactions; with an Idempotency-Key, the key is claimed (with a lease)
        before and its answer kept after, each in a short transaction of its own. A failure once part of the call
        was stored says so, and keeps the key for a retry to resume the call (`Steps`)."""
        if call.claim is None:
            steps = Steps(None)
            with steps.telling(self._registry):
                result = await call.proc.handler(
                    self._context(call, call.credential.principal, None, steps), call.params
                )
            return json_response(encode_result(result))
        async with self._transaction(call.proc, call.credential) as conn:
            claimed = await idempotency.claim(conn, call.claim, lease=idempotency.CALLS_OUT_LEASE)
        if isinstance(claimed, idempotency.Kept):
            return _replayed(claimed)
        steps = Steps(call.claim, claimed.progress if claimed else None)
        with steps.telling(self._registry):
            try:
                response = await self._answer(
                    call, self._context(call, call.credential.principal, None, steps), savepoint=None
                )
                async with self._pool.connection() as conn:
                    await idempotency.keep(conn, call.claim, response.status_code, bytes(response.body))
            except BaseException:
                await self._release(call.claim)
                raise
        return response

    async def _release(self, claim: idempotency.Claim) -> None:
        """The key of a call that ended without an answer kept, let go (`idempotency.release`); when the database
        cannot be reached for that either, its lease runs out instead."""
        try:
            async with self._pool.connection() as conn:
                await idempotency.release(conn, claim)
        except (psycopg.Error, PoolTimeout) as exc:
            log.warning("an Idempotency-Key could not be let go (%s); its lease will run out", type(exc).__name__)

    async def _answer(self, call: _Call, ctx: Context, *, savepoint: Connection | None) -> Response:
        """The procedure's answer to keep for its key: its result, or its own refusal (403, 404, 409), whose work
        is rolled back to a savepoint on `savepoint` (the key's claim stays); anything else is raised, and
        nothing is kept."""
        try:
            if savepoint is None:
                result = await call.proc.handler(ctx, call.params)
            else:
                async with savepoint.transaction():
                    result = await call.proc.handler(ctx, call.params)
            return json_response(encode_result(result))
        except (RpcError, psycopg.Error) as exc:
            if isinstance(exc, LOCK_CONFLICTS):
                raise  # the whole transaction is tried again, or reported, by `_write`
            error = exc if isinstance(exc, RpcError) else translate(exc, self._registry)
            if error is None or error.status not in idempotency.KEPT_REFUSALS:
                raise
            return error_response(error)

    def _context(
        self, call: _Call, principal: Principal, connection: Connection | None, steps: Steps | None = None
    ) -> Context:
        return Context(
            principal=principal,
            request_id=getattr(call.request.state, "request_id", ""),
            client_address=call.request.client.host if call.request.client else "",
            user_agent=call.request.headers.get("user-agent", ""),
            settings=self._settings,
            emitter=self._emitter,
            http=self._http,
            connection=connection,
            transactions=lambda: self._transaction(call.proc, call.credential, steps),
            memory=self._memory,
            emits=frozenset(call.proc.emits),
            probes=self._probes[call.proc.name],
            probed=call.probed,
            indexes=self._indexes,
            files=self._files,
            mail=self._mail,
            steps=steps,
        )

    async def _reconfirm(self, conn: Connection, proc: Procedure, credential: Credential) -> Principal:
        """The credential confirmed inside the write's transaction: revoked meanwhile is `401`; a principal that
        changed meanwhile must still hold the procedure's scope and role (`403`)."""
        principal = await self._authenticator.confirm(conn, credential)
        if principal != credential.principal:
            self._check_scope(proc, principal)
            self._check_role(proc, principal)
        return principal

    @contextlib.asynccontextmanager
    async def _transaction(
        self, proc: Procedure, credential: Credential, steps: Steps | None = None
    ) -> AsyncIterator[Connection]:
        """A connection and transaction of a `calls_out` procedure's own, the credential confirmed inside; what it
        records as stored counts once it has committed."""
        async with self._pool.connection() as conn:
            if steps is not None:
                steps.begin()
            async with conn.transaction():
                await self._reconfirm(conn, proc, credential)
                yield conn
            if steps is not None:
                steps.committed()


@dataclass(frozen=True, slots=True)
class _Call:
    """One admitted call: the procedure, the request, the caller's credential, the parameters, the probes read
    with the credential, and the Idempotency-Key claim it makes (writes sent with one)."""

    proc: Procedure
    request: Request
    credential: Credential
    params: Params
    probed: Mapping[str, Any]
    claim: idempotency.Claim | None


def _discard(params: Params) -> None:
    """An upload's staged bytes, removed once the call is over (the store holds its own copy)."""
    if isinstance(params, Upload):
        params.discard()


def _replayed(kept: idempotency.Kept) -> Response:
    """The answer a key kept, said to be a replay."""
    return json_response(kept.body, kept.status, {idempotency.REPLAYED: "true"})


async def unknown_version(request: Request) -> Response:
    """Any path under a version other than v1, and a path under v1 that is no procedure name."""
    version, rest = request.path_params["version"], request.path_params["rest"]
    if version != 1:
        return error_response(UnknownProcedure(f"There is no API version {version}; use /v1/<procedure>."))
    dotted = rest.strip("/").replace("/", ".")
    if not dotted:
        return error_response(UnknownProcedure("Name a procedure: /v1/<procedure>, e.g. /v1/jobs.list."))
    return error_response(UnknownProcedure(f"Procedure names use dots: /v1/{dotted[:100]}, not /v1/{rest[:100]}."))
