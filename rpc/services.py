"""The long-lived resources of one process, opened in the app's lifespan (or by `bin/worker`) and closed after it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, cast

import httpx
from limits.aio.storage import Storage
from starlette.requests import Request

from rpc.auth import housekeeping
from rpc.auth.authenticate import Authenticator
from rpc.auth.external import ExternalProvider
from rpc.auth.identity import IdentityProvider
from rpc.auth.keyring import KeyRing
from rpc.auth.passwords import Passwords
from rpc.auth.people import People
from rpc.auth.teams import Teams
from rpc.business import Business
from rpc.core import idempotency
from rpc.core.crypto import Sealer
from rpc.core.memory import Memory
from rpc.core.metrics import Metrics
from rpc.core.periodic import Periodic
from rpc.core.registry import Registry
from rpc.core.vocabulary import Vocabulary
from rpc.db.pool import Pool, open_pool
from rpc.db.reads import Reads
from rpc.dispatch.dispatcher import Dispatcher
from rpc.files import sweep
from rpc.files.service import Files
from rpc.limits.ratelimit import RateLimiter, development_budgets
from rpc.limits.throttle import Throttle, open_storage
from rpc.mail.outbox import Mail
from rpc.outbox.deliverer import Deliverer
from rpc.outbox.emit import Emitter, build_emitter
from rpc.outbox.endpoints import Webhooks
from rpc.outbox.sender import Sender
from rpc.outbox.ssrf import guard
from rpc.payments.provider import Provider
from rpc.privacy import retention
from rpc.privacy.steps import PrivacySteps
from rpc.search.index import SearchIndex
from rpc.settings import Settings
from rpc.worker import disabling
from rpc.worker.runtime import queue_pool, run_worker, worker_app

IN_PROCESS_CONCURRENCY = 10


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    registry: Registry
    vocabulary: Vocabulary  # scopes, plans, event kinds, for the panel's forms
    pool: Pool
    reads: Reads  # where reads go: the replicas that have replayed their position, else `pool` (docs/scaling.md)
    http: httpx.AsyncClient  # outgoing calls (the payment provider's checkout from the panel's Billing page)
    keyring: KeyRing
    identity: IdentityProvider
    throttle: Throttle
    dispatcher: Dispatcher
    emitter: Emitter
    webhooks: Webhooks
    providers: Mapping[str, Provider]
    metrics: Metrics
    counters: Storage  # the rate limiter's counters (the panel's overview reads the account's windows)
    people: People  # sign-up, verification, password reset and change (docs/people.md)
    teams: Teams
    indexes: Mapping[str, SearchIndex]  # this process's search indexes, by corpus name
    memory: Memory  # what procedures keep between calls in this app (`ctx.kept`)
    privacy: PrivacySteps  # the business's share of a person's export and erasure (the panel's Profile page)
    files: Files  # the file store and the download links
    mail: Mail  # every kind of mail, the framework's and the business's, queued in the caller's transaction

    @classmethod
    @contextlib.asynccontextmanager
    async def running(
        cls, settings: Settings, database_url: str, registry: Registry, business: Business, *, deliver: bool
    ) -> AsyncIterator[Services]:
        """Everything opened; with `deliver`, a webhook worker runs in this process too (drained at exit)."""
        async with contextlib.AsyncExitStack() as stack:
            pool = await stack.enter_async_context(open_pool(settings, database_url))
            reads = await stack.enter_async_context(Reads.running(settings, pool, database_url))
            http = await stack.enter_async_context(httpx.AsyncClient(trust_env=False, follow_redirects=False))
            async with pool.connection() as conn:
                keyring = await KeyRing.load(conn, Sealer(settings.secret_key))
            await stack.enter_async_context(in_background(keyring.keep_fresh(pool)))
            vocabulary = business.vocabulary
            if settings.service_env == "development":  # a local install: room to try things (rpc.limits.ratelimit)
                vocabulary = dataclasses.replace(vocabulary, plans=development_budgets(vocabulary.plans))
            emitter = build_emitter(settings, vocabulary.event_kinds)
            external = ExternalProvider(settings, http) if settings.auth_issuer else None
            metrics = Metrics(settings.metrics_allow, pool, reads)
            counters = open_storage(settings.rate_limit_storage)
            passwords = Passwords(settings.password_hash_concurrency)
            mail = Mail(settings, emitter.queue, business.mail_subjects, business.mail_templates)
            files = Files.of(settings)
            indexes = {
                corpus.name: await stack.enter_async_context(
                    SearchIndex.running(corpus, settings.search_path, reads, settings.search_flush_seconds)
                )
                for corpus in business.corpora
            }
            memory = Memory()
            services = cls(
                settings=settings,
                registry=registry,
                vocabulary=vocabulary,
                pool=pool,
                reads=reads,
                http=http,
                keyring=keyring,
                identity=IdentityProvider(settings, keyring, passwords),
                throttle=_throttle(settings, counters),
                dispatcher=Dispatcher(
                    registry,
                    reads,
                    Authenticator(settings, keyring, external),
                    RateLimiter(counters, vocabulary.plans),
                    settings,
                    emitter,
                    http,
                    metrics,
                    business.probes,
                    indexes,
                    memory,
                    files,
                    mail,
                ),
                emitter=emitter,
                webhooks=Webhooks(settings, emitter),
                providers=business.providers,
                metrics=metrics,
                counters=counters,
                people=People(settings, passwords, mail),
                teams=Teams(settings, passwords, mail),
                indexes=indexes,
                memory=memory,
                privacy=business.privacy,
                files=files,
                mail=mail,
            )
            if deliver:
                sender = await stack.enter_async_context(Sender(guard(settings)))
                queue, listen = await stack.enter_async_context(queue_pool(settings, pool))
                app = worker_app(periodic_work(settings, business))
                await app.open_async(queue)
                deliverer = Deliverer(settings, pool, sender, metrics, concurrency=IN_PROCESS_CONCURRENCY)
                worker = run_worker(app, deliverer, emitter, settings, signals=False, listen=listen)
                # Cancelled at exit: no new job is taken; the attempts in flight are made and settled.
                await stack.enter_async_context(in_background(worker))
            yield services


def periodic_work(settings: Settings, business: Business) -> dict[str, Periodic]:
    """Every periodic job the workers run, by name, listed here alone: the framework's clean-ups, retention, the
    files sweep and the disabling of failing endpoints, and the business's work."""
    return {
        "forget_expired": housekeeping.PERIODIC,
        "forget_idempotency_keys": idempotency.PERIODIC,
        "retention": retention.periodic(settings, business.privacy.retention),
        **sweep.periodic(settings, business.file_holders),
        "disable_failing_endpoints": disabling.periodic(settings),
        **business.periodic,
    }


