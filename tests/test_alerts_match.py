"""The property of job alerts (docs/alerts.md): an alert matches a published job exactly when `jobs.search` with
the alert's parameters finds it — for random small corpora and alert parameters, the matches the running worker
writes are compared with what `jobs.search` answers over HTTP on the same live server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import Admin, User, ok

Call = Callable[..., httpx.Response]

WORDS = ("Python", "python", "Engineers", "engineer", "Mühendis", "muhendis", "data", "Developer", "Café", "the")
WORDS += ("İzmir", "senior", "rust", "Rust", "developers", "analyst")
LOCATIONS = ("Berlin", "İzmir", "München", "Remote (EU)", "izmir", "Munich")
COMPANIES = ("Globex", "Café Ltd", "Initech", "Data Works")
TYPES = ("full_time", "part_time", "contract", "internship", "temporary")

words = st.sampled_from(WORDS)
prefixes = st.builds(lambda word, end: word[:end], words, st.integers(1, 5))
chunks = st.one_of(
    words,
    st.builds(lambda a, b: f'"{a} {b}"', words, words),
    st.builds(lambda word: f"-{word}", words),
    st.just("or"),
)
queries = st.one_of(
    st.none(),
    st.builds(lambda head, last: " ".join([*head, last]), st.lists(chunks, max_size=3), st.one_of(words, prefixes)),
    st.builds(" ".join, st.lists(chunks, min_size=1, max_size=3)),
)


def substring(choices: tuple[str, ...]) -> st.SearchStrategy[str | None]:
    """None (most often: each filter narrows the matches), or a piece of one of `choices`, in any case."""

    def piece(text: str, start: int, length: int, upper: bool) -> str:
        part = text[start : start + length]
        return part.upper() if upper else part.lower()

    return st.one_of(
        st.none(),
        st.none(),
        st.builds(piece, st.sampled_from(choices), st.integers(0, 3), st.integers(1, 6), st.booleans()),
    )


alerts = st.fixed_dictionaries(
    {
        "q": queries,
        "location": substring(LOCATIONS),
        "company": substring(COMPANIES),
        "employment_type": st.one_of(
            st.none(), st.none(), st.sampled_from(TYPES), st.lists(st.sampled_from(TYPES), min_size=1, max_size=3)
        ),
    }
)
jobs = st.fixed_dictionaries(
    {
        "title": st.lists(words, min_size=1, max_size=3).map(" ".join),
        "description": st.lists(words, max_size=4).map(" ".join),
        "location": st.sampled_from(LOCATIONS),
        "company": st.sampled_from(COMPANIES),
        "employment_type": st.one_of(st.none(), st.sampled_from(TYPES)),
    }
)

_INSERT = """
INSERT INTO jobs (id, account_id, title, company, location, description, employment_type, status, published_at)
SELECT id, %(account)s, title, company, location, description, employment_type, 'published', now()
FROM unnest(%(ids)s::uuid[], %(title)s::text[], %(company)s::text[], %(location)s::text[],
            %(description)s::text[], %(employment_type)s::text[])
     AS j (id, title, company, location, description, employment_type)
"""

_MATCHED_THROUGH = """
SELECT c.version >= t.version AS done FROM job_alert_cursor AS c, job_totals AS t WHERE t.status = 'published'
"""


def publish(admin: Admin, owner: User, corpus: list[dict[str, Any]]) -> list[str]:
    """The corpus published in one transaction (the jobs of earlier examples closed first); their ids."""
    admin.sql("UPDATE jobs SET status = 'closed', closed_at = now() WHERE status = 'published'")
    ids = [str(uuid.uuid4()) for _ in corpus]
    values = {
        "account": owner.account_id,
        "ids": ids,
        **{field: [job[field] for job in corpus] for field in corpus[0]},
    }
    admin.sql(_INSERT, values)
    return ids


def matched_through(admin: Admin) -> None:
    """Until the worker has matched every version published so far."""
    deadline = time.monotonic() + 30
    while True:
        row = admin.sql(_MATCHED_THROUGH)[0]
        if row["done"]:
            return
        assert time.monotonic() < deadline, "the worker did not match the publishes in time"
        time.sleep(0.05)


def found(call: Call, who: User, params: dict[str, Any]) -> set[str]:
    asked = {name: value for name, value in params.items() if value is not None}
    page = ok(call("jobs.search", who, per_page=100, **asked))
    assert page["next_cursor"] is None, "the corpus fits one page"
    return {job["id"] for job in page["data"]}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(jobs, min_size=1, max_size=6), asked=st.lists(alerts, min_size=1, max_size=5))
def test_an_alert_matches_exactly_what_jobs_search_finds(
    call: Call, admin: Admin, employer: User, candidate: User, corpus: list[dict[str, Any]], asked: list[Any]
) -> None:
    admin.sql("DELETE FROM job_alerts")
    made = [ok(call("alerts.create", candidate, frequency="daily", **params))["id"] for params in asked]
    ids = publish(admin, employer, corpus)
    matched_through(admin)
    for alert_id, params in zip(made, asked, strict=True):
        rows = admin.sql("SELECT job_id::text AS id FROM job_alert_matches WHERE alert_id = %(a)s", {"a": alert_id})
        assert {row["id"] for row in rows} == found(call, candidate, params) & set(ids), (params, corpus)
