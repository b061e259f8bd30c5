"""The long-lived resources of one server process, opened in the app's lifespan and closed after it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, cast

import httpx
from limits.aio.storage import Storage
from starlette.requests import Request

from rpc.auth.authenticate import Authenticator
from rpc.auth.external import ExternalProvider
from rpc.auth.identity import IdentityProvider
from rpc.auth.keyring import KeyRing
from rpc.auth.passwords import Passwords
from rpc.catalog import Catalog
from rpc.crypto import Sealer
from rpc.db import Pool, open_pool
from rpc.delivery import Deliverer, Queue, guard, queue_app, run_worker
from rpc.dispatch import Dispatcher
from rpc.events import Emitter
from rpc.metrics import Metrics
from rpc.providers import Provider
from rpc.ratelimit import RateLimiter
from rpc.registry import Registry
from rpc.sender import Sender
from rpc.settings import Settings
from rpc.throttle import Throttle, open_storage
from rpc.webhooks import Webhooks

IN_PROCESS_CONCURRENCY = 10


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    registry: Registry
    catalog: Catalog  # the business vocabulary (scopes, plans, event kinds), for the panel's forms
    pool: Pool
    keyring: KeyRing
    identity: IdentityProvider
    throttle: Throttle
    dispatcher: Dispatcher
    emitter: Emitter
    webhooks: Webhooks
    providers: Mapping[str, Provider]
    metrics: Metrics
    counters: Storage  # the rate limiter's counters (the panel's overview reads the account's windows)

    @classmethod
    @contextlib.asynccontextmanager
    async def running(
        cls, settings: Settings, database_url: str, registry: Registry, catalog: Catalog, *, deliver: bool
    ) -> AsyncIterator[Services]:
        """Everything opened; with `deliver`, a webhook worker runs in this process too (drained at exit)."""
        async with contextlib.AsyncExitStack() as stack:
            pool = await stack.enter_async_context(open_pool(settings, database_url))
            http = await stack.enter_async_context(httpx.AsyncClient(trust_env=False, follow_redirects=False))
            async with pool.connection() as conn:
                keyring = await KeyRing.load(conn, Sealer(settings.secret_key))
            await stack.enter_async_context(in_background(keyring.keep_fresh(pool)))
            queue_application = queue_app(catalog.periodic)
            await queue_application.open_async(pool)
            queue = Queue(queue_application)
            emitter = Emitter(settings, queue)
            external = ExternalProvider(settings, http) if settings.auth_issuer else None
            authenticator = Authenticator(settings, keyring, external)
            metrics = Metrics(settings.metrics_allow, pool)
            counters = open_storage(settings.rate_limit_storage)
            throttle = Throttle(
                counters,
                {
                    "signin_email": settings.signin_limits_per_email,
                    "signin_address": settings.signin_limits_per_address,
                    # per client id as claimed, before authentication: caps abuse (secrets have 256 bits)
                    "oauth_token_client": settings.oauth_token_limit_per_client,
                    "oauth_token_address": settings.signin_limits_per_address,
                    "payment_notifications": settings.payment_notification_limit_per_address,
                    "panel_writes": settings.panel_write_limit_per_user,
                },
                open_groups={"panel_writes"},
            )
            services = cls(
                settings=settings,
                registry=registry,
                catalog=catalog,
                pool=pool,
                keyring=keyring,
                identity=IdentityProvider(settings, keyring, Passwords(settings.password_hash_concurrency)),
                throttle=throttle,
                dispatcher=Dispatcher(
                    registry,
                    pool,
                    authenticator,
                    RateLimiter(counters, catalog.plans),
                    settings,
                    emitter,
                    http,
                    metrics,
                ),
                emitter=emitter,
                webhooks=Webhooks(settings, catalog.event_kinds, queue, emitter),
                providers=catalog.providers,
                metrics=metrics,
                counters=counters,
            )
            if deliver:
                sender = await stack.enter_async_context(Sender(guard(settings)))
                deliverer = Deliverer(settings, pool, queue, sender, metrics)
                worker = run_worker(
                    queue_application, deliverer, emitter, settings, concurrency=IN_PROCESS_CONCURRENCY, signals=False
                )
                # Cancelled at exit: procrastinate stops taking jobs and waits for the running attempts.
                await stack.enter_async_context(in_background(worker))
            yield services


async def deliver_only(settings: Settings, database_url: str, catalog: Catalog, concurrency: int) -> None:
    """`bin/worker`: delivery and the periodic work alone, until SIGTERM; running attempts are drained first."""
    async with open_pool(settings, database_url) as pool, Sender(guard(settings)) as sender:
        app = queue_app(catalog.periodic)
        await app.open_async(pool)
        queue = Queue(app)
        deliverer = Deliverer(settings, pool, queue, sender)
        await run_worker(app, deliverer, Emitter(settings, queue), settings, concurrency=concurrency, signals=True)


@contextlib.asynccontextmanager
async def in_background(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """`work` running as a task for the duration of the block; cancelled, and waited for, at its end."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def services(request: Request) -> Services:
    """The running services, from the lifespan state Starlette copies into every request."""
    return cast(Services, request.state.services)