def _throttle(settings: Settings, counters: Storage) -> Throttle:
    """The limits on what is asked without an account's budget: per address and e-mail or client for sign-in
    and tokens, per address for the payment receiver, per person for the panel's changes."""
    return Throttle(
        counters,
        {
            "signin_email": settings.signin_limits_per_email,
            "signin_address": settings.signin_limits_per_address,
            # sign-up, password reset and a new verification link: each sends mail, so counted apart from sign-in
            "people_email": settings.signin_limits_per_email,
            "people_address": settings.signin_limits_per_address,
            # per client id as claimed, before authentication: caps abuse (secrets have 256 bits)
            "oauth_token_client": settings.oauth_token_limit_per_client,
            "oauth_token_address": settings.signin_limits_per_address,
            "payment_notifications": settings.payment_notification_limit_per_address,
            "panel_writes": settings.panel_write_limit_per_user,
        },
        open_groups={"panel_writes"},
    )


async def deliver_only(settings: Settings, database_url: str, business: Business, concurrency: int) -> None:
    """`bin/worker`: delivery and the periodic work alone, until SIGTERM; running attempts are drained first."""
    async with (
        open_pool(settings, database_url) as pool,
        queue_pool(settings, pool) as (queue, listen),
        Sender(guard(settings)) as sender,
    ):
        app = worker_app(periodic_work(settings, business))
        await app.open_async(queue)
        emitter = build_emitter(settings, business.vocabulary.event_kinds)
        deliverer = Deliverer(settings, pool, sender, concurrency=concurrency)
        await run_worker(app, deliverer, emitter, settings, signals=True, listen=listen)


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
