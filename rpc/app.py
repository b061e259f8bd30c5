"""create_app(): the only place that wires the framework (rpc) and the operations (procedures) together."""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import AsyncIterator, Callable, Sequence

import psycopg
from psycopg_pool import PoolTimeout
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from procedures import assembly
from rpc.auth.keyring import ensure_signing_key
from rpc.auth.oauth_policy import ScopePolicy
from rpc.business import Business
from rpc.core.cors import CorsMiddleware
from rpc.core.crypto import Sealer
from rpc.core.database_errors import translate
from rpc.core.errors import MethodNotAllowed, NotFound
from rpc.core.middleware import HttpsOnlyMiddleware, RequestIdMiddleware
from rpc.core.openapi import openapi_document
from rpc.core.registry import Registry, registry
from rpc.core.responses import error_response, json_response
from rpc.core.vocabulary import Vocabulary
from rpc.db.migrate import migrate_as_configured
from rpc.dispatch.dispatcher import ANY_METHOD, unknown_version
from rpc.outbox.queue import ensure_queue_schema
from rpc.panel import routes as panel
from rpc.services import Services
from rpc.settings import Settings
from rpc.web import auth_api as identity
from rpc.web import downloads, health
from rpc.web import receiver as payments
from rpc.web import routes as web
from rpc.web.access_log import redacting
from rpc.web.state import Web
from rpc.web.state import web as web_state


def load_registry() -> Registry:
    """Every procedure, registered by importing the operations' modules."""
    assembly.load()
    return registry


def assemble(settings: Settings) -> tuple[Registry, Business]:
    """What the operations hand over, and the registry checked against their vocabulary: a procedure whose
    scope or declared event kind the vocabulary does not know stops the start."""
    business = assembly.business(settings)
    registry.check(business.vocabulary, business.probes)
    return registry, business


def scope_policy(vocabulary: Vocabulary) -> ScopePolicy:
    """The scopes and their sentences, and each role's share of them, for the OAuth server."""
    every = frozenset(vocabulary.scopes)
    by_role = {role: scopes & every for role, scopes in vocabulary.oauth_role_scopes.items()}
    return ScopePolicy(sentences=dict(vocabulary.scopes), by_role=by_role, role_sentences=vocabulary.role_sentences)


def version() -> str:
    try:
        return importlib.metadata.version("hire-api")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


async def prepare_database(settings: Settings, database_url: str) -> int:
    """Everything a database needs before serving: our schema, the queue's schema, a first signing key."""
    sealer = Sealer(settings.secret_key)
    return await migrate_as_configured(
        settings, database_url, ensure_queue_schema, lambda conn: ensure_signing_key(conn, sealer)
    )


def create_app(settings: Settings, database_url: str | None = None, *, deliver: bool = True) -> Front:
    """The whole service as an ASGI app; `database_url` overrides the settings' (the embedded database's);
    with `deliver`, webhook delivery runs in the same process."""
    url = database_url or settings.database_url
    if not url:
        raise ValueError("no database: set DATABASE_URL, or start the service with bin/serve")
    procs, business = assemble(settings)
    openapi = openapi_document(procs, settings.public_url, version(), business.vocabulary.scopes)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Services | Web]]:
        with redacting(business.token_links):
            async with Services.running(settings, url, procs, business, deliver=deliver) as running:
                yield {"services": running, "web": Web.build(running, scope_policy(business.vocabulary))}

    async def openapi_json(request: Request) -> Response:
        return json_response(openapi)

    wrappers: list[Callable[[ASGIApp], ASGIApp]] = [RequestIdMiddleware]
    if settings.production:
        wrappers.append(HttpsOnlyMiddleware)
    wrappers.append(lambda app: CorsMiddleware(app, settings.cors_allowed_origins))
    site = Starlette(
        routes=[
            Route("/v{version:int}/{rest:path}", unknown_version, methods=ANY_METHOD),  # v1's own: see Front
            *identity.routes,
            *web.routes,
            *panel.routes,
            *business.panel_routes,
            *business.public_routes,
            *panel.fallback,
            *payments.routes,
            *downloads.routes,
            *health.routes,
            Route("/openapi.json", openapi_json, methods=["GET"]),
        ],
        middleware=[Middleware(wrap) for wrap in wrappers],
        lifespan=lifespan,
        exception_handlers={
            HTTPException: _http_error,
            PoolTimeout: _database_unreachable,
            psycopg.OperationalError: _database_unreachable,
        },
    )
    return Front(site, wrappers)


