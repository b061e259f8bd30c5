"""What a searchable collection hands the index: its shape, how its text is analysed, and the SQL that feeds it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import tantivy


@dataclass(frozen=True, slots=True)
class Corpus:
    """One collection kept in a search index.

    - `fingerprint` names the shape and the analysis: an index made under another one is rebuilt, never read.
    - `position_sql` is a scalar query: the collection's current position, a counter bumped in every transaction
      that changes it, so that positions commit in order and a snapshot that sees position P sees every change
      up to P.
    - `changes_sql` takes `%(since)s` and answers, from one snapshot, `_position` (the current one), `_logged`
      (how many distinct positions after `since` its log holds: fewer than `_position - since` means the log no
      longer reaches back) and one row per document changed since, `_id` and `_present` with the columns that
      `document` reads (a row whose `_id` is null when nothing changed).
    - `everything_sql` reads every document present, in the snapshot that read `position_sql`.
    - `census_sql` counts the collection's rows by a label (`label`, `count`, `indexed`: whether those rows are
      documents), and `sample_sql` draws `%(size)s` rows at random, present or not (`_id`, `_present` and the
      columns `document` reads): what `bin/admin verify-search` compares the index with.
    """

    name: str
    fingerprint: str
    schema: Callable[[], tantivy.Schema]
    analyzers: Callable[[], Mapping[str, tantivy.TextAnalyzer]]
    id_field: str
    stored_fields: tuple[str, ...]  # what the index gives back of a document (compared by verify-search)
    position_sql: str
    changes_sql: str
    everything_sql: str
    census_sql: str
    sample_sql: str
    document: Callable[[Mapping[str, Any]], tantivy.Document]

    def index(self, path: str | None = None) -> tantivy.Index:
        """An index of this shape, with its analyzers registered: on disk at `path`, else in memory.

        Its reader loads again only when told (`reload()` after each commit): with tantivy's default, a watcher
        reloads on every commit too, and an explicit reload meeting it waits out a 100 ms retry of the index's
        meta lock, as often as every third commit."""
        index = tantivy.Index(self.schema(), path=path) if path else tantivy.Index(self.schema())
        index.config_reader(reload_policy="Manual")
        for name, analyzer in self.analyzers().items():
            index.register_tokenizer(name, analyzer)
        return index
