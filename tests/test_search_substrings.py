"""Substring filters and typed prefixes against PostgreSQL over corpora of many distinct values: every title,
company and location its own, made of a few letters (so that values share trigrams, repeat them and hold them
more than once), with letters that fold (`İ`, `ı`, `ş`, `ü`, `é`, `ß`), spaces and the characters LIKE and
regular expressions treat as special; descriptions of many distinct words sharing their first letters. Through
HTTP, the index's answers of `jobs.list`'s `q`, `location` and `company` and of `jobs.search`'s `location`,
`company` and typed prefixes equal plain PostgreSQL queries over `jobs`, total and every id in order."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpc.api import like_pattern
from tests.support import Admin, LiveServer, User, bearer, ok
from tests.test_search_index import ready, reference, replace_jobs, searched

LETTERS = "aabİış üéß.%_("  # `a` twice: long runs of one letter, and trigrams repeated in a value
# The descriptions' words share no letter with the values: PostgreSQL's text-search parser and the index's read
# `b.%_` as words differently (a host name to one), which typed prefixes are not about.
WORD_LETTERS = "cdefgh"
MOMENTS = [dt.datetime(2026, 3, day, 9, tzinfo=dt.UTC) for day in (1, 2, 3, 4)]

values = st.text(LETTERS, min_size=1, max_size=12)
words = st.text(WORD_LETTERS, min_size=2, max_size=7)
jobs_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "title": values,
            "company": values,
            "location": values,
            "description": st.lists(words, max_size=6).map(" ".join),
            "employment_type": st.none(),
            "status": st.sampled_from(["published", "published", "published", "closed"]),
            "published_at": st.sampled_from(MOMENTS),
        }
    ),
    min_size=1,
    max_size=40,
)


@st.composite
def pieces(draw: st.DrawFn, jobs: list[dict[str, Any]]) -> str:
    """What a filter types: a piece of a value present (of any length, so trigram phrases of every length), or
    letters that may be nowhere."""
    if draw(st.integers(0, 3)):
        value = draw(st.sampled_from([job[name] for job in jobs for name in ("title", "company", "location")]))
        start = draw(st.integers(0, len(value) - 1))
        return str(value[start : start + draw(st.sampled_from([1, 2, 3, 4, 5, 6, 8]))])
    return draw(st.text(LETTERS, min_size=1, max_size=6))


@pytest.fixture(scope="module")
def server(live: LiveServer) -> LiveServer:
    ready(live)
    return live


@pytest.fixture(scope="module")
def http(server: LiveServer) -> Any:
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def reader(admin: Admin) -> User:
    return admin.user("candidate")


def listed(http: httpx.Client, who: User, params: dict[str, str]) -> tuple[list[str], int]:
    """Every id of a filtered `jobs.list`, in order, and its total."""
    page = ok(http.get("/v1/jobs.list", params={**params, "per_page": 100}, headers=bearer(who.token)))
    return [job["id"] for job in page["data"]], page["total"]


def list_reference(admin: Admin, params: dict[str, str]) -> list[str]:
    """`jobs.list`'s filters as PostgreSQL reads them over folded text (the index folds accents too)."""
    conditions, values = ["status = 'published'"], {}
    for name, text in params.items():
        values[name] = like_pattern(text)
        if name == "q":
            conditions.append("(job_fold(title) LIKE job_fold(%(q)s) OR job_fold(company) LIKE job_fold(%(q)s))")
        else:
            conditions.append(f"job_fold({name}) LIKE job_fold(%({name})s)")
    rows = admin.sql(
        f"SELECT id::text AS id FROM jobs WHERE {' AND '.join(conditions)} ORDER BY created_at DESC, id DESC", values
    )
    return [row["id"] for row in rows]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), jobs=jobs_strategy)
def test_substrings_and_prefixes_over_many_distinct_values_answer_as_postgresql_does(
    admin: Admin, employer: User, reader: User, http: httpx.Client, data: st.DataObject, jobs: list[dict[str, Any]]
) -> None:
    replace_jobs(admin, employer, jobs)
    filters = data.draw(st.lists(st.sampled_from(["q", "location", "company"]), min_size=1, max_size=3, unique=True))
    params = {name: data.draw(pieces(jobs)) for name in filters}
    expected = list_reference(admin, params)
    assert listed(http, reader, params) == (expected, len(expected)), params
    search = {name: params[name] for name in ("location", "company") if name in params}
    prefix = data.draw(words).rstrip()[: data.draw(st.integers(1, 3))]
    search["q"] = data.draw(st.sampled_from([prefix, f"{data.draw(words)} {prefix}"]))
    walked, first = searched(http, reader, 7, **search)
    wanted, _ = reference(admin, search)
    assert walked == wanted and first["total"] == len(wanted), search