_CALL_PREFIX = "/v1/"


class Front:
    """The app uvicorn serves. A procedure call goes straight to the dispatcher, through the same middleware
    but past Starlette's router and its two exception layers, which a call never needs: the dispatcher
    renders every error itself, a 500 included. Anything else (lifespan too) goes to the Starlette app."""

    def __init__(self, site: Starlette, middleware: Sequence[Callable[[ASGIApp], ASGIApp]]) -> None:
        self.site = site
        call: ASGIApp = _call_procedure
        for wrap in reversed(middleware):
            call = wrap(call)
        self._call = call

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            name = _procedure_name(scope["path"])
            if name is not None:
                scope["path_params"] = {"name": name}
                await self._call(scope, receive, send)
                return
        await self.site(scope, receive, send)


def _procedure_name(path: str) -> str | None:
    """`name` of `/v1/{name}`, as Starlette's route would match it; None for any other path."""
    if not path.startswith(_CALL_PREFIX):
        return None
    name = path[len(_CALL_PREFIX) :]
    return name if name and "/" not in name else None


async def _call_procedure(scope: Scope, receive: Receive, send: Send) -> None:
    """The running dispatcher, from the lifespan state uvicorn copies into every request's scope."""
    running: Services = scope["state"]["services"]
    await running.dispatcher(scope, receive, send)


def app_from_env() -> Front:
    """The uvicorn factory of `bin/serve --workers N`: settings from the environment, delivery in-process."""
    return create_app(Settings.from_env())


def app_from_env_without_delivery() -> Front:
    """The uvicorn factory of `bin/serve --workers N --no-worker`."""
    return create_app(Settings.from_env(), deliver=False)


def proxied_app_from_env() -> ASGIApp:
    """The granian factory of `bin/serve --server granian`."""
    return _behind_proxies(Settings.from_env(), deliver=True)


def proxied_app_from_env_without_delivery() -> ASGIApp:
    """The granian factory of `bin/serve --server granian --no-worker`."""
    return _behind_proxies(Settings.from_env(), deliver=False)


def _behind_proxies(settings: Settings, *, deliver: bool) -> ASGIApp:
    """granian has no proxy-header handling of its own: uvicorn's takes the client address from
    X-Forwarded-For only when the peer is in FORWARDED_ALLOW_IPS, exactly as under uvicorn."""
    front = create_app(settings, deliver=deliver)
    # uvicorn types ASGI apps with its own TypedDicts; Starlette's are the same protocol, typed loosely.
    return ProxyHeadersMiddleware(front, trusted_hosts=settings.forwarded_allow_ips)  # type: ignore[arg-type,return-value]


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 (paths outside /v1) in the contract's error body."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return error_response(MethodNotAllowed((exc.headers or {}).get("Allow", "").split(", ")))
    if exc.status_code == 404:
        return error_response(NotFound("Nothing is served at this address."))
    return Response(exc.detail, status_code=exc.status_code, headers=exc.headers)


async def _database_unreachable(request: Request, exc: Exception) -> Response:
    """A page (outside /v1, whose dispatcher renders its own) that could not reach the database — no connection
    free within DB_POOL_TIMEOUT, the database gone, a lock conflict — is `503` with `Retry-After`, never a 500: a
    page to a browser, else the contract's error body."""
    assert isinstance(exc, PoolTimeout | psycopg.OperationalError)
    error = translate(exc, None)
    assert error is not None, "a driver's OperationalError is always an outage or a conflict"
    if "text/html" not in request.headers.get("accept", ""):
        return error_response(error)
    page = web_state(request).pages.error(error.status, "Busy for a moment", error.message)
    page.headers.update(error.headers())
    return page
