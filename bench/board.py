"""Job text like a real board's (`bin/bench --text board`): what search costs grow with is the number of distinct
values and words, which the small seed of `bench.config` keeps to a few dozen.

- Titles: about 4,500 distinct, each a real occupation (Faker's English and Turkish lists, about 1,400), alone or
  with a seniority word of its language.
- Companies: 18,000 distinct names (Faker's, English and Turkish).
- Locations: the 33 of the small seed (a board's cities are few).
- Descriptions: 60 to 140 words of the job title's language, drawn by their frequency in that language among its
  30,000 most frequent words (`wordfreq`): a vocabulary of tens of thousands of words, as on a real board.

Titles and companies are drawn Zipf-weighted (a few employers and occupations post most jobs). Everything is made
from one seed, so every run (and every size) draws the same text.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import faker
import wordfreq

from bench.config import LOCATIONS
from bench.mixes import CITIES, TYPES, Material

TITLES = 4_500
COMPANIES = 18_000
WORDS = 30_000  # per language
DESCRIPTION_WORDS = (60, 140)
# Per language: Faker's locale of occupations and company names, and the seniority words a title may take.
LANGUAGES = {
    "en": ("en_US", ("", "Senior ", "Junior ", "Lead ")),
    "tr": ("tr_TR", ("", "Kıdemli ", "Uzman ", "Stajyer ")),
}


@dataclass(frozen=True, slots=True)
class Drawn:
    """Values and the cumulative weights to draw them by."""

    values: tuple[str, ...]
    weights: tuple[float, ...]

    @classmethod
    def zipf(cls, values: Sequence[str]) -> Drawn:
        return cls(tuple(values), tuple(itertools.accumulate(1 / rank for rank in range(1, len(values) + 1))))

    def one(self, rng: random.Random) -> str:
        return rng.choices(self.values, cum_weights=self.weights)[0]

    def some(self, rng: random.Random, count: int) -> list[str]:
        return rng.choices(self.values, cum_weights=self.weights, k=count)


@dataclass(frozen=True, slots=True)
class Board:
    """The text of a board's jobs: titles (with their language), companies, and each language's words."""

    titles: Drawn
    language_of: dict[str, str]
    companies: Drawn
    words: dict[str, Drawn]

    @classmethod
    def made(cls, seed: int = 36) -> Board:
        rng = random.Random(seed)  # noqa: S311 - reproducible text, not secrets
        titled = [
            (f"{level}{job}", language)
            for language, (locale, levels) in LANGUAGES.items()
            for job in _jobs(locale)
            for level in levels
        ]
        chosen = rng.sample(sorted(dict(titled).items()), TITLES)
        names = faker.Faker([locale for locale, _ in LANGUAGES.values()])
        names.seed_instance(seed)
        companies: dict[str, None] = {}
        while len(companies) < COMPANIES:
            companies.setdefault(names.company())
        return cls(
            titles=Drawn.zipf([title for title, _ in chosen]),
            language_of=dict(chosen),
            companies=Drawn.zipf(list(companies)),
            words={language: _frequent(language) for language in LANGUAGES},
        )

    def job(self, rng: random.Random) -> tuple[str, str, str, str]:
        """A job's title, company, location and description."""
        title = self.titles.one(rng)
        words = self.words[self.language_of[title]].some(rng, rng.randint(*DESCRIPTION_WORDS))
        return title, self.companies.one(rng), rng.choice(LOCATIONS), " ".join(words)


@functools.cache
def board() -> Board:
    """The board of this run (made once: a few seconds)."""
    return Board.made()


def _jobs(locale: str) -> list[str]:
    """Faker's occupations of `locale`."""
    provider = next(p for p in faker.Faker(locale).get_providers() if hasattr(p, "jobs"))
    return sorted(set(provider.jobs))


def _frequent(language: str) -> Drawn:
    """The `WORDS` most frequent words of `language` (letters only), weighted by their frequency."""
    words = [word for word in wordfreq.top_n_list(language, WORDS * 2) if word.isalpha()][:WORDS]
    frequencies = [wordfreq.word_frequency(word, language) for word in words]
    return Drawn(tuple(words), tuple(itertools.accumulate(frequencies)))


_WORD = re.compile(r"[^\W\d_]{2,}")


def material(board: Board) -> Material:
    """What people type on this board: its titles' words, the likeliest first (each title's words weighted as
    the title is drawn), pieces of its companies' names, its cities; and, for never-seen queries, a long tail of
    every title word and every word of the descriptions."""
    weights = [b - a for a, b in zip((0.0, *board.titles.weights), board.titles.weights, strict=False)]
    counted: Counter[str] = Counter()
    for title, weight in zip(board.titles.values, weights, strict=True):
        for word in _WORD.findall(title.lower()):
            counted[word] += weight
    words = [word for word, _ in counted.most_common()]
    firsts = list(dict.fromkeys(_WORD.findall(name.lower())[0] for name in board.companies.values[:2000]))
    phrases = [f'"{title.lower()}"' for title in board.titles.values[:40] if " " in title][:10]
    return Material(
        words=words[:60],
        prefixes=[word[: max(3, len(word) // 2)] for word in words[:13]],
        phrases=phrases,
        exclusions=[f"{a} -{b}" for a, b in zip(words[:5], words[5:10], strict=True)],
        list_filters=[
            *(f"q={word}" for word in words[:16]),
            *(f"location={city.title()}" for city in CITIES),
            *(f"company={name}" for name in firsts[:14]),
            *(f"employment_type={kind}" for kind in TYPES),
        ],
        company_parts=firsts,
        rare_words=sorted({*words, *(word for drawn in board.words.values() for word in drawn.values)}),
    )
