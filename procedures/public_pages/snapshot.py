"""One consistent view of the published jobs for a long answer: a read-only, repeatable-read transaction on a
connection of its own, whose published-set version (for `ETag`) is the version of every row then streamed from a
server-side cursor, and which is given back however the stream ends (done, failed, or the client gone)."""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from rpc.api import Connection
from rpc.db.pool import Pool

BATCH = 500
_STATE = "SELECT version, changed_at, total FROM job_totals WHERE status = 'published'"


@dataclass(frozen=True, slots=True)
class Published:
    """The published set as the snapshot sees it."""

    version: int
    changed_at: dt.datetime
    total: int

    def etag(self, kind: str) -> str:
        return f'"{kind}-{self.version}"'

    @property
    def last_modified(self) -> str:
        return email.utils.format_datetime(self.changed_at.astimezone(dt.UTC), usegmt=True)

    def headers(self, kind: str) -> dict[str, str]:
        return {
            "ETag": self.etag(kind),
            "Last-Modified": self.last_modified,
            "Cache-Control": "public, max-age=60",
            "X-Content-Type-Options": "nosniff",
        }


def not_modified(request: Request, published: Published, kind: str) -> bool:
    """RFC 9110 §13.2.2: If-None-Match decides when sent; else If-Modified-Since (whole seconds)."""
    if (tags := request.headers.get("if-none-match")) is not None:
        sent = {tag.strip().removeprefix("W/") for tag in tags.split(",")}
        return "*" in sent or published.etag(kind) in sent
    if (since := request.headers.get("if-modified-since")) is not None:
        try:
            moment = email.utils.parsedate_to_datetime(since)
        except (TypeError, ValueError):
            return False
        return moment.tzinfo is not None and published.changed_at <= moment
    return False


async def answer(
    request: Request,
    pool: Pool,
    kind: str,
    media_type: str,
    body: Callable[[Connection, Published], AsyncIterator[str]],
    exists: Callable[[Published], bool] = lambda _: True,
) -> Response:
    """`body`, streamed from one snapshot, with its validators; `304` when the client holds this version, and
    `404` when `exists` says the snapshot has no such document."""
    stack = contextlib.AsyncExitStack()
    try:
        conn = await stack.enter_async_context(pool.connection())
        await stack.enter_async_context(conn.transaction())
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        row = await (await conn.execute(_STATE)).fetchone()
        assert row is not None, "schema.sql keeps the row of the published jobs"
        published = Published(**row)
        if not exists(published):
            await stack.aclose()
            return Response("Not found", status_code=404, media_type="text/plain")
        headers = published.headers(kind)
        if not_modified(request, published, kind):
            await stack.aclose()
            return Response(status_code=304, headers=headers)
    except BaseException:
        await stack.aclose()
        raise
    return StreamingResponse(_encoded(stack, body(conn, published)), media_type=media_type, headers=headers)


async def _encoded(stack: contextlib.AsyncExitStack, parts: AsyncIterator[str]) -> AsyncIterator[bytes]:
    try:
        async for part in parts:
            yield part.encode("utf-8")
    finally:
        with anyio.CancelScope(shield=True):  # a client gone cancels us; the connection still goes back whole
            await stack.aclose()


async def rows(
    conn: Connection, name: str, query: str, params: dict[str, Any]
) -> AsyncIterator[Iterable[dict[str, Any]]]:
    """The rows of `query`, a batch at a time, from a server-side cursor: memory holds one batch."""
    async with conn.cursor(name=name) as cursor:
        await cursor.execute(query, params)
        while batch := await cursor.fetchmany(BATCH):
            yield batch
