"""A process's search index of one corpus: exact at the position each call reads, kept up by its change log.

- The index on disk (`main`) is committed at some position; changes after it are read from the log and held in
  memory (`pending`, and a small in-memory index of their current states), so a call never waits for a commit:
  its view is `main` without the changed documents, plus their states now (`rpc.search.view`).
- A call that read position P (in its credential's statement) asks `view(conn, P)`: answered at once when the
  view is at P or later, else after one statement that reads the changes since (one call at a time does it; the
  others wait for it and share its result). So a read that begins after a write's commit sees the write,
  whichever process answers.
- In the background, every `flush_seconds`: catch up, commit what is pending into `main`, take up a generation
  `bin/admin rebuild-search` left, or build the index anew when there is none or the log no longer reaches back.
  Meanwhile `view` answers None, and the caller answers from PostgreSQL: exact, only slower.
- With replicas, the background catch-up reads from any replica (no call's exactness rests on it: each call's own
  catch-up runs on its call's connection, which has replayed the call's position), and a build reads from the
  replica that lags least (`rpc.db.reads`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import tantivy

from rpc.core.types import Connection
from rpc.db.reads import Reads
from rpc.search.allocator import limit_malloc_arenas
from rpc.search.build import build
from rpc.search.corpus import Corpus
from rpc.search.slots import IDENTITY_SQL, Generation, Slot, corpus_root
from rpc.search.view import View

log = logging.getLogger(__name__)

# The long-lived writer takes small batches of changes; its memory stays small.
_WRITER_HEAP = 32_000_000
_RECENT_HEAP = 15_000_000  # tantivy's least per thread


@dataclass(frozen=True, slots=True)
class Pending:
    """A document changed after `main`'s position: its state at `position` (None: no longer present)."""

    position: int
    document: tantivy.Document | None


@dataclass(frozen=True, slots=True)
class Status:
    """What /readyz and the metrics say of an index."""

    corpus: str
    ready: bool
    position: int | None
    pending: int
    rebuilding: bool


