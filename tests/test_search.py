"""`jobs.search` through HTTP, sentence by sentence of docs/search.md: syntax, prefix, folding, word forms,
fields, relevance, sorting, filters, exact totals and facets, cursors."""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from itertools import groupby
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpc.core.cursor import CursorCodec
from tests.support import TEST_SECRET_KEY, Admin, Call, User, bearer, ok, refused

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SUMMARY_KEYS = {"id", "title", "company", "location", "status", "created_at"}

# The corpus: (title, company, location, description, employment_type), published a minute apart, the first
# oldest. Every test below reads it; tests that add jobs use words of their own.
CORPUS = [
    ("Senior Python Developer", "Globex", "Berlin", "Django and PostgreSQL services.", "full_time"),
    ("Python Engineer", "Initech", "İstanbul", "Data pipelines in Python.", "full_time"),
    ("Data Engineer", "Globex", "İzmir", "Spark, Python and the data platform.", "contract"),
    ("Data Platform Engineer", "Hooli", "Berlin", "Kafka streams.", "contract"),
    ("Kıdemli Yazılım Mühendisi", "Şirket Ağı", "İstanbul", "Go ve Kubernetes.", "full_time"),
    ("Frontend Engineers", "Café Crème", "Paris", "React and TypeScript.", "part_time"),
    ("Rust Developer", "Initech", "Ankara", "Systems programming.", "internship"),
    ("Golang Developer", "Umbrella", "Çanakkale", "Microservices in Go.", "temporary"),
    ("Office Manager", "Globex", "Berlin", "Python python python python python scripts.", None),
    ("Öğretmen", "Güneş Okulu", "Muğla", "Çağrı merkezi değil.", "part_time"),
]


