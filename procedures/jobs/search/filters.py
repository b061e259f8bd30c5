"""Conditions over the index's fields shared by `jobs.search` and `jobs.list`'s filters."""

from __future__ import annotations

from collections.abc import Iterable

import tantivy

from procedures.jobs.search.corpus import schema
from procedures.jobs.search.text import fold, trigrams

# tantivy's regular expressions (Rust's syntax): every meta character escaped, so typed text is literal; no other
# character is escaped, since some escapes mean more (`\\<` is the start of a word).
_SCHEMA = schema()
_LITERAL = str.maketrans({char: f"\\{char}" for char in "\\.+*?()|[]{}^$#&-~"})


def contains(column: str, text: str) -> tantivy.Query:
    """The folded `text` anywhere in the folded value of `column` (one of `SUBSTRING_COLUMNS`): a case- and
    accent-insensitive substring, `%` and `_` meaning themselves.

    Asked of the value's trigrams at their positions, as PostgreSQL's `pg_trgm` would find candidates, except
    that the positions also check them: the text's trigrams every third one and its last, each at its offset,
    hold every one of its characters in place, so the phrase matches exactly the values that contain the text.
    Its cost is that of the trigrams' postings, whatever the number of distinct values (a regular expression
    `.*text.*` walked every value of the field's dictionary, in every segment)."""
    folded = fold(text)
    grams = trigrams(folded)
    if not grams:  # one or two characters: one of the value's letters or pairs of letters; none: every value
        return tantivy.Query.term_query(_SCHEMA, f"{column}_pairs", folded) if folded else tantivy.Query.all_query()
    if len(grams) == 1:
        return tantivy.Query.term_query(_SCHEMA, f"{column}_grams", grams[0])
    last = len(grams) - 1
    return tantivy.Query.phrase_query(
        _SCHEMA, f"{column}_grams", [(at, grams[at]) for at in sorted({*range(0, last, 3), last})]
    )


def starting(field: str, stem: str) -> tantivy.Query:
    """The terms of `field` that begin with `stem` (a word still being typed): a Levenshtein automaton of distance
    0 over prefixes, which tantivy makes in microseconds (a regular expression `stem.*` cost a quarter to half a
    millisecond to compile, per search never asked before, and the same terms matched)."""
    return tantivy.Query.fuzzy_term_query(_SCHEMA, field, stem, distance=0, prefix=True)


def literal(text: str) -> str:
    """`text` as a regular expression that matches just it."""
    return text.translate(_LITERAL)


def every(queries: Iterable[tantivy.Query]) -> tantivy.Query:
    """All of `queries` (every document when there are none)."""
    clauses = [(tantivy.Occur.Must, query) for query in queries]
    return tantivy.Query.boolean_query(clauses) if clauses else tantivy.Query.all_query()


def either(queries: Iterable[tantivy.Query]) -> tantivy.Query:
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, query) for query in queries])
