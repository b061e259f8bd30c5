"""What a search box's text asks, in web-search syntax: words (all required), `"a phrase"`, `-exclusion`, and `or`
between alternatives; the last word also a prefix, so the box can search as a person types.

The text is folded and read by the same analyzer as the jobs (`procedures.jobs.search.text`), so stop words drop out
and words meet their stems. The result is a tree independent of any field: `to_query` asks it of one field
(all the text, or the title alone for ranking).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tantivy

from procedures.jobs.search.filters import literal, starting
from procedures.jobs.search.text import analyzer, fold

_CHUNKS = re.compile(r'-?"[^"]*"?|[^\s"]+')
_WORD = re.compile(r"[^\W_]+")  # letters and digits, as the analyzer splits words


@dataclass(frozen=True, slots=True)
class Operand:
    """Stems in order with their positions (a phrase when more than one); `prefix`: the last also as a prefix."""

    terms: tuple[tuple[int, str], ...]
    negated: bool = False
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Typed:
    """Alternatives, any of which matches; each a run of operands that must all match. `or` splits the typed
    words into alternatives and binds loosest, as in PostgreSQL: `python or rust engineer` is `python`, or
    `rust` and `engineer`."""

    alternatives: tuple[tuple[Operand, ...], ...]

    @property
    def empty(self) -> bool:
        """Nothing left to ask (every word a stop word): matches nothing, as PostgreSQL's empty query."""
        return not self.alternatives


_ANALYZER = analyzer()


def parse(typed: str) -> Typed:
    folded = fold(typed)
    alternatives: list[list[Operand]] = [[]]
    chunks = _CHUNKS.findall(folded)
    last = _prefix_chunk(folded)
    for number, chunk in enumerate(chunks):
        if chunk == "or":
            alternatives.append([])
            continue
        operand = _operand(chunk, prefix=number == len(chunks) - 1 and last)
        if operand is not None:
            alternatives[-1].append(operand)
    return Typed(tuple(tuple(run) for run in alternatives if run))


def _prefix_chunk(folded: str) -> bool:
    """Whether the last word typed is also a prefix: not when it is excluded, closes a phrase, or is `or`."""
    pieces = folded.split()
    if not pieces:
        return False
    last = pieces[-1]
    return not (last.startswith("-") or last.endswith('"') or last == "or") and len(_stems(last.lstrip('"'))) == 1


def _operand(chunk: str, *, prefix: bool) -> Operand | None:
    negated = chunk.startswith("-")
    text = chunk.removeprefix("-").strip('"')
    terms = _stems(text)
    if not terms:
        return None
    return Operand(tuple(terms), negated=negated, prefix=prefix and not negated)


def _stems(text: str) -> list[tuple[int, str]]:
    """Each word's stem at the word's position; stop words keep their place (as in a phrase) but ask nothing."""
    stems: list[tuple[int, str]] = []
    for position, word in enumerate(_WORD.findall(text)):
        stems.extend((position, stem) for stem in _ANALYZER.analyze(word))
    first = stems[0][0] if stems else 0
    return [(position - first, stem) for position, stem in stems]


def to_query(typed: Typed, schema: tantivy.Schema, field: str) -> tantivy.Query:
    """What `typed` asks of one text field."""
    if typed.empty:
        return tantivy.Query.empty_query()
    runs = [_every(run, schema, field) for run in typed.alternatives]
    if len(runs) == 1:
        return runs[0]
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, run) for run in runs])


def _every(run: tuple[Operand, ...], schema: tantivy.Schema, field: str) -> tantivy.Query:
    """All operands of a run: the words it asks for, without those it excludes."""
    clauses = [
        (tantivy.Occur.MustNot if operand.negated else tantivy.Occur.Must, _match(operand, schema, field))
        for operand in run
    ]
    if all(operand.negated for operand in run):
        clauses.append((tantivy.Occur.Must, tantivy.Query.all_query()))
    return tantivy.Query.boolean_query(clauses)


def _match(operand: Operand, schema: tantivy.Schema, field: str) -> tantivy.Query:
    terms: list[str | tuple[int, str]] = list(operand.terms)
    if len(terms) == 1:
        stem = operand.terms[0][1]
        if operand.prefix:
            return starting(field, stem)
        return tantivy.Query.term_query(schema, field, stem)
    if operand.prefix:
        # A phrase whose last word is a prefix: each word a literal expression, the last one open. (tantivy's
        # phrase-prefix query stops at the first 50 words the prefix begins; this one at 16,384.)
        *words, (position, last) = operand.terms
        patterns: list[str | tuple[int, str]] = [(at, literal(word)) for at, word in words]
        patterns.append((position, literal(last) + ".*"))
        return tantivy.Query.regex_phrase_query(schema, field, patterns)
    return tantivy.Query.phrase_query(schema, field, terms)