def search(call: Call, who: User, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = ok(call("jobs.search", who, **params))
    return result


def titles(result: dict[str, Any]) -> list[str]:
    return [job["title"] for job in result["data"]]


def walk(call: Call, who: User, per_page: int, **params: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """Every id met by following next_cursor from the first page, and every page's answer."""
    pages = [search(call, who, per_page=per_page, **params)]
    while pages[-1]["next_cursor"] is not None:
        pages.append(search(call, who, per_page=per_page, cursor=pages[-1]["next_cursor"], **params))
    return [job["id"] for page in pages for job in page["data"]], pages


def both_ways(client: httpx.Client, call: Call, who: User, **params: Any) -> list[httpx.Response]:
    """The same search by POST (a JSON body) and by GET (a query string): both are decoded by the same rules."""
    query = {name: str(value) for name, value in params.items()}
    return [call("jobs.search", who, **params), client.get("/v1/jobs.search", params=query, headers=bearer(who.token))]


def refused_field(response: httpx.Response) -> str:
    """The one field a `422 invalid_params` names."""
    errors = refused(response, 422, "invalid_params")["details"]["errors"]
    assert len(errors) == 1, errors
    field: str = errors[0]["field"]
    return field


def grouped(values: list[dict[str, Any]]) -> list[tuple[int, set[str]]]:
    """A facet's values grouped by count in the order shown, so that ties may come in any order."""
    return [(count, {entry["value"] for entry in group}) for count, group in groupby(values, lambda v: v["count"])]


def insert(admin: Admin, owner: User, title: str, **fields: Any) -> str:
    """A job written straight to the database (the search document comes from schema.sql's trigger)."""
    row = {
        "account_id": owner.account_id,
        "title": title,
        "company": "Acme",
        "location": "Remote",
        "description": None,
        "employment_type": None,
        "status": "published",
        "published_at": EPOCH,
        **fields,
    }
    columns = ", ".join(row)
    placeholders = ", ".join(f"%({name})s" for name in row)
    return str(admin.sql(f"INSERT INTO jobs ({columns}) VALUES ({placeholders}) RETURNING id", row)[0]["id"])


@pytest.fixture(scope="module")
def corpus(admin: Admin, employer: User) -> dict[str, str]:
    """Title → id of the corpus, plus a draft and a closed job that must never be found."""
    ids = {}
    for minute, (title, company, location, description, kind) in enumerate(CORPUS):
        ids[title] = insert(
            admin,
            employer,
            title,
            company=company,
            location=location,
            description=description,
            employment_type=kind,
            published_at=EPOCH + dt.timedelta(minutes=minute),
        )
    insert(admin, employer, "Python Draft", status="draft", published_at=None)
    insert(admin, employer, "Python Closed", status="closed")
    return ids


@pytest.fixture(scope="module")
def searcher(admin: Admin) -> User:
    """A candidate with a budget of its own."""
    return admin.user("candidate")


@pytest.fixture
def word(admin: Admin) -> Iterator[str]:
    """A word of the test's own, in the title of every job it inserts; they are deleted afterwards, so that the
    searches over every published job (the property below) still fit one page."""
    word = f"zq{uuid.uuid4().hex[:8]}"
    yield word
    admin.sql("DELETE FROM jobs WHERE title LIKE %(pattern)s", {"pattern": f"%{word}%"})


@pytest.fixture
def find(call: Call, searcher: User, corpus: dict[str, str]) -> Callable[..., list[str]]:
    """`find(q=..., ...)`: the titles of every match (one page of up to 100)."""

    def do(**params: Any) -> list[str]:
        return titles(search(call, searcher, per_page=100, **params))

    return do


# -- Syntax ------------------------------------------------------------------------------------------------


def test_every_word_is_required(find: Callable[..., list[str]]) -> None:
    assert set(find(q="python django")) == {"Senior Python Developer"}


def test_a_phrase_must_appear_as_written(find: Callable[..., list[str]]) -> None:
    assert set(find(q='"data engineer"')) == {"Data Engineer"}
    assert set(find(q="data engineer")) == {"Data Engineer", "Data Platform Engineer", "Python Engineer"}


def test_a_minus_word_excludes(find: Callable[..., list[str]]) -> None:
    assert "Senior Python Developer" in find(q="python")
    assert set(find(q="python -django -office")) == {"Python Engineer", "Data Engineer"}


def test_or_accepts_either_word(find: Callable[..., list[str]]) -> None:
    assert set(find(q="rust or golang")) == {"Rust Developer", "Golang Developer"}


def test_the_last_word_is_also_a_prefix(find: Callable[..., list[str]]) -> None:
    assert "Python Engineer" in find(q="pyth")
    assert set(find(q="rust develo")) == {"Rust Developer"}
    assert find(q="pyth engineer") == [], "only the last word is a prefix"
    assert find(q='"pyth"') == [], "a closed phrase is taken as written"


def test_empty_or_absent_q_is_every_published_job(
    call: Call, searcher: User, corpus: dict[str, str], find: Callable[..., list[str]]
) -> None:
    everything = set(find())
    assert everything == set(corpus)
    assert set(find(q="")) == everything
    assert set(find(q="  ")) == everything


def test_q_longer_than_200_characters_is_refused(call: Call, searcher: User) -> None:
    refused(call("jobs.search", searcher, q="a" * 201), 422, "invalid_params")
    ok(call("jobs.search", searcher, q="a" * 200))


def test_the_limit_of_q_counts_characters_not_bytes(client: httpx.Client, call: Call, searcher: User) -> None:
    """Two bytes each in UTF-8: 200 "ü" are 400 bytes, and still 200 characters."""
    for response in both_ways(client, call, searcher, q="ü" * 200):
        assert ok(response)["total"] == 0
    for response in both_ways(client, call, searcher, q="ü" * 201):
        assert refused_field(response) == "q"


# -- What matches ---------------------------------------------------------------------------------------------


def test_case_and_accents_are_ignored(find: Callable[..., list[str]]) -> None:
    assert find(q="muhendis") == ["Kıdemli Yazılım Mühendisi"]
    assert find(q="MÜHENDİS") == ["Kıdemli Yazılım Mühendisi"]
    assert find(q="kidemli yazilim") == ["Kıdemli Yazılım Mühendisi"]
    assert set(find(q="istanbul")) == {"Python Engineer", "Kıdemli Yazılım Mühendisi"}
    assert set(find(q="ISTANBUL")) == {"Python Engineer", "Kıdemli Yazılım Mühendisi"}
    assert find(q="cafe creme") == ["Frontend Engineers"]
    assert find(q="sirket agi") == ["Kıdemli Yazılım Mühendisi"]
    assert find(q="ogretmen gunes") == ["Öğretmen"]
    assert find(q="cagri mugla") == ["Öğretmen"]
    assert find(q="canakkale") == ["Golang Developer"]


def test_plural_and_singular_find_each_other(find: Callable[..., list[str]]) -> None:
    assert "Frontend Engineers" in find(q="frontend engineer")
    assert "Python Engineer" in find(q="engineers")
    assert set(find(q="developers")) == {"Senior Python Developer", "Rust Developer", "Golang Developer"}


def test_title_company_location_and_description_are_searched(find: Callable[..., list[str]]) -> None:
    assert find(q="hooli") == ["Data Platform Engineer"]
    assert find(q="ankara") == ["Rust Developer"]
    assert find(q="kafka") == ["Data Platform Engineer"]


def test_only_published_jobs_are_searched(find: Callable[..., list[str]]) -> None:
    assert "Python Draft" not in find(q="python")
    assert "Python Closed" not in find(q="python")
    assert "Python Closed" not in find()


def test_the_document_follows_every_write(call: Call, employer: User, searcher: User) -> None:
    word = f"zq{uuid.uuid4().hex[:8]}"
    job = ok(call("jobs.create", employer, title=f"Welder {word}", company="Acme", location="Bursa"))
    assert search(call, searcher, q=word)["total"] == 0, "a draft is not searched"
    ok(call("jobs.publish", employer, id=job["id"]))
    assert titles(search(call, searcher, q=word)) == [f"Welder {word}"]
    other = f"zq{uuid.uuid4().hex[:8]}"
    ok(call("jobs.update", employer, id=job["id"], title="Welder", description=f"Night shifts, {other}."))
    assert search(call, searcher, q=word)["total"] == 0
    assert titles(search(call, searcher, q=other)) == ["Welder"]
    ok(call("jobs.close", employer, id=job["id"]))
    assert search(call, searcher, q=other)["total"] == 0


# -- Order ----------------------------------------------------------------------------------------------------


def test_title_matches_rank_above_description_matches(find: Callable[..., list[str]]) -> None:
    found = find(q="python")
    in_title = {"Senior Python Developer", "Python Engineer"}
    assert set(found[:2]) == in_title, "five pythons in a description do not beat one in a title"
    assert found[-1] in {"Data Engineer", "Office Manager"}
    assert find(q="python", sort="relevance") == found, "relevance is the default when q has words"


def test_equal_relevance_is_newest_first_then_by_id(admin: Admin, employer: User, call: Call, searcher: User) -> None:
    word = f"zq{uuid.uuid4().hex[:8]}"
    same_time = [insert(admin, employer, f"Baker {word}") for _ in range(4)]
    newer = insert(admin, employer, f"Baker {word}", published_at=EPOCH + dt.timedelta(days=1))
    expected = [newer, *sorted(same_time, key=uuid.UUID, reverse=True)]
    assert [job["id"] for job in search(call, searcher, q=word)["data"]] == expected
    assert [job["id"] for job in search(call, searcher, q=word, sort="newest")["data"]] == expected


def test_newest_is_the_default_without_words_and_sorts_by_publication(
    find: Callable[..., list[str]], corpus: dict[str, str]
) -> None:
    newest = [title for title, *_ in reversed(CORPUS)]
    assert [title for title in find() if title in corpus] == newest
    assert find(q="python", sort="newest") == [
        "Office Manager",
        "Data Engineer",
        "Python Engineer",
        "Senior Python Developer",
    ]


def test_an_unknown_sort_is_refused(call: Call, searcher: User) -> None:
    refused(call("jobs.search", searcher, sort="oldest"), 422, "invalid_params")


# -- Filters --------------------------------------------------------------------------------------------------


def test_location_and_company_are_folded_substrings(find: Callable[..., list[str]]) -> None:
    assert find(location="izmir") == ["Data Engineer"]
    assert set(find(location="STANBUL")) == {"Python Engineer", "Kıdemli Yazılım Mühendisi"}
    assert set(find(company="glob")) == {"Senior Python Developer", "Data Engineer", "Office Manager"}
    assert find(company="sirket") == ["Kıdemli Yazılım Mühendisi"]
    assert find(company="50%") == [], "wildcards are taken literally"
    assert set(find(q="python", location="berlin")) == {"Senior Python Developer", "Office Manager"}


def test_employment_type_takes_one_or_more(
    client: httpx.Client, searcher: User, find: Callable[..., list[str]]
) -> None:
    assert set(find(employment_type="contract")) == {"Data Engineer", "Data Platform Engineer"}
    both = {"Data Engineer", "Data Platform Engineer", "Rust Developer"}
    assert set(find(employment_type=["contract", "internship"])) == both
    response = client.get(
        "/v1/jobs.search",
        params=[("employment_type", "contract"), ("employment_type", "internship"), ("per_page", "100")],
        headers={"Authorization": f"Bearer {searcher.token}"},
    )
    assert set(titles(ok(response))) == both


def test_a_bad_employment_type_is_refused(call: Call, searcher: User) -> None:
    for bad in ("freelance", [], ["contract", "nope"]):
        body = refused(call("jobs.search", searcher, employment_type=bad), 422, "invalid_params")
        assert body["details"]["errors"][0]["field"] == "employment_type"


@pytest.mark.parametrize("after", ["2026-01-01T00:07:00Z", "2026-01-01t00:07:00z", "2026-01-01T03:07:00.5+03:00"])
def test_posted_after_keeps_later_publications(
    find: Callable[..., list[str]], corpus: dict[str, str], after: str
) -> None:
    later = [title for title in find(posted_after=after) if title in corpus]
    assert later == ["Öğretmen", "Office Manager"]


@pytest.mark.parametrize("bad", ["2026-01-01T00:00:00", "2026-01-01", "0.5", "yesterday", 1700000000])
def test_posted_after_is_a_time_with_its_offset(client: httpx.Client, call: Call, searcher: User, bad: Any) -> None:
    body = refused(call("jobs.search", searcher, posted_after=bad), 422, "invalid_params")
    assert body["details"]["errors"][0]["field"] == "posted_after"
    response = client.get("/v1/jobs.search", params={"posted_after": str(bad)}, headers=bearer(searcher.token))
    refused(response, 422, "invalid_params")


# -- The answer -----------------------------------------------------------------------------------------------


def test_the_answer_has_its_shape_and_an_exact_total(call: Call, searcher: User, corpus: dict[str, str]) -> None:
    result = search(call, searcher, q="engineer", per_page=2)
    assert set(result) == {"data", "total", "page", "per_page", "next_cursor"}
    assert result["total"] == 4
    assert result["page"] == 1
    assert result["per_page"] == 2
    assert all(set(job) == SUMMARY_KEYS and job["status"] == "published" for job in result["data"])


@pytest.mark.parametrize("per_page", [0, 101])
def test_per_page_outside_1_to_100_is_refused(
    client: httpx.Client, call: Call, searcher: User, corpus: dict[str, str], per_page: int
) -> None:
    for response in both_ways(client, call, searcher, per_page=per_page):
        assert refused_field(response) == "per_page"


@pytest.mark.parametrize("per_page", [1, 100])
def test_per_page_from_1_to_100_is_taken(
    client: httpx.Client, call: Call, searcher: User, corpus: dict[str, str], per_page: int
) -> None:
    for response in both_ways(client, call, searcher, per_page=per_page):
        result = ok(response)
        assert result["per_page"] == per_page
        assert len(result["data"]) == min(per_page, result["total"])


def test_per_page_is_20_by_default(admin: Admin, employer: User, call: Call, searcher: User, word: str) -> None:
    for _ in range(25):
        insert(admin, employer, f"Glazier {word}")
    first = search(call, searcher, q=word)
    assert (first["per_page"], len(first["data"]), first["total"]) == (20, 20, 25)
    assert first["next_cursor"] is not None
    second = search(call, searcher, q=word, cursor=first["next_cursor"])
    assert (second["per_page"], len(second["data"]), second["next_cursor"]) == (20, 5, None)


def test_facets_count_the_whole_matching_set(call: Call, searcher: User, corpus: dict[str, str]) -> None:
    result = search(call, searcher, q="engineer", facets=True, per_page=1)
    assert result["facets"] == {
        "employment_type": [
            {"value": "contract", "count": 2},
            {"value": "full_time", "count": 1},
            {"value": "part_time", "count": 1},
        ],
        "location": [
            {"value": "Berlin", "count": 1},
            {"value": "Paris", "count": 1},
            {"value": "İstanbul", "count": 1},
            {"value": "İzmir", "count": 1},
        ],
        "company": [
            {"value": "Café Crème", "count": 1},
            {"value": "Globex", "count": 1},
            {"value": "Hooli", "count": 1},
            {"value": "Initech", "count": 1},
        ],
    }
    assert "facets" not in search(call, searcher, q="engineer", facets=False)


def test_facets_keep_the_ten_largest(admin: Admin, employer: User, call: Call, searcher: User) -> None:
    word = f"zq{uuid.uuid4().hex[:8]}"
    for town in range(12):
        for _ in range(2 if town < 6 else 1):
            insert(admin, employer, f"Plumber {word}", location=f"Town {town:02}")
    facets = search(call, searcher, q=word, facets=True)["facets"]
    expected = [{"value": f"Town {town:02}", "count": 2 if town < 6 else 1} for town in range(10)]
    assert facets["location"] == expected, "largest first, ties by value, ten at most"
    assert facets["company"] == [{"value": "Acme", "count": 18}]
    assert facets["employment_type"] == []


def test_facets_are_largest_first_not_alphabetical(
    admin: Admin, employer: User, call: Call, searcher: User, word: str
) -> None:
    """Counts that run against the alphabet, with eleven values where the first in the alphabet is the smallest:
    it is the one left out (Alfa, Aster). Ties are not compared: the contract does not order them."""
    towns = {"Alfa": 1, "Bravo": 2, "Charlie": 2, "Delta": 2, "Echo": 2, "Foxtrot": 2}
    towns |= {"Golf": 3, "Hotel": 3, "India": 3, "Juliett": 3, "Kilo": 3}
    companies = {"Aster": 1, "Daisy": 2, "Iris": 2, "Lily": 2, "Orchid": 2, "Poppy": 2, "Rose": 2}
    companies |= {"Tulip": 3, "Violet": 3, "Yarrow": 3, "Zinnia": 4}
    kinds = {"contract": 1, "full_time": 3, "internship": 5, "part_time": 7, "temporary": 10}
    spread = [[value for value, count in counts.items() for _ in range(count)] for counts in (towns, companies, kinds)]
    assert len({len(values) for values in spread}) == 1, "one value of each facet per job"
    for town, company, kind in zip(*spread, strict=True):
        insert(admin, employer, f"Roofer {word}", location=town, company=company, employment_type=kind)
    facets = search(call, searcher, q=word, facets=True, per_page=1)["facets"]
    assert facets["employment_type"] == [{"value": kind, "count": kinds[kind]} for kind in reversed(kinds)]
    assert grouped(facets["location"]) == [
        (3, {"Golf", "Hotel", "India", "Juliett", "Kilo"}),
        (2, {"Bravo", "Charlie", "Delta", "Echo", "Foxtrot"}),
    ]
    assert grouped(facets["company"]) == [
        (4, {"Zinnia"}),
        (3, {"Tulip", "Violet", "Yarrow"}),
        (2, {"Daisy", "Iris", "Lily", "Orchid", "Poppy", "Rose"}),
    ]


def test_get_takes_query_parameters(client: httpx.Client, searcher: User, corpus: dict[str, str]) -> None:
    response = client.get(
        "/v1/jobs.search",
        params={"q": "python", "facets": "true", "per_page": "1", "location": "berlin"},
        headers={"Authorization": f"Bearer {searcher.token}"},
    )
    result = ok(response)
    assert result["total"] == 2 and len(result["data"]) == 1 and "facets" in result


def test_search_needs_read_jobs(call: Call, admin: Admin, employer: User) -> None:
    key = admin.api_key(employer, scopes="write:jobs")["key"]
    refused(call("jobs.search", key), 403, "insufficient_scope")
    refused(call("jobs.search", None), 401, "missing_credentials")


def test_search_is_in_openapi(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    assert any("jobs.search" in path for path in document["paths"])


# -- Cursors --------------------------------------------------------------------------------------------------


def test_pages_follow_the_cursor_to_the_end(call: Call, searcher: User, corpus: dict[str, str]) -> None:
    ids, pages = walk(call, searcher, 3, q="engineer or developer")
    assert [page["page"] for page in pages] == [1, 2, 3]
    assert pages[-1]["next_cursor"] is None
    assert len(ids) == len(set(ids)) == pages[0]["total"] == 7
    assert ids == [job["id"] for job in search(call, searcher, q="engineer or developer", per_page=100)["data"]]


def test_cursors_have_no_depth_limit(admin: Admin, employer: User, call: Call, word: str) -> None:
    """Past the 10,000 rows that page numbers may reach in jobs.list (docs/decisions.md): 101 pages of 100, every
    match once, in the order of equal relevance (newest first, then by id)."""
    rows = admin.sql(
        "INSERT INTO jobs (account_id, title, company, location, status, published_at)"
        " SELECT %(account)s::uuid, %(title)s, 'Acme', 'Remote', 'published',"
        " %(epoch)s::timestamptz + mod(n, 7) * interval '1 minute' FROM generate_series(1, 10050) AS n"
        " RETURNING id::text AS id, published_at",
        {"account": employer.account_id, "title": f"Mason {word}", "epoch": EPOCH},
    )
    newest = sorted(rows, key=lambda row: (row["published_at"], uuid.UUID(row["id"])), reverse=True)
    reader = admin.user("candidate")  # a budget of its own for 101 calls
    ids, pages = walk(call, reader, 100, q=word)
    assert [page["page"] for page in pages] == list(range(1, 102))
    assert pages[-1]["next_cursor"] is None
    assert all(page["total"] == 10_050 for page in pages)
    assert len(ids) == len(set(ids)) == 10_050
    assert ids == [row["id"] for row in newest]


def test_per_page_may_change_between_pages(call: Call, searcher: User, corpus: dict[str, str]) -> None:
    first = search(call, searcher, per_page=2)
    second = search(call, searcher, per_page=5, cursor=first["next_cursor"])
    whole = search(call, searcher, per_page=7)
    assert [job["id"] for job in first["data"] + second["data"]] == [job["id"] for job in whole["data"]]


@pytest.mark.parametrize(
    "change",
    [
        {"q": "python"},
        {"q": "engineers"},
        {"sort": "newest"},
        {"location": "berlin"},
        {},
        {"facets": True},
        {"company": "initech"},
        {"posted_after": "2026-01-01T00:00:00Z"},
        {"employment_type": ["contract", "part_time"]},
    ],
    ids=[
        "same-words-other-q",
        "changed",
        "added",
        "added-filter",
        "left-out",
        "facets",
        "added-company",
        "added-posted-after",
        "changed-type",
    ],
)
def test_a_cursor_is_bound_to_its_query(call: Call, searcher: User, corpus: dict[str, str], change: Any) -> None:
    asked = {"q": "engineer", "employment_type": ["contract", "full_time"]}
    first = search(call, searcher, per_page=1, **asked)
    again = {**({} if change == {} else asked), **change}
    if change == {}:
        again = {"q": "engineer"}
    body = refused(
        call("jobs.search", searcher, per_page=1, cursor=first["next_cursor"], **again), 422, "invalid_params"
    )
    assert body["details"]["errors"] == [{"field": "cursor", "message": body["details"]["errors"][0]["message"]}]
    reordered = {"q": "engineer", "employment_type": ["full_time", "contract"]}
    assert search(call, searcher, per_page=1, cursor=first["next_cursor"], **reordered)["page"] == 2


@pytest.mark.parametrize(
    "extra",
    [{"company": "initech"}, {"posted_after": "2026-01-01T00:00:00Z"}, {"facets": False}],
    ids=["company", "posted-after", "facets-false"],
)
def test_a_cursor_is_refused_without_a_parameter_it_was_asked_with(
    call: Call, searcher: User, corpus: dict[str, str], extra: dict[str, Any]
) -> None:
    """Leaving a parameter out is a change too, even one whose value was the default (`facets=false`)."""
    asked = {"q": "engineer or developer", **extra}
    first = search(call, searcher, per_page=1, **asked)
    assert first["next_cursor"] is not None
    response = call("jobs.search", searcher, per_page=1, cursor=first["next_cursor"], q=asked["q"])
    assert refused_field(response) == "cursor"
    assert search(call, searcher, per_page=1, cursor=first["next_cursor"], **asked)["page"] == 2


@pytest.mark.parametrize("bad", ["", "not a cursor", "W10", "eyJ4IjoxfQ", "!" * 40, "a" * 1001])
def test_a_malformed_cursor_is_refused(call: Call, searcher: User, bad: str) -> None:
    body = refused(call("jobs.search", searcher, cursor=bad), 422, "invalid_params")
    assert body["details"]["errors"][0]["field"] == "cursor"


def test_a_cursor_that_names_no_row_is_refused(call: Call, searcher: User, corpus: dict[str, str]) -> None:
    """A well-formed cursor of the right query whose position is not one a page could end on."""
    first = search(call, searcher, per_page=1)
    codec = CursorCodec(TEST_SECRET_KEY, "jobs.search")  # signed as the server signs: only the position is wrong
    raw = codec.decode(first["next_cursor"])
    assert raw is not None
    fingerprint, page, published_at, _, score = json.loads(raw)
    bad_id = [fingerprint, page, published_at, "not-a-uuid", score]
    bad_page = [fingerprint, 0, published_at, str(uuid.uuid4()), score]
    for forged in (bad_id, bad_page):
        cursor = codec.encode(json.dumps(forged).encode())
        body = refused(call("jobs.search", searcher, per_page=1, cursor=cursor), 422, "invalid_params")
        assert body["details"]["errors"][0]["field"] == "cursor"


def test_a_cursor_not_signed_by_the_server_is_refused(call: Call, searcher: User, corpus: dict[str, str]) -> None:
    """A position the server would hand out, but unsigned (as cursors were once): a forged cursor skips nothing."""
    first = search(call, searcher, per_page=1)
    raw = CursorCodec(TEST_SECRET_KEY, "jobs.search").decode(first["next_cursor"])
    assert raw is not None
    unsigned = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    body = refused(call("jobs.search", searcher, per_page=1, cursor=unsigned), 422, "invalid_params")
    assert body["details"]["errors"][0] == {
        "field": "cursor",
        "message": "The cursor is malformed; pass next_cursor exactly as it was returned.",
    }


QUERIES = ["", "python", "engineer", "developer or engineer", "data -kafka", "pyth", "zqties"]


@pytest.fixture(scope="module")
def ties(admin: Admin, employer: User, corpus: dict[str, str]) -> None:
    """Many jobs that tie on relevance and publication time, so that paging must break ties by id."""
    for number in range(15):
        insert(admin, employer, f"Zqties engineer {number % 3}", published_at=EPOCH + dt.timedelta(minutes=number % 2))


@pytest.fixture(scope="module")
def walker(admin: Admin) -> User:
    """A budget of its own for the property's many calls."""
    return admin.user("candidate")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=st.sampled_from(QUERIES), per_page=st.integers(3, 8), sort=st.sampled_from([None, "relevance", "newest"]))
def test_following_next_cursor_visits_every_match_once(
    call: Call, walker: User, ties: None, q: str, per_page: int, sort: str | None
) -> None:
    """The paging promise of docs/search.md: the pages walked hold each match exactly once, and `total` counts them."""
    params: dict[str, Any] = {"q": q} if sort is None else {"q": q, "sort": sort}
    ids, pages = walk(call, walker, per_page, **params)
    everything = search(call, walker, per_page=100, **params)
    assert everything["next_cursor"] is None, "the corpus fits one page of 100, to compare with"
    assert len(ids) == len(set(ids)), "no match twice"
    assert set(ids) == {job["id"] for job in everything["data"]}, "none missed"
    assert all(page["total"] == len(set(ids)) for page in pages), "total is the number of distinct ids walked"
    assert [page["page"] for page in pages] == list(range(1, len(pages) + 1))


# -- Remembered answers stay exact (docs/benchmarks.md) ---------------------------------------------------------


def test_a_remembered_answer_never_hides_a_committed_change(
    admin: Admin, employer: User, call: Call, searcher: User
) -> None:
    """Answers are remembered per version of the published set; a change committed by anyone (here straight in
    the database, as another process would) is seen by the very next call, in search and in the list."""
    word = f"zq{uuid.uuid4().hex[:8]}"
    first = insert(admin, employer, f"Tiler {word}", location=f"Town {word}")
    asked = {"q": word, "facets": True}
    listed = {"q": word, "per_page": 5}
    for _ in range(2):  # the second call is answered from memory
        assert search(call, searcher, **asked)["total"] == 1
        assert ok(call("jobs.list", searcher, **listed))["total"] == 1
    second = insert(admin, employer, f"Tiler {word}")
    assert search(call, searcher, **asked)["total"] == 2, "a job published"
    assert ok(call("jobs.list", searcher, **listed))["total"] == 2
    admin.sql("UPDATE jobs SET title = 'Tiler' WHERE id = %(id)s", {"id": second})
    assert search(call, searcher, **asked)["total"] == 1, "a published job edited"
    assert ok(call("jobs.list", searcher, **listed))["total"] == 1
    admin.sql("UPDATE jobs SET employment_type = 'contract' WHERE id = %(id)s", {"id": first})
    assert search(call, searcher, **asked)["facets"]["employment_type"] == [{"value": "contract", "count": 1}]
    admin.sql("UPDATE jobs SET status = 'closed', closed_at = now() WHERE id = %(id)s", {"id": first})
    assert search(call, searcher, **asked)["total"] == 0, "a job closed"
    assert ok(call("jobs.list", searcher, **listed))["total"] == 0


def test_the_version_moves_only_with_the_published_set(admin: Admin, employer: User) -> None:
    def version() -> int:
        return int(admin.sql("SELECT version FROM job_totals WHERE status = 'published'")[0]["version"])

    before = version()
    draft = insert(admin, employer, "Draft", status="draft", published_at=None)
    admin.sql("UPDATE jobs SET title = 'Draft 2' WHERE id = %(id)s", {"id": draft})
    assert version() == before, "drafts are not in the published set"
    admin.sql("UPDATE jobs SET status = 'published', published_at = now() WHERE id = %(id)s", {"id": draft})
    assert version() > before