class SearchIndex:
    def __init__(self, corpus: Corpus, slot: Slot, reads: Reads, flush_seconds: float) -> None:
        self.corpus = corpus
        self._slot = slot
        self._reads = reads
        self._flush_seconds = flush_seconds
        self._index: tantivy.Index | None = None
        self._writer: tantivy.IndexWriter | None = None
        self._view: View | None = None
        self._pending: dict[str, Pending] = {}
        self._lock = asyncio.Lock()
        self._recent_documents = Recent(corpus)
        self._rebuilding = False
        self._behind = True

    @classmethod
    @contextlib.asynccontextmanager
    async def running(
        cls, corpus: Corpus, root: Path, reads: Reads, flush_seconds: float
    ) -> AsyncIterator[SearchIndex]:
        """This process's index of `corpus` in a slot of its own under `root`, kept up in the background."""
        limit_malloc_arenas()
        async with reads.primary.connection() as conn:
            identity = await (await conn.execute(IDENTITY_SQL)).fetchone()
        assert identity is not None
        slot = Slot.take(corpus_root(root, corpus.name, corpus.fingerprint, identity["identity"]))
        index = cls(corpus, slot, reads, flush_seconds)
        try:
            index._open(slot.current)
            task = asyncio.create_task(index._keep_up())
            try:
                yield index
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        finally:
            index._writer = None
            slot.release()

    @property
    def status(self) -> Status:
        view = self._view
        return Status(
            corpus=self.corpus.name,
            ready=view is not None and not self._behind,
            position=view.position if view else None,
            pending=len(self._pending),
            rebuilding=self._rebuilding,
        )

    async def view(self, conn: Connection, position: int) -> View | None:
        """A view at `position` or later; None while there is no index to answer from (being built)."""
        view = self._view
        if view is None or view.position >= position:
            return view
        async with self._lock:  # one call catches up; the others find its view here
            view = self._view
            if view is None or view.position >= position:
                return view
            return await self._caught_up(conn, view)

    async def _caught_up(self, conn: Connection, view: View) -> View | None:
        """The view moved to the current position by the changes logged since its own (lock held)."""
        result = await conn.execute(self.corpus.changes_sql, {"since": view.position}, prepare=True)
        rows = await result.fetchall()
        position, logged = rows[0]["_position"], rows[0]["_logged"]
        if position is None or logged != position - view.position:
            log.warning("search index %s cannot catch up from the log: building it anew", self.corpus.name)
            self._view = None  # not exact any more: PostgreSQL answers until the new one is built
            return None
        if position == view.position:
            return view
        pending = dict(self._pending)
        reshaped = False  # whether the documents held in memory change, or only more ids are hidden (closes)
        for row in rows:
            if row["_id"] is not None:
                document = self.corpus.document(row) if row["_present"] else None
                before = pending.get(row["_id"])
                reshaped |= document is not None or (before is not None and before.document is not None)
                pending[row["_id"]] = Pending(position, document)
        recent = await self._recent(pending) if reshaped else view.recent
        self._pending = pending
        self._view = replace(view, position=position, recent=recent, hidden=tuple(pending))
        return self._view

    def _open(self, generation: Generation | None) -> None:
        """Serve `generation`, if it is a complete index of this corpus's shape."""
        position = generation.position(self.corpus.fingerprint) if generation else None
        if generation is None or position is None:
            return
        index = self.corpus.index(str(generation.path))
        self._writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        self._index = index
        self._pending = {}
        self._view = View(
            position=position,
            schema=index.schema,
            id_field=self.corpus.id_field,
            main=index.searcher(),
            main_position=position,
            recent=None,
            hidden=(),
        )
        self._slot.serve(generation)

    async def _keep_up(self) -> None:
        while True:
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("search index %s: keeping up failed; trying again", self.corpus.name)
            await asyncio.sleep(self._flush_seconds)

    async def _tick(self) -> None:
        incoming = self._slot.incoming
        if incoming is not None:
            await self._take_up(incoming)
        if self._view is None:
            await self._rebuild()
        view = await self._reads.run(0, self._caught_up_now)
        self._behind = view is None
        if self._pending:
            await self._flush()

    async def _caught_up_now(self, conn: Connection) -> View | None:
        """The view at the position `conn` reads now."""
        return await self.view(conn, await self._position(conn))

    async def _position(self, conn: Connection) -> int:
        result = await conn.execute(f"SELECT ({self.corpus.position_sql}) AS position")
        row = await result.fetchone()
        return int(row["position"]) if row and row["position"] is not None else 0

    async def _rebuild(self) -> None:
        self._rebuilding = True
        started = time.monotonic()
        try:
            generation = self._slot.new_generation()
            database, url = self._reads.long_read()
            position = await asyncio.to_thread(build, self.corpus, url, generation)
        finally:
            self._rebuilding = False
        async with self._lock:
            self._writer = None  # the old generation's writer lets go of its files
            self._open(generation)
        took = time.monotonic() - started
        log.info("search index %s built at position %d in %.1f s from %s", self.corpus.name, position, took, database)

    async def _take_up(self, generation: Generation) -> None:
        """A generation `bin/admin rebuild-search` left: served from now on, unless it is older than ours."""
        position = generation.position(self.corpus.fingerprint)
        view = self._view
        if position is None or (view is not None and position < view.main_position):
            self._slot.serve(self._slot.current or generation)
            return
        async with self._lock:
            kept = self._pending
            current = self._view
            self._writer = None
            self._open(generation)
            if current is not None and self._view is not None and current.position > position:
                # Changes after the new generation's position are kept; the log brings the rest.
                self._pending = {key: entry for key, entry in kept.items() if entry.position > position}
                recent = await self._recent(self._pending)
                self._view = replace(self._view, position=current.position, recent=recent, hidden=tuple(self._pending))

    async def _flush(self) -> None:
        """Commit what is pending into the index on disk; the view then reads it from there."""
        view, writer, index = self._view, self._writer, self._index
        if view is None or writer is None or index is None:
            return
        batch = dict(self._pending)
        await asyncio.to_thread(self._commit, writer, index, batch, view.position)
        async with self._lock:
            current = self._view
            if current is None or self._index is not index:
                return  # rebuilt or replaced meanwhile
            self._pending = {key: entry for key, entry in self._pending.items() if entry.position > view.position}
            self._view = replace(
                current,
                main=index.searcher(),
                main_position=view.position,
                recent=await self._recent(self._pending),
                hidden=tuple(self._pending),
            )

    async def _recent(self, pending: Mapping[str, Pending]) -> tantivy.Searcher | None:
        """`Recent.holding` in a thread: its commit costs milliseconds the event loop spends on other calls."""
        return await asyncio.to_thread(self._recent_documents.holding, pending)

    def _commit(
        self, writer: tantivy.IndexWriter, index: tantivy.Index, batch: dict[str, Pending], position: int
    ) -> None:
        for key, entry in batch.items():
            writer.delete_documents_by_term(self.corpus.id_field, key)
            if entry.document is not None:
                writer.add_document(entry.document)
        writer.commit()
        index.reload()
        generation = self._slot.current
        if generation is not None:
            generation.record(self.corpus.fingerprint, position)


class Recent:
    """The in-memory index of the documents changed since the disk index's position, rebuilt whole at each
    change (a few dozen documents). One writer serves for the process's life: a writer per rebuild started a
    thread, and with it a memory arena, each time. Not for concurrent use (the index's lock orders its calls)."""

    def __init__(self, corpus: Corpus) -> None:
        self._index = corpus.index()
        self._writer = self._index.writer(heap_size=_RECENT_HEAP, num_threads=1)

    def holding(self, pending: Mapping[str, Pending]) -> tantivy.Searcher | None:
        """A searcher of the pending documents' current states; None when none is present."""
        documents = [entry.document for entry in pending.values() if entry.document is not None]
        if not documents:
            return None
        self._writer.delete_all_documents()
        for document in documents:
            self._writer.add_document(document)
        self._writer.commit()
        self._index.reload()
        return self._index.searcher()
