"""Liveness, readiness and metrics."""

from __future__ import annotations

import dataclasses

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rpc.core.envelope import encoder
from rpc.core.errors import Unavailable
from rpc.core.metrics import scrape
from rpc.core.responses import error_response, json_response, render
from rpc.services import services


async def healthz(request: Request) -> Response:
    """Liveness: 200 when this process can reach the database, else 503 with Retry-After."""
    return await _answer(request, "SELECT 1")


async def readyz(request: Request) -> Response:
    """Readiness: the database answers, the webhook queue's tables are there, and every search index of this
    process has been built and has caught up with the database (503 `search_catching_up` until then: searches
    are answered meanwhile, exactly, by PostgreSQL, only slower)."""
    waiting = [index.status for index in services(request).indexes.values() if not index.status.ready]
    if waiting:
        details = [dataclasses.asdict(status) for status in waiting]
        return json_response(
            encoder.encode({"status": "search_catching_up", "indexes": details}),
            503,
            headers={"Cache-Control": "no-store", "Retry-After": "1"},
        )
    return await _answer(request, "SELECT 1 FROM procrastinate_jobs LIMIT 1")


async def metrics(request: Request) -> Response:
    state = services(request)
    return await scrape(request, state.metrics)


async def _answer(request: Request, probe: str) -> Response:
    try:
        async with services(request).pool.connection() as conn:
            await conn.execute(probe)
    except Exception as exc:
        response = render(exc, "healthz")
        return response if response.status_code == 503 else error_response(Unavailable())
    return json_response(encoder.encode({"status": "ok"}), headers={"Cache-Control": "no-store"})


routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
