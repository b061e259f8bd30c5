"""The query mixes of issue 13: what people type into a job board, the popular asked most (Zipf, s = 1).

`jobs.list` gets one filter per request from ~50 distinct ones; `jobs.search` ~250 distinct searches: single
words, pairs, typed prefixes, phrases, exclusions, a quarter with a location, some with facets. Each request
line carries its own target and rotates through the credentials, so the rate limits and the credential check
stay on the measured path; every answer carries its exact total.
"""

from __future__ import annotations

import itertools
import random
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

Line = tuple[str, str, str, str, str]

WORDS = (
    "python", "engineer", "developer", "data", "senior", "java", "frontend", "backend", "cloud", "manager",
    "analyst", "security", "mobile", "rust", "go", "typescript", "platform", "designer", "scientist", "remote",
    "lead", "junior", "architect", "consultant", "qa", "embedded", "learning", "reliability", "staff", "principal",
    "engineers", "developers", "mühendis", "muhendis", "yazılım", "yazilim", "istanbul", "berlin", "izmir", "london",
)  # fmt: skip
PREFIXES = ("pyth", "eng", "devel", "dat", "sen", "man", "anal", "secu", "front", "back", "typescr", "muh", "yaz")
PHRASES = (
    '"data engineer"', '"senior python"', '"machine learning"', '"site reliability"', '"backend developer"',
    '"frontend engineer"', '"cloud architect"', '"security analyst"', '"yazılım mühendisi"', '"staff engineer"',
)  # fmt: skip
EXCLUSIONS = ("python -junior", "engineer -senior", "developer -java", "data -analyst", "manager -qa")
CITIES = ("istanbul", "berlin", "izmir", "london", "remote", "ankara", "amsterdam", "münchen", "eskisehir", "paris")
LIST_FILTERS = (
    *(f"q={word}" for word in ("python", "engineer", "data", "senior", "java", "developer", "manager", "cloud")),
    *(f"q={word}" for word in ("analyst", "security", "rust", "frontend", "backend", "mobile", "globex", "hooli")),
    *(f"location={city}" for city in ("Berlin", "Istanbul", "London", "Remote", "Izmir", "Ankara", "Paris")),
    *(f"location={city}" for city in ("Amsterdam", "Madrid", "Lisbon", "Warsaw", "Dublin", "Toronto")),
    *(f"company={name}" for name in ("Globex", "Initech", "Hooli", "Acme", "Stark", "Wayne", "Tyrell", "Umbrella")),
    *(f"company={name}" for name in ("Galata", "Marmara", "Anatolia", "Bosphorus", "Pied Piper", "Dunder")),
    *(f"employment_type={kind}" for kind in ("full_time", "contract", "part_time", "internship", "temporary")),
)

COMPANY_PARTS = (
    "glo",
    "init",
    "hool",
    "acme",
    "stark",
    "wayne",
    "tyrell",
    "umbr",
    "galata",
    "marmara",
    "anat",
    "bosph",
)
TYPES = ("full_time", "part_time", "contract", "internship", "temporary")


@dataclass(frozen=True, slots=True)
class Material:
    """What people type into a board's boxes, the popular first: the small seed's (`SMALL`), or a realistic
    board's (`bench.board`)."""

    words: Sequence[str]  # at least 40, the likeliest first
    prefixes: Sequence[str]
    phrases: Sequence[str]
    exclusions: Sequence[str]
    list_filters: Sequence[str]  # one-filter `jobs.list` queries (`name=value`), the likeliest first
    company_parts: Sequence[str]  # pieces of company names, as a `company` filter types them
    rare_words: Sequence[str] = ()  # the long tail a never-seen query draws half its words from


SMALL = Material(WORDS, PREFIXES, PHRASES, EXCLUSIONS, LIST_FILTERS, COMPANY_PARTS)


def list_targets(material: Material = SMALL) -> list[str]:
    """~50 one-filter `jobs.list` targets, the likeliest first."""
    return [f"/v1/jobs.list?{_quoted(query)}" for query in material.list_filters]


