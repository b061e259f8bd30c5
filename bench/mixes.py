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


def list_targets() -> list[str]:
    """~50 one-filter `jobs.list` targets, the likeliest first."""
    return [f"/v1/jobs.list?{_quoted(query)}" for query in LIST_FILTERS]


def search_targets(rng: random.Random) -> list[str]:
    """~250 distinct `jobs.search` targets, the likeliest first: words and prefixes lead, then pairs, phrases
    and exclusions; a quarter also ask for a location, one in eight for facets."""
    pairs = [f"{a} {b}" for a, b in itertools.combinations(WORDS[:16], 2)]
    rng.shuffle(pairs)
    texts = list(dict.fromkeys([*WORDS[:20], *PREFIXES, *WORDS[20:], *PHRASES, *EXCLUSIONS, *pairs]))[:250]
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
