"""A whole index made from PostgreSQL: at a process's first start, when its index cannot catch up, and by
`bin/admin rebuild-search`. Runs in a thread with a connection of its own, so the process keeps serving."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from rpc.search.corpus import Corpus
from rpc.search.slots import Generation

# The indexing threads' memory: what keeps a million documents' build under a minute within the RSS budget.
BUILD_HEAP = 256_000_000
BUILD_THREADS = 2
_BATCH = 5000


def build(corpus: Corpus, database_url: str, generation: Generation) -> int:
    """Every document present, read in one snapshot, indexed into `generation`; the position of that snapshot,
    also recorded with the index."""
    index = corpus.index(str(generation.path))
    writer = index.writer(heap_size=BUILD_HEAP, num_threads=BUILD_THREADS)
    with psycopg.connect(database_url, row_factory=dict_row, autocommit=True) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with conn.transaction():
            # The first statement takes the snapshot: the rows below are exactly the documents at `position`.
            row = conn.execute(f"SELECT ({corpus.position_sql}) AS position").fetchone()
            position = int(row["position"]) if row and row["position"] is not None else 0
            with conn.cursor(name=f"rebuild_{corpus.name}") as rows:
                rows.itersize = _BATCH
                rows.execute(corpus.everything_sql)
                for found in rows:
                    writer.add_document(corpus.document(found))
    writer.commit()
    writer.wait_merging_threads()
    generation.record(corpus.fingerprint, position)
    return position
