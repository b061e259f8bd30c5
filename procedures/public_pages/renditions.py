"""The long documents — the feed, the sitemaps — rendered once per version of the published set into files, and
served from them: a reader, however slow, holds an open file, never a database connection.

On disk, `DATA_DIR/public/<key>/<shelf>/v<version>/` holds one complete rendition: its documents and
`published.json`. `<key>` names the database (its cluster's identity and its oid: a restored backup or another
database never serves another's files) and what the documents are written with (`FORMAT`, the address, ...).
A rendition is written in `.draft/` and renamed whole, so that a reader finds all of it or none. A renderer holds
the shelf's `lock` file (`flock`: one renderer per host, however many processes, let go by the kernel whenever a
process ends); the draft of one that died is removed by the next. Once a rendition is complete, older ones are
removed: a reader that opened one reads it to its end (a file is gone only once closed).

A reader asks for the current version. Its rendition on the shelf is served; else this process renders it, or
waits for the render already running, at most `FEED_RENDER_WAIT` (2 s); past that the newest complete rendition
is served, with its own validators (a million jobs take a quarter of a minute to render, and the documents say
they may be a minute old). Only with no rendition at all does a reader wait for the first.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import msgspec
from starlette.responses import Response, StreamingResponse

from procedures.public_pages.snapshot import Published, read_snapshot
from rpc.api import Connection, Unavailable, one_row
from rpc.core.memory import Slot
from rpc.db.pool import Pool
from rpc.db.reads import Reads
from rpc.search.slots import IDENTITY_SQL

log = logging.getLogger(__name__)

FORMAT = "1"  # changed with the documents' form, so that no rendition of an older form is served
CHUNK = 64 * 1024
_META = "published.json"
_DRAFT = ".draft"
_VERSION = re.compile(r"v(\d+)")

# What a render writes: the documents of the snapshot `conn` reads, at `Published`, into the directory.
Write = Callable[[Connection, Published, Path], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Rendition:
    """One complete rendition: its directory and the published set it was rendered from."""

    directory: Path
    published: Published

    def open(self, name: str) -> BinaryIO | None:
        """Its document `name`, opened (None when it has none): once open, it is read to its end whatever
        removes it."""
        try:
            return (self.directory / name).open("rb")
        except FileNotFoundError:
            return None


@dataclass(frozen=True, slots=True)
class Shelf:
    """The renditions of one kind of document (the feed, the sitemaps) on disk."""

    path: Path

    def newest(self) -> Rendition | None:
        """The newest complete rendition, or None."""
        for version in sorted(self._versions(), reverse=True):
            directory = self.path / f"v{version}"
            try:
                published = msgspec.json.decode((directory / _META).read_bytes(), type=Published)
            except FileNotFoundError:  # removed since the listing: a newer one is there
                continue
            return Rendition(directory, published)
        return None

    def _versions(self) -> list[int]:
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return []
        return [int(match[1]) for name in names if (match := _VERSION.fullmatch(name))]

    @contextlib.asynccontextmanager
    async def locked(self) -> AsyncIterator[None]:
        """The host's one renderer of this shelf, for the block (waited for in a thread of its own)."""
        self.path.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            await asyncio.to_thread(fcntl.flock, descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)  # and with it the lock

    @contextlib.asynccontextmanager
    async def drafting(self, published: Published) -> AsyncIterator[Path]:
        """A clean draft to write the rendition of `published` into (the lock held): made the rendition of its
        version once the block ends well, the older ones then removed; removed if it does not."""
        draft = self.path / _DRAFT
        await asyncio.to_thread(shutil.rmtree, draft, ignore_errors=True)  # what a renderer that died left
        draft.mkdir()
        try:
            yield draft
            (draft / _META).write_bytes(msgspec.json.encode(published))
            draft.rename(self.path / f"v{published.version}")
        finally:
            await asyncio.to_thread(shutil.rmtree, draft, ignore_errors=True)
        for version in self._versions():
            if version < published.version:
                await asyncio.to_thread(shutil.rmtree, self.path / f"v{version}", ignore_errors=True)


