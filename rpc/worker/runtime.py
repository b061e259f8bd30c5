"""The worker's runtime: procrastinate's worker for the periodic work (the stalled-job retry among it) and e-mail,
with the webhook deliverer (`rpc.outbox.deliverer`) running beside it until stopped. Above both the outbox and the
mail rooms, which it runs together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import procrastinate
import psycopg
from procrastinate import JobContext
from procrastinate.exceptions import ConnectorException
from procrastinate.jobs import Notification

from rpc.core.periodic import Periodic
from rpc.db.pool import Pool, open_pool
from rpc.mail.postman import Postman, send_mail
from rpc.outbox.deliverer import Deliverer
from rpc.outbox.emit import Emitter
from rpc.outbox.policy import polling_interval
from rpc.outbox.queue import DELIVERY_QUEUE, MAIL_TASK, QUEUE
from rpc.settings import Settings

log = logging.getLogger(__name__)

PERIODIC_CONCURRENCY = 4  # procrastinate's worker runs only the periodic work now
QUEUE_POOL_MAX = PERIODIC_CONCURRENCY + 2  # its own queries, and its listening connection's spare


def worker_app(periodic: Mapping[str, Periodic]) -> procrastinate.App:
    """A procrastinate app with the retry of stalled jobs and the `periodic` work (`rpc.services.periodic_work`);
    open it on our pool (`await app.open_async(pool)`) to run a worker.

    Built per call (not a module-level app), so that several can live in one process, as in the tests.
    """
    app = procrastinate.App(connector=procrastinate.PsycopgConnector())
    app.task(name=MAIL_TASK, queue=QUEUE, pass_context=True)(send_mail)
    _schedule(app, "retry_stalled_jobs", "* * * * * */5", retry_stalled_jobs)  # every 5 seconds
    for name, job in periodic.items():
        _schedule(app, name, job.cron, _periodic(name, job))
    return app


def _schedule(app: procrastinate.App, name: str, cron: str, function: Callable[..., Awaitable[None]]) -> None:
    """A task run every `cron` by one of the workers (procrastinate defers each tick once)."""
    # Ahead of the rest of the periodic work: the stalled-job retry must not wait behind it.
    task = app.task(name=f"hire.{name}", queue=QUEUE, pass_context=True, queueing_lock=name, priority=100)(function)
    app.periodic(cron=cron, periodic_id=name)(task)


def _periodic(name: str, job: Periodic) -> Callable[[JobContext, int], Awaitable[None]]:
    async def run(context: JobContext, timestamp: int) -> None:
        deliverer: Deliverer = context.additional_context["deliverer"]
        async with deliverer.pool.connection() as conn, conn.transaction():
            await job.run(conn, context.additional_context["emitter"])
        log.debug("periodic %s done", name)

    return run


@contextlib.asynccontextmanager
async def queue_pool(settings: Settings, pool: Pool) -> AsyncIterator[tuple[Pool, bool]]:
    """The pool procrastinate's worker runs on, and whether the workers may LISTEN for new jobs (which needs a
    session of its own): the service's pool; behind a transaction pooler, a small pool of `DATABASE_DIRECT_URL`,
    or without one the service's pool and no LISTEN: new jobs are then found by polling (said once in the log)."""
    if not settings.pooled_by_transaction:
        yield pool, True
    elif settings.database_direct_url:
        async with open_pool(
            settings, settings.database_direct_url, name="hire-queue", min_size=1, max_size=QUEUE_POOL_MAX
        ) as direct:
            yield direct, True
    else:
        log.warning(
            "DATABASE_POOLER=transaction without DATABASE_DIRECT_URL: the workers do not LISTEN for new jobs, they "
            "poll for them every %g s",
            polling_interval(settings.webhook_retry_waits),
        )
        yield pool, False


async def retry_stalled_jobs(context: JobContext, timestamp: int) -> None:
    """Requeue the jobs of workers whose heartbeat stopped (killed mid-attempt): nothing stays `doing`."""
    stalled_after: float = context.additional_context["stalled_after"]
    manager = context.app.job_manager
    for job in await manager.get_stalled_jobs(seconds_since_heartbeat=stalled_after):
        log.warning("retrying stalled job %s of a worker that stopped", job.id)
        await manager.retry_job(job)


async def run_worker(
    app: procrastinate.App,
    deliverer: Deliverer,
    emitter: Emitter,
    settings: Settings,
    *,
    signals: bool,
    listen: bool = True,
) -> None:
    """Deliver, and run the periodic work, until stopped (SIGTERM, or cancellation): the attempts in flight are
    made and settled first. Without `listen`, new jobs are found by polling alone (`queue_pool`)."""
    heartbeat = settings.worker_heartbeat
    stopping = asyncio.Event()
    listening = asyncio.create_task(_listen(app, deliverer)) if listen else None
    delivering = asyncio.create_task(deliverer.run(stopping))
    try:
        await app.run_worker_async(
            listen_notify=listen,
            fetch_job_polling_interval=polling_interval(settings.webhook_retry_waits),
            queues=[QUEUE],
            concurrency=PERIODIC_CONCURRENCY,
            additional_context={
                "deliverer": deliverer,
                "postman": Postman(settings, deliverer.pool, emitter.queue),
                "emitter": emitter,
                "stalled_after": 3 * heartbeat,
            },
            install_signal_handlers=signals,
            delete_jobs="successful",
            update_heartbeat_interval=heartbeat,
            stalled_worker_timeout=3 * heartbeat,
            shutdown_graceful_timeout=settings.webhook_timeout + 5,
            name="webhooks",
        )
    finally:
        stopping.set()
        await delivering
        if listening is not None:
            listening.cancel()


async def _listen(app: procrastinate.App, deliverer: Deliverer) -> None:
    """Wake the deliverer when a delivery job is deferred (procrastinate's notification on insert); listening
    again after the database was lost. Meanwhile the deliverer still polls."""

    async def wake(*, channel: str, notification: Notification) -> None:
        deliverer.notified.set()

    while True:
        try:
            await app.job_manager.listen_for_jobs(on_notification=wake, queues=[DELIVERY_QUEUE])
        except (psycopg.Error, ConnectorException) as exc:
            log.warning("listening for delivery jobs failed, listening again in 1 s: %s", exc)
        await asyncio.sleep(1.0)
