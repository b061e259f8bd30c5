"""The published set as the long documents (feed, sitemaps) read it: its state — the version that is their `ETag`,
when it last changed, how many jobs — in one short statement, and one consistent view of its jobs for a render
(`read_snapshot`): a read-only, repeatable-read transaction whose version is the version of every row it reads."""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
from collections.abc import AsyncIterator, Iterable
from typing import Any

import msgspec
from starlette.requests import Request

from rpc.api import Connection, one_row
from rpc.db.pool import Pool
from rpc.db.reads import Reads

BATCH = 500
_STATE = "SELECT version, changed_at, total FROM job_totals WHERE status = 'published'"


class Published(msgspec.Struct, frozen=True, kw_only=True):
    """The published set at one version (kept beside each rendition as JSON)."""

    version: int
    changed_at: dt.datetime
    total: int

    def etag(self, document: str) -> str:
        return f'"{document}-{self.version}"'

    @property
    def last_modified(self) -> str:
        return email.utils.format_datetime(self.changed_at.astimezone(dt.UTC), usegmt=True)

    def headers(self, document: str) -> dict[str, str]:
        return {
            "ETag": self.etag(document),
            "Last-Modified": self.last_modified,
            "Cache-Control": "public, max-age=60",
            "X-Content-Type-Options": "nosniff",
        }


def not_modified(request: Request, published: Published, document: str) -> bool:
    """RFC 9110 section 13.2.2: If-None-Match decides when sent; else If-Modified-Since (whole seconds)."""
    if (tags := request.headers.get("if-none-match")) is not None:
        sent = {tag.strip().removeprefix("W/") for tag in tags.split(",")}
        return "*" in sent or published.etag(document) in sent
    if (since := request.headers.get("if-modified-since")) is not None:
        try:
            moment = email.utils.parsedate_to_datetime(since)
        except (TypeError, ValueError):
            return False
        return moment.tzinfo is not None and published.changed_at <= moment
    return False


async def published_state(pool: Pool) -> Published:
    """The published set as it is now: one statement, its connection given back at once."""
    async with pool.connection() as conn:
        return Published(**await one_row(await conn.execute(_STATE)))


@contextlib.asynccontextmanager
async def read_snapshot(reads: Reads) -> AsyncIterator[tuple[Connection, Published]]:
    """The one read of a render: a connection in a read-only, repeatable-read transaction, and the published set
    as it sees it, for the block's duration (which reads at the pace of a disk, never of a client). With replicas,
    one that has replayed the primary's position as of now (so it shows every version read before), else the
    primary."""
    async with reads.connection(await reads.now()) as conn, conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield conn, Published(**await one_row(await conn.execute(_STATE)))


async def rows(
    conn: Connection, name: str, query: str, params: dict[str, Any]
) -> AsyncIterator[Iterable[dict[str, Any]]]:
    """The rows of `query`, a batch at a time, from a server-side cursor: memory holds one batch."""
    async with conn.cursor(name=name) as cursor:
        await cursor.execute(query, params)
        while batch := await cursor.fetchmany(BATCH):
            yield batch
