"""Conditions over the index's fields shared by `jobs.search` and `jobs.list`'s filters."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import tantivy

from procedures.jobs.search.corpus import schema
from procedures.jobs.search.text import fold

# tantivy's regular expressions (Rust's syntax): every meta character escaped, so typed text is literal; no other
# character is escaped, since some escapes mean more (`\\<` is the start of a word).
_SCHEMA = schema()
_LITERAL = str.maketrans({char: f"\\{char}" for char in "\\.+*?()|[]{}^$#&-~"})


def contains(field: str, text: str) -> tantivy.Query:
    """The folded `text` anywhere in a folded field kept whole (one term per value): a case- and
    accent-insensitive substring, `%` and `_` meaning themselves."""
    return _substring(field, fold(text))


@functools.lru_cache(maxsize=4096)
def _substring(field: str, folded: str) -> tantivy.Query:
    """Compiling the expression's automaton costs most of a millisecond, matching it a few microseconds: the
    compiled query is kept for the filters asked again (a pure function of its arguments, valid for every index
    of the jobs' schema; at most 4,096 are kept)."""
    return tantivy.Query.regex_query(_SCHEMA, field, f".*{literal(folded)}.*")


@functools.lru_cache(maxsize=4096)
def starting(field: str, stem: str) -> tantivy.Query:
    """The terms of `field` that begin with `stem` (a word still being typed). Kept as substrings are: its
    automaton costs a quarter of a millisecond to compile, more than most searches spend matching."""
    return tantivy.Query.regex_query(_SCHEMA, field, f"{literal(stem)}.*")


def literal(text: str) -> str:
    """`text` as a regular expression that matches just it."""
    return text.translate(_LITERAL)


def every(queries: Iterable[tantivy.Query]) -> tantivy.Query:
    """All of `queries` (every document when there are none)."""
    clauses = [(tantivy.Occur.Must, query) for query in queries]
    return tantivy.Query.boolean_query(clauses) if clauses else tantivy.Query.all_query()


def either(queries: Iterable[tantivy.Query]) -> tantivy.Query:
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, query) for query in queries])