class Renderer:
    """One app's renders: at most one at a time per shelf in this process (and, by the shelf's lock, per host),
    and where its shelves are (the database's identity, read once)."""

    def __init__(self) -> None:
        self._running: dict[Path, asyncio.Task[None]] = {}
        self._identity: str | None = None

    async def shelf(self, pool: Pool, root: Path, written_with: str, name: str) -> Shelf:
        """The shelf `name` of documents written with `written_with` from the database of `pool`, under `root`."""
        if self._identity is None:
            async with pool.connection() as conn:
                self._identity = str((await one_row(await conn.execute(IDENTITY_SQL)))["identity"])
        key = hashlib.sha256(f"{self._identity}\n{FORMAT}\n{written_with}".encode()).hexdigest()[:16]
        return Shelf(root / key / name)

    async def current(self, shelf: Shelf, wanted: int, reads: Reads, write: Write, wait: float) -> Rendition:
        """The rendition of version `wanted` (or a newer one) once rendered within `wait` seconds; else the newest
        there is; `503` when there is none and none could be made."""
        deadline = time.monotonic() + wait
        for _ in range(2):  # the render running may have begun before `wanted`: then one more
            newest = shelf.newest()
            if newest is not None and newest.published.version >= wanted:
                return newest
            render = self._running.get(shelf.path)
            if render is None or render.done():
                render = self._start(shelf, reads, write)
            try:
                # Shielded: a reader that leaves does not stop the render the others wait for.
                await asyncio.wait_for(asyncio.shield(render), None if newest is None else deadline - time.monotonic())
            except TimeoutError:
                break
        newest = shelf.newest()
        if newest is None:
            raise Unavailable("This document could not be prepared just now; retry in a moment.")
        return newest

    def _start(self, shelf: Shelf, reads: Reads, write: Write) -> asyncio.Task[None]:
        render = asyncio.create_task(_render(shelf, reads, write))
        self._running[shelf.path] = render
        render.add_done_callback(lambda done: self._forget(shelf.path, done))
        return render

    def _forget(self, path: Path, done: asyncio.Task[None]) -> None:
        if self._running.get(path) is done:
            del self._running[path]


RENDERER: Slot[Renderer] = Slot("public_pages.renderer", Renderer)


async def _render(shelf: Shelf, reads: Reads, write: Write) -> None:
    """The current version's rendition, unless another process of the host made it meanwhile. A failure is
    logged and leaves the shelf as it was (its readers get the newest rendition there is)."""
    try:
        async with shelf.locked(), read_snapshot(reads) as (conn, published):
            newest = shelf.newest()
            if newest is not None and newest.published.version >= published.version:
                return
            started = time.monotonic()
            async with shelf.drafting(published) as draft:
                await write(conn, published, draft)
            log.info(
                "rendered %s at version %d in %.1f s", shelf.path.name, published.version, time.monotonic() - started
            )
    except Exception:
        log.warning("rendering %s failed; the newest rendition is served meanwhile", shelf.path.name, exc_info=True)


async def write_document(path: Path, parts: AsyncIterator[str]) -> None:
    """The text of `parts` written to `path` as UTF-8, off the event loop."""
    with path.open("wb") as document:
        async for part in parts:
            await asyncio.to_thread(document.write, part.encode("utf-8"))


def file_response(document: BinaryIO, method: str, media_type: str, headers: Mapping[str, str]) -> Response:
    """An open document as the answer (its headers alone to a `HEAD`), read a chunk at a time off the event loop
    as the client takes it."""
    headers = {**headers, "Content-Length": str(os.fstat(document.fileno()).st_size)}
    if method == "HEAD":
        document.close()
        return Response(headers=headers, media_type=media_type)
    return StreamingResponse(_chunks(document), media_type=media_type, headers=headers)


async def _chunks(document: BinaryIO) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(document.read, CHUNK):
            yield chunk
    finally:
        document.close()
