"""The yardstick of the never-seen rows: what the search engine itself spends on the same queries over the same jobs.

After a size's reads, the bench opens the index the last server process served (its slot's generation: the same
jobs, the same segments) in this process and answers the never-seen mixes' first targets with the service's own
code (`procedures.jobs.search.from_index.answer`, `procedures.jobs.search.listing.page`), without HTTP, the
credential check or the limiter. Every call into tantivy (`search`, `aggregate`, `doc`) is timed on its own: that
is the engine's CPU per call. The whole in-process answer is timed too, so the server's CPU per call splits into
the engine, the rest of the answer (query building, merging, decoding) and the service around it.
"""

from __future__ import annotations

import statistics
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import tantivy

from procedures.jobs.search import from_index, listing
from procedures.jobs.search.corpus import JOBS
from procedures.jobs.search.request import Search, SearchJobs
from procedures.jobs.shapes import ListJobs
from rpc.search.slots import IDENTITY_SQL, corpus_root, current_generation
from rpc.search.view import View

QUERIES = {True: 300, False: 2000}  # targets of each never-seen mix answered in-process (quick, full)
_KEY = "bench-engine-reference-cursor-key"  # signs the in-process answers' cursors; no server ever reads them


class TimedSearcher:
    """A searcher whose calls add their CPU time to `seconds`."""

    def __init__(self, searcher: tantivy.Searcher) -> None:
        self._searcher = searcher
        self.seconds = 0.0

    def _timed(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return call(*args, **kwargs)
        finally:
            self.seconds += time.process_time() - started

    def search(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(self._searcher.search, *args, **kwargs)

    def aggregate(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(self._searcher.aggregate, *args, **kwargs)

    def doc(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(self._searcher.doc, *args, **kwargs)


def served_view(database_url: str, search_path: Path) -> tuple[View, TimedSearcher]:
    """A view of the generation slot 0 serves, its searcher timed."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(IDENTITY_SQL).fetchone()
    assert row is not None
    slot = corpus_root(search_path, JOBS.name, JOBS.fingerprint, row[0]) / "slot-0"
    generation = current_generation(slot)
    if generation is None:
        raise RuntimeError(f"no index served in {slot}")
    index = JOBS.index(str(generation.path))
    timed = TimedSearcher(index.searcher())
    view = View(0, index.schema, JOBS.id_field, timed, 0, None, ())  # type: ignore[arg-type]
    return view, timed


def answer(view: View, target: str) -> None:
    """The answer the service computes for `target` (a `jobs.search` or a filtered `jobs.list`), in-process."""
    split = urllib.parse.urlsplit(target)
    query = dict(urllib.parse.parse_qsl(split.query))
    if split.path.endswith("jobs.search"):
        from_index.answer(view, Search.of(msgspec.convert(query, SearchJobs, strict=False), _KEY))
        return
    listing.page(view, msgspec.convert(query, ListJobs, strict=False))


def measure(view: View, timed: TimedSearcher, targets: Sequence[str]) -> dict[str, Any]:
    """CPU per call of the engine alone and of the whole in-process answer, over `targets`."""
    engine, whole = [], []
    for target in targets:
        timed.seconds = 0.0
        started = time.process_time()
        answer(view, target)
        whole.append(time.process_time() - started)
        engine.append(timed.seconds)
    return {
        "queries": len(targets),
        "engine_cpu_ms": _ms(statistics.mean(engine)),
        "engine_p50_ms": _ms(statistics.median(engine)),
        "engine_p99_ms": _ms(statistics.quantiles(engine, n=100)[98]),
        "in_process_answer_cpu_ms": _ms(statistics.mean(whole)),
    }


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
