"""The alerts as an index, so that a published job is compared only with the alerts it can match (the
percolator's problem: one document against many saved queries).

- Alerts asking the same search (the same parsed words, folded location and company, employment types) form
  one `Group`, matched once for all of them: popular searches are held by thousands of people.
- Groups are shelved by their filters (`Shelf`): a job looks only at the shelves whose location, company and
  types it passes, and a shelf's filter conditions are made once for all its groups.
- Within a shelf, each alternative of a group's words (`python or rust`) needs some stems of the job, and some
  stems beginning with a typed prefix (`pyth`). The group is filed under one of them, its anchor: the longest
  stem needed (long stems are the rarer), else the longest prefix. A job looks up its own stems, and every
  beginning of them, and finds only the groups anchored there; groups that need no word (no `q`, or exclusions
  alone) are kept apart.
- A candidate is admitted when the job holds every stem and prefix one alternative needs. That is a necessary
  condition only: whether it matches is decided by `jobs.search`'s own query
  (`procedures.jobs.search.from_index.matching`), asked of the job (`procedures.alerts.matching`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import tantivy

from procedures.jobs.search.corpus import text
from procedures.jobs.search.request import Search
from procedures.jobs.search.syntax import Operand, Typed
from procedures.jobs.search.text import analyzer, fold

# A job offers every beginning of its stems up to this length; a longer prefix is filed under its first
# PREFIX_CAP letters and checked in full on admission.
PREFIX_CAP = 24

Key = tuple[Typed | None, str | None, str | None, frozenset[str] | None]

_ANALYZER = analyzer()


@dataclass(frozen=True, slots=True)
class Need:
    """What one alternative of the words needs of a job: every stem of `stems`, and for each of `prefixes`
    a stem beginning with it."""

    stems: frozenset[str]
    prefixes: tuple[str, ...]

    def met(self, job: Job) -> bool:
        return self.stems <= job.stems and all(job.has_prefix(prefix) for prefix in self.prefixes)


@dataclass(frozen=True, slots=True)
class Job:
    """What a published job offers the index: its stems as `jobs.search` indexes them, their beginnings, and
    its folded filter fields."""

    stems: frozenset[str]
    prefixes: frozenset[str]
    location: str
    company: str
    employment_type: str | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Job:
        """`row` holds the columns of `procedures.jobs.search.corpus.COLUMNS`."""
        stems = frozenset(_ANALYZER.analyze(text(row)))
        prefixes = frozenset(stem[:end] for stem in stems for end in range(1, min(len(stem), PREFIX_CAP) + 1))
        return cls(stems, prefixes, fold(row["location"]), fold(row["company"]), row["employment_type"])

    def has_prefix(self, prefix: str) -> bool:
        if len(prefix) <= PREFIX_CAP:
            return prefix in self.prefixes
        return any(stem.startswith(prefix) for stem in self.stems)


Filters = tuple[str | None, str | None, frozenset[str] | None]  # folded location and company, employment types


@dataclass(slots=True)
class Group:
    """The alerts that ask one search, and the search's own query (made when first asked)."""

    search: Search
    needs: tuple[Need, ...]  # one per alternative; empty when no word is needed
    alerts: list[str] = field(default_factory=list)
    query: tantivy.Query | None = None

    def met(self, job: Job) -> bool:
        return not self.needs or any(need.met(job) for need in self.needs)


