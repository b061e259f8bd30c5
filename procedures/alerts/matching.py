"""Which alerts the jobs of one moment match, decided by `jobs.search`'s own query: the jobs go into a small index
in memory, built as the search index builds its documents, and each candidate group's query
(`procedures.jobs.search.from_index.matching`, the one definition of a match) is asked of all of them at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from procedures.alerts.index import AlertIndex, Group, Job, Shelf
from procedures.jobs.search.corpus import JOBS
from procedures.jobs.search.from_index import filtering, matching

_HEAP = 15_000_000  # tantivy's least per writer thread
# The queries are made once per search, over this schema, and asked of each moment's index (of the same fields).
_SCHEMA = JOBS.schema()


class _Shown(msgspec.Struct):
    id: str


_shown = msgspec.json.Decoder(_Shown)


def matches(alerts: AlertIndex, rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(alert id, job id) of every alert each job of `rows` (published jobs, the columns of
    `procedures.jobs.search.corpus.COLUMNS`) matches."""
    if not rows:
        return []
    groups: dict[int, tuple[Shelf, Group]] = {}
    for row in rows:
        for shelf, group in alerts.candidates(Job.of(row)):
            groups[id(group)] = shelf, group
    if not groups:
        return []
    index = JOBS.index()
    writer = index.writer(heap_size=_HEAP, num_threads=1)
    for row in rows:
        writer.add_document(JOBS.document(row))
    writer.commit()
    index.reload()
    searcher = index.searcher()
    found: list[tuple[str, str]] = []
    job_ids: dict[Any, str] = {}
    for shelf, group in groups.values():
        if group.query is None:
            if shelf.filters is None:
                shelf.filters = filtering(group.search, _SCHEMA)
            group.query = matching(group.search, _SCHEMA, shelf.filters)
        for _, address in searcher.search(group.query, limit=len(rows)).hits:
            key = (address.segment_ord, address.doc)
            if key not in job_ids:
                job_ids[key] = _shown.decode(searcher.doc(address).get_first("shown")).id  # type: ignore[arg-type]
            found.extend((alert_id, job_ids[key]) for alert_id in group.alerts)
    return found
