"""Conditions over the index's fields shared by `jobs.search` and `jobs.list`'s filters."""

from __future__ import annotations

from collections.abc import Iterable

import tantivy

from procedures.search.text import fold

# tantivy's regular expressions: every character with a meaning there, escaped so that typed text is literal.
_LITERAL = str.maketrans({char: f"\\{char}" for char in '\\.+*?()|[]{}^$#&-~"<>@ '})


def contains(schema: tantivy.Schema, field: str, text: str) -> tantivy.Query:
    """The folded `text` anywhere in a folded field kept whole (one term per value): a case- and
    accent-insensitive substring, `%` and `_` meaning themselves."""
    return tantivy.Query.regex_query(schema, field, f".*{literal(fold(text))}.*")


def literal(text: str) -> str:
    """`text` as a regular expression that matches just it."""
    return text.translate(_LITERAL)


def every(queries: Iterable[tantivy.Query]) -> tantivy.Query:
    """All of `queries` (every document when there are none)."""
    clauses = [(tantivy.Occur.Must, query) for query in queries]
    return tantivy.Query.boolean_query(clauses) if clauses else tantivy.Query.all_query()


def either(queries: Iterable[tantivy.Query]) -> tantivy.Query:
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, query) for query in queries])
