"""Remembered answers follow the published set's changes (procedures/published_cache.py): whatever sequence of
publishes, closes and edits happens, an answer that followed them equals the answer computed afresh — page,
exact total and page 2, for the public `jobs.list`; and `jobs.search`, answered from the search index caught up
by the same changes, agrees with itself before and after."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import procedures.jobs.reads
from procedures.published_cache import PublishedCache
from procedures.window import SLACK, Ranked, Window
from rpc.core.memory import Slot
from tests.support import Admin, Call, User, ok

WORDS = ("python", "rust", "data", "engineer", "developer")
PLACES = ("Berlin", "İstanbul", "Izmir")
TYPES = ("full_time", "contract", None)
SEARCHES: list[dict[str, Any]] = [
    {"q": "zqf"},
    {"q": "zqf python", "facets": True},
    {"q": "zqf engin", "location": "istanbul"},
    {"q": "zqf -rust", "sort": "newest"},
    {"q": "zqf data or rust", "employment_type": ["contract", "full_time"], "facets": True},
]
LISTS: list[dict[str, Any]] = [{"q": "zqf"}, {"q": "zqf", "location": "Berlin"}, {"q": "zqf", "page": 2}]
PER_PAGE = 3


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`with fresh():` answers every call of the block from no memory at all, as a new process would."""

    class Fresh:
        def __enter__(self) -> None:
            # A slot of its own: every app makes its value anew at the first call that keeps a page.
            monkeypatch.setattr(procedures.jobs.reads, "_PUBLIC_PAGES", Slot("fresh", lambda: PublishedCache(size=16)))

        def __exit__(self, *exc: object) -> None:
            monkeypatch.undo()

    return Fresh


def answers(call: Call, who: User) -> list[dict[str, Any]]:
    """Every query's first page, and the second page of each search that has one."""
    found = []
    for params in SEARCHES:
        first = ok(call("jobs.search", who, per_page=PER_PAGE, **params))
        found.append(first)
        if first["next_cursor"]:
            found.append(ok(call("jobs.search", who, per_page=PER_PAGE, cursor=first["next_cursor"], **params)))
    found += [ok(call("jobs.list", who, per_page=PER_PAGE, **params)) for params in LISTS]
    return found


def publish(admin: Admin, owner: User, draw: Any) -> None:
    title = f"zqf {' '.join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)))}"
    admin.sql(
        """INSERT INTO jobs (account_id, title, company, location, employment_type, status, published_at)
        VALUES (%(account)s, %(title)s, 'Acme', %(place)s, %(kind)s, 'published', %(at)s)""",
        {
            "account": owner.account_id,
            "title": title,
            "place": draw(st.sampled_from(PLACES)),
            "kind": draw(st.sampled_from(TYPES)),
            # Ties on publication time on purpose: the order must then be settled by id, as computed.
            "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=draw(st.integers(0, 3))),
        },
    )


def published(admin: Admin) -> list[str]:
    rows = admin.sql("SELECT id::text AS id FROM jobs WHERE status = 'published' AND title LIKE 'zqf%' ORDER BY id")
    return [row["id"] for row in rows]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_followed_answer_equals_a_fresh_one(
    admin: Admin, employer: User, call: Call, fresh: Any, data: st.DataObject
) -> None:
    reader = admin.user("candidate")  # an account's budget per example
    admin.sql("UPDATE jobs SET status = 'closed', closed_at = now() WHERE title LIKE 'zqf%' AND status = 'published'")
    for _ in range(data.draw(st.integers(0, 30))):
        publish(admin, employer, data.draw)
    answers(call, reader)  # remembered from here on
    for _ in range(data.draw(st.integers(1, 20))):
        ids = published(admin)
        actions = ["publish", "close", "edit", "close shown", "close many"] if ids else ["publish"]
        action = data.draw(st.sampled_from(actions))
        if action == "publish":
            publish(admin, employer, data.draw)
        elif action == "close":
            job = data.draw(st.sampled_from(ids))
            admin.sql("UPDATE jobs SET status = 'closed', closed_at = now() WHERE id = %(id)s", {"id": job})
        elif action == "edit":
            job, word = data.draw(st.sampled_from(ids)), data.draw(st.sampled_from(WORDS))
            admin.sql("UPDATE jobs SET title = title || ' ' || %(word)s WHERE id = %(id)s", {"id": job, "word": word})
        elif action == "close shown":  # the rows a page shows leave: the rows held after them come forward
            shown = ok(call("jobs.search", reader, per_page=PER_PAGE, **data.draw(st.sampled_from(SEARCHES))))
            admin.sql(
                "UPDATE jobs SET status = 'closed', closed_at = now() WHERE id = ANY(%(ids)s::uuid[])",
                {"ids": [job["id"] for job in shown["data"]]},
            )
        else:  # more than the slack at once: the windows run out and are computed again
            admin.sql(
                "UPDATE jobs SET status = 'closed', closed_at = now() WHERE id = ANY(%(ids)s::uuid[])",
                {"ids": ids[: SLACK + 2]},
            )
        followed = answers(call, reader)
        with fresh():
            computed = answers(call, reader)
        assert followed == computed


def test_a_version_bumped_without_its_log_is_computed_again(admin: Admin, employer: User, call: Call) -> None:
    """A version moved by hand (no log rows for it) cannot be followed: the answer is computed again."""
    word, reader = f"zq{uuid.uuid4().hex[:8]}", admin.user("candidate")
    admin.sql(
        "INSERT INTO jobs (account_id, title, company, location, status, published_at)"
        " VALUES (%(account)s, %(title)s, 'Acme', 'Remote', 'published', now())",
        {"account": employer.account_id, "title": f"Tiler {word}"},
    )
    assert ok(call("jobs.search", reader, q=word))["total"] == 1
    admin.sql(  # no trigger, no log: as a careless bulk load would
        """DO $$ BEGIN SET LOCAL session_replication_role = replica;
        UPDATE jobs SET status = 'closed' WHERE title LIKE 'Tiler zq%';
        UPDATE job_totals SET version = version + 1, total = total - 1 WHERE status = 'published'; END $$"""
    )
    assert ok(call("jobs.search", reader, q=word))["total"] == 0


@settings(max_examples=300)
@given(
    start=st.lists(st.integers(0, 80), unique=True, min_size=8, max_size=40),
    changes=st.lists(st.tuples(st.booleans(), st.integers(0, 80)), max_size=40),
    shown=st.integers(1, 5),
    bound=st.none() | st.integers(0, 80),
)
def test_a_window_holds_the_first_matches_in_order(
    start: list[int], changes: list[tuple[bool, int]], shown: int, bound: int | None
) -> None:
    """The window alone, against a model that keeps every match: whenever it says it holds the first rows after
    its start, they are the model's, and its total is the model's count."""
    matches = set(start)

    def first(count: int) -> list[int]:
        after = sorted((key for key in matches if bound is None or key < bound), reverse=True)
        return after[:count]

    limit = shown + 1 + SLACK
    window = Window.of([_row(key) for key in first(limit)], limit, len(matches), None if bound is None else (bound,))
    for entered, key in changes:
        if entered == (key in matches):
            continue  # a job enters only when absent, leaves only when present
        if entered:
            matches.add(key)
        else:
            matches.remove(key)
        window = window.followed([(entered, _row(key))])
        assert window.total == len(matches)
        if window.holds(shown + 1):
            held = [row.key[0] for row in window.rows]
            assert held[: shown + 1] == first(shown + 1)
            assert held == first(len(held)), "every row held is the next match, in order"


def _row(key: int) -> Ranked:
    return Ranked(key=(key, str(key)), item=key)