@dataclass(slots=True)
class Shelf:
    """The groups of one set of filters, filed by anchor; `filters` are their query's conditions besides the
    words, made once for all of them (`procedures.jobs.search.from_index.filtering`)."""

    location: str | None
    company: str | None
    types: frozenset[str] | None
    by_stem: defaultdict[str, list[Group]] = field(default_factory=lambda: defaultdict(list))
    by_prefix: defaultdict[str, list[Group]] = field(default_factory=lambda: defaultdict(list))
    wordless: list[Group] = field(default_factory=list)
    filters: list[tantivy.Query] | None = None

    def admits(self, job: Job) -> bool:
        return (
            (self.types is None or job.employment_type in self.types)
            and (self.location is None or self.location in job.location)
            and (self.company is None or self.company in job.company)
        )

    def file(self, group: Group) -> None:
        needs = group.needs
        if not needs or any(not need.stems and not need.prefixes for need in needs):
            self.wordless.append(group)
            return
        for need in needs:
            if need.stems:
                self.by_stem[max(need.stems, key=lambda stem: (len(stem), stem))].append(group)
            else:
                self.by_prefix[max(need.prefixes, key=len)[:PREFIX_CAP]].append(group)

    def pools(self, job: Job) -> Iterator[list[Group]]:
        yield self.wordless
        for stem in job.stems:
            if stem in self.by_stem:
                yield self.by_stem[stem]
        if self.by_prefix:
            for prefix in job.prefixes:
                if prefix in self.by_prefix:
                    yield self.by_prefix[prefix]


class AlertIndex:
    """Every alert of a worker's knowledge: shelved by filters, filed by anchor."""

    def __init__(self, earlier: AlertIndex | None = None) -> None:
        """An empty index; the queries `earlier` made are taken up by the same searches here (a reload keeps
        them rather than making them all anew)."""
        self._groups: dict[Key, Group] = {}
        self._shelves: dict[Filters, Shelf] = {}
        self._alerts: set[str] = set()
        self._earlier = earlier

    def __len__(self) -> int:
        return len(self._alerts)

    def __contains__(self, alert_id: str) -> bool:
        return alert_id in self._alerts

    @property
    def groups(self) -> int:
        return len(self._groups)

    def add(self, alert_id: str, search: Search) -> None:
        """File an alert (once: adding it again changes nothing)."""
        if alert_id in self._alerts:
            return
        self._alerts.add(alert_id)
        if search.typed is not None and search.typed.empty:
            return  # stop words alone: matches nothing, as in jobs.search
        filters: Filters = (
            fold(search.location) if search.location is not None else None,
            fold(search.company) if search.company is not None else None,
            frozenset(search.employment_type) if search.employment_type else None,
        )
        key: Key = (search.typed, *filters)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = self._group(key, search)
            shelf = self._shelves.get(filters)
            if shelf is None:
                shelf = self._shelves[filters] = Shelf(*filters)
                if self._earlier is not None and filters in self._earlier._shelves:
                    shelf.filters = self._earlier._shelves[filters].filters
            shelf.file(group)
        group.alerts.append(alert_id)

    def _group(self, key: Key, search: Search) -> Group:
        typed = search.typed
        group = Group(search, tuple(_need(run) for run in typed.alternatives) if typed is not None else ())
        if self._earlier is not None and key in self._earlier._groups:
            group.query = self._earlier._groups[key].query
        return group

    def settle(self) -> None:
        """Every alert is filed: let go of the earlier index."""
        self._earlier = None

    def candidates(self, job: Job) -> Iterator[tuple[Shelf, Group]]:
        """The groups `job` may match, each once, with their shelf."""
        for shelf in self._shelves.values():
            if not shelf.admits(job):
                continue
            seen: set[int] = set()
            for pool in shelf.pools(job):
                for group in pool:
                    if id(group) not in seen:
                        seen.add(id(group))
                        if group.met(job):
                            yield shelf, group


def _need(run: tuple[Operand, ...]) -> Need:
    """What one run of operands needs: the stems of each word and phrase it asks for (not those it excludes),
    a typed prefix standing for the last stem of its operand."""
    stems: set[str] = set()
    prefixes: list[str] = []
    for operand in run:
        if operand.negated:
            continue
        terms = [stem for _, stem in operand.terms]
        if operand.prefix:
            prefixes.append(terms.pop())
        stems.update(terms)
    return Need(frozenset(stems), tuple(prefixes))
