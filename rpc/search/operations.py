"""`bin/admin rebuild-search` and `bin/admin verify-search`: an index built anew from PostgreSQL while the
service keeps answering, and an index checked against PostgreSQL."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import tantivy
from psycopg.rows import dict_row

from rpc.core.types import Connection
from rpc.db.pool import open_pool
from rpc.db.reads import Reads
from rpc.search.build import build
from rpc.search.corpus import Corpus
from rpc.search.index import Pending, Recent
from rpc.search.slots import (
    IDENTITY_SQL,
    Generation,
    Slot,
    corpus_root,
    current_generation,
    offer,
    slots,
    try_hold,
)
from rpc.search.view import View
from rpc.settings import Settings

SAMPLE_SIZE = 200


async def root_of(conn: Connection, corpus: Corpus, search_path: Path) -> Path:
    """Where this database's slots of `corpus` live."""
    row = await (await conn.execute(IDENTITY_SQL)).fetchone()
    if row is None:
        raise RuntimeError("the database did not say who it is")
    return corpus_root(search_path, corpus.name, corpus.fingerprint, row["identity"])


async def rebuild(conn: Connection, corpus: Corpus, search_path: Path, database_url: str) -> dict[str, Any]:
    """One index built from PostgreSQL, then given to every slot of this host: served at once by a slot no
    process holds; left as `incoming` for a running process, which takes it up within `SEARCH_FLUSH_SECONDS`
    and catches up from its position (until then it keeps answering from its own index, exactly)."""
    root = await root_of(conn, corpus, search_path)
    staging = Generation(root / f"staging-{time.time_ns()}")
    staging.path.mkdir(parents=True)
    started = time.monotonic()
    try:
        position = await asyncio.to_thread(build, corpus, database_url, staging)
        seconds = round(time.monotonic() - started, 2)
        given = {}
        for path in list(slots(root)) or [root / "slot-0"]:
            lock = try_hold(path)
            if lock is None:
                offer(path, staging)
                given[path.name] = "offered to its running process"
                continue
            slot = Slot(path, lock)
            try:
                copy = slot.new_generation()
                copy.path.rmdir()
                shutil.copytree(staging.path, copy.path)
                slot.serve(copy)
            finally:
                slot.release()
            given[path.name] = "served"
    finally:
        shutil.rmtree(staging.path, ignore_errors=True)
    return {"corpus": corpus.name, "position": position, "build_seconds": seconds, "slots": given}


async def verify(corpus: Corpus, search_path: Path, database_url: str) -> dict[str, Any]:
    """Each slot's index, caught up to now from the log, against PostgreSQL in one snapshot: the number of
    documents, and a random sample of rows — present ones found with the fields they have now, absent ones not
    found. `ok` is false on any difference."""
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row, autocommit=True) as conn:
        root = await root_of(conn, corpus, search_path)
        await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)  # every statement below: one snapshot
        async with conn.transaction():
            census = await (await conn.execute(corpus.census_sql)).fetchall()
            sample = await (await conn.execute(corpus.sample_sql, {"size": SAMPLE_SIZE})).fetchall()
            checked = [await _checked(conn, corpus, path, census, sample) for path in slots(root)]
    return {
        "ok": bool(checked) and all(slot["ok"] for slot in checked),
        "corpus": corpus.name,
        "census": {row["label"]: row["count"] for row in census},
        "slots": checked or "no index on this host: start bin/serve, or run bin/admin rebuild-search",
    }


async def _checked(
    conn: Connection, corpus: Corpus, path: Path, census: list[dict[str, Any]], sample: list[dict[str, Any]]
) -> dict[str, Any]:
    generation = current_generation(path)
    position = generation.position(corpus.fingerprint) if generation else None
    if generation is None or position is None:
        return {"slot": path.name, "ok": False, "problem": "no complete index"}
    index = corpus.index(str(generation.path))
    rows = await (await conn.execute(corpus.changes_sql, {"since": position})).fetchall()
    now, logged = rows[0]["_position"], rows[0]["_logged"]
    if logged != now - position:
        return {"slot": path.name, "ok": False, "problem": f"at position {position}: the log no longer reaches it"}
    pending = {
        row["_id"]: Pending(now, corpus.document(row) if row["_present"] else None)
        for row in rows
        if row["_id"] is not None
    }
    recent = Recent(corpus).holding(pending)
    view = View(now, index.schema, corpus.id_field, index.searcher(), position, recent, tuple(pending))
    expected = sum(row["count"] for row in census if row["indexed"])
    counted = view.count(tantivy.Query.all_query())
    wrong = [row["_id"] for row in sample if _stored(corpus, row) != view.stored(row["_id"])]
    return {
        "slot": path.name,
        "ok": counted == expected and not wrong,
        "position": position,
        "caught_up_to": now,
        "documents": counted,
        "expected": expected,
        "sampled": len(sample),
        "differing": wrong,
    }


def _stored(corpus: Corpus, row: dict[str, Any]) -> dict[str, list[object]] | None:
    """What the index should hold of a sampled row: its stored fields, or None when it is not a document."""
    if not row["_present"]:
        return None
    document = corpus.document(row).to_dict()
    return {name: value for name, value in document.items() if name in corpus.stored_fields}


async def rebuild_all(
    conn: Connection, corpora: Sequence[Corpus], settings: Settings, database_url: str
) -> dict[str, Any]:
    """Every index built anew, read as a starting server reads it: from the replica of `DATABASE_REPLICA_URLS`
    that lags least once each has been checked (one left out, or lagging past `REPLICA_MAX_LAG_SECONDS`, is not
    read), else from the primary — a minute's read at a million jobs kept off the primary. `read_from` names it."""
    async with (
        open_pool(settings, database_url, min_size=1, max_size=1) as pool,
        Reads.running(settings, pool, database_url) as reads,
    ):
        source, source_url = reads.long_read()
        built = [await rebuild(conn, corpus, settings.search_path, source_url) for corpus in corpora]
    return {"read_from": source, "indexes": built}


async def verify_all(corpora: Sequence[Corpus], search_path: Path, database_url: str) -> dict[str, Any]:
    checked = [await verify(corpus, search_path, database_url) for corpus in corpora]
    return {"ok": all(index["ok"] for index in checked), "indexes": checked}