def search_targets(rng: random.Random, material: Material = SMALL) -> list[str]:
    """~250 distinct `jobs.search` targets, the likeliest first: words and prefixes lead, then pairs, phrases
    and exclusions; a quarter also ask for a location, one in eight for facets."""
    words = material.words
    pairs = [f"{a} {b}" for a, b in itertools.combinations(words[:16], 2)]
    rng.shuffle(pairs)
    asked = [*words[:20], *material.prefixes, *words[20:], *material.phrases, *material.exclusions, *pairs]
    texts = list(dict.fromkeys(asked))[:250]
    targets = []
    for rank, text in enumerate(texts):
        params = {"q": text}
        if rank % 4 == 3:
            params["location"] = CITIES[rank % len(CITIES)]
        if rank % 8 == 5:
            params["facets"] = "true"
        targets.append(f"/v1/jobs.search?{urllib.parse.urlencode(params)}")
    return targets


def zipf_lines(targets: Sequence[str], credentials: Sequence[str], count: int, rng: random.Random) -> list[Line]:
    """`count` GET lines drawing the target with weight 1/rank, the credential in turn."""
    weights = [1 / rank for rank in range(1, len(targets) + 1)]
    drawn = rng.choices(targets, weights, k=count)
    return [("GET", target, f"Bearer {credentials[n % len(credentials)]}", "", "") for n, target in enumerate(drawn)]


def _quoted(query: str) -> str:
    name, _, value = query.partition("=")
    return urllib.parse.urlencode({name: value})


def never_seen_searches(rng: random.Random, count: int, material: Material = SMALL) -> list[str]:
    """`count` distinct `jobs.search` targets made at random, as a search box's long tail: one to three words
    (the last often still being typed), now and then a phrase or an exclusion, a third with a location, some with
    a company, a type or facets. No target repeats, so nothing can have been remembered."""
    made: dict[str, None] = {}
    while len(made) < count:
        words = [_tail(rng, material, word) for word in rng.sample(material.words, rng.randint(1, 3))]
        if rng.random() < 0.5:
            words[-1] = words[-1][: rng.randint(2, max(2, len(words[-1])))]
        text = " ".join(words)
        shape = rng.random()
        if shape < 0.1:
            text = f'"{" ".join(words)}"'
        elif shape < 0.2 and len(words) > 1:
            text = f"{' '.join(words[:-1])} -{words[-1]}"
        params = {"q": text}
        _filters(rng, params, material)
        if rng.random() < 0.125:
            params["facets"] = "true"
        if rng.random() < 0.1:
            params["per_page"] = str(rng.choice((10, 50, 100)))
        made.setdefault(f"/v1/jobs.search?{urllib.parse.urlencode(params)}")
    return list(made)


def never_seen_lists(rng: random.Random, count: int, material: Material = SMALL) -> list[str]:
    """`count` distinct `jobs.list` targets with filters made at random: a `q` (a word or a piece of one), a
    location, a company and a type, one to three of them, on one of the first pages."""
    made: dict[str, None] = {}
    while len(made) < count:
        params: dict[str, str] = {}
        while not params:
            if rng.random() < 0.6:
                word = _tail(rng, material, rng.choice(material.words))
                params["q"] = word[: rng.randint(3, max(3, len(word)))]
            _filters(rng, params, material)
        params["page"] = str(rng.choice((1, 1, 1, 2, 3)))
        made.setdefault(f"/v1/jobs.list?{urllib.parse.urlencode(params)}")
    return list(made)


def _tail(rng: random.Random, material: Material, word: str) -> str:
    """`word`, or half the time one of the long tail, when there is one."""
    if material.rare_words and rng.random() < 0.5:
        return rng.choice(material.rare_words)
    return word


def _filters(rng: random.Random, params: dict[str, str], material: Material) -> None:
    if rng.random() < 0.33:
        city = rng.choice(CITIES)
        params["location"] = city[: rng.randint(3, len(city))]
    if rng.random() < 0.15:
        params["company"] = rng.choice(material.company_parts)
    if rng.random() < 0.2:
        params["employment_type"] = rng.choice(TYPES)


def once_each(targets: Sequence[str], credentials: Sequence[str]) -> list[Line]:
    """One GET line per target, the credential in turn."""
    return [("GET", target, f"Bearer {credentials[n % len(credentials)]}", "", "") for n, target in enumerate(targets)]
