"""Incremental sync (docs/sync.md): `jobs.changes` and `applications.changes` never skip a change, also
when transactions commit in another order than they began; cursors are opaque and bound to their feed; each
caller sees what they may see."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.support import Admin, Call, User, eventually, ok, refused

FEED_KEYS = {"data", "next_cursor", "has_more"}
# The feed waits for the oldest transaction running anywhere on the server, including other databases'.
PATIENCE = 60.0


def follow(call: Call, name: str, who: User, cursor: str | None, **params: Any) -> tuple[list[dict[str, Any]], str]:
    """Every change the feed holds now after `cursor`, page by page, and the cursor after them."""
    seen: list[dict[str, Any]] = []
    while True:
        body = ok(call(name, who, **({"cursor": cursor} if cursor else {}), **params))
        assert set(body) == FEED_KEYS
        seen.extend(body["data"])
        cursor = body["next_cursor"]
        if not body["has_more"]:
            return seen, cursor


def until_seen(
    call: Call, name: str, who: User, cursor: str | None, wanted: Callable[[list[dict[str, Any]]], bool]
) -> tuple[list[dict[str, Any]], str]:
    """Follow the feed until what it delivered satisfies `wanted` (it trails the oldest running transaction)."""
    delivered: list[dict[str, Any]] = []
    position = [cursor]

    def followed() -> bool:
        rows, position[0] = follow(call, name, who, position[0])
        delivered.extend(rows)
        return wanted(delivered)

    eventually(followed, lambda: f"{name}: what it delivered ({len(delivered)} rows) satisfying the test", PATIENCE)
    assert position[0] is not None
    return delivered, position[0]


def ids(rows: list[dict[str, Any]]) -> set[str]:
    return {row["id"] for row in rows}


@pytest.fixture
def new_job(call: Call) -> Callable[..., dict[str, Any]]:
    def make(who: User, publish: bool = True) -> dict[str, Any]:
        job = ok(call("jobs.create", who, title=f"t-{uuid.uuid4().hex[:8]}", company="Acme", location="Izmir"))
        if publish:
            job = ok(call("jobs.publish", who, id=job["id"]))
        return dict(job)

    return make


@pytest.fixture
def sql(database: str) -> Iterator[Callable[[], psycopg.Connection[Any]]]:
    """Connections of the test's own, for transactions held open across the feed's reads."""
    opened: list[psycopg.Connection[Any]] = []

    def connect() -> psycopg.Connection[Any]:
        conn = psycopg.connect(database)
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()


def test_the_feed_shape_and_its_end(call: Call, employer: User, new_job: Callable[..., dict[str, Any]]) -> None:
    job = new_job(employer)
    rows, cursor = until_seen(call, "jobs.changes", employer, None, lambda rows: job["id"] in ids(rows))
    mine = [row for row in rows if row["id"] == job["id"]]
    assert mine == [ok(call("jobs.get", employer, id=job["id"]))]
    again = ok(call("jobs.changes", employer, cursor=cursor))
    assert again == {"data": [], "next_cursor": cursor, "has_more": False}


def test_two_transactions_committing_out_of_order(
    call: Call, employer: User, new_job: Callable[..., dict[str, Any]], sql: Callable[[], psycopg.Connection[Any]]
) -> None:
    """The earlier-started transaction commits last: the feed still delivers it after the cursor it handed out
    while that transaction ran. Drafts: edits of published jobs queue on the published set's version row
    (schema.sql, job_totals), so it is among other writes that commits overtake each other."""
    first, second = new_job(employer, publish=False), new_job(employer, publish=False)
    _, cursor = until_seen(call, "jobs.changes", employer, None, lambda rows: second["id"] in ids(rows))
    early, late = sql(), sql()
    early.execute("UPDATE jobs SET title = 'early' WHERE id = %s", (first["id"],))  # begins first
    late.execute("UPDATE jobs SET title = 'late' WHERE id = %s", (second["id"],))
    late.commit()
    # Whatever the feed hands out now, its cursor may not pass the change still uncommitted.
    rows, cursor = follow(call, "jobs.changes", employer, cursor)
    assert first["id"] not in ids(rows)
    early.commit()
    rows, _ = until_seen(call, "jobs.changes", employer, cursor, lambda rows: first["id"] in ids(rows))
    titles = {row["id"]: row["title"] for row in rows}
    assert titles[first["id"]] == "early"


def test_a_mirror_following_concurrent_writers_converges(
    call: Call,
    client: httpx.Client,
    admin: Admin,
    new_job: Callable[..., dict[str, Any]],
    sql: Callable[[], psycopg.Connection[Any]],
) -> None:
    """Writers through the API and in long SQL transactions, while a reader follows the feed into a mirror."""
    owner, reader_user = admin.user("employer"), admin.user("admin")  # each account its own request budget
    jobs = [new_job(owner, publish=False)["id"] for _ in range(12)]
    mirror: dict[str, dict[str, Any]] = {}
    writing = threading.Event()
    writing.set()
    failures: list[BaseException] = []

    def api_writer(seed: int) -> None:
        rng = random.Random(seed)
        for n in range(15):
            job_id = rng.choice(jobs)
            response = client.post(
                "/v1/jobs.update", json={"id": job_id, "title": f"api-{seed}-{n}"}, headers=owner.auth
            )
            assert response.status_code == 200, response.text

    def sql_writer(seed: int) -> None:
        """Transactions that begin, then wait while an API write begins and commits: out-of-order commits."""
        rng = random.Random(seed)
        conn = sql()
        held, free = jobs[:6], jobs[6:]  # the API write in between never waits on this transaction's locks
        for n in range(10):
            for job_id in sorted(rng.sample(held, 2)):
                conn.execute("UPDATE jobs SET location = %s WHERE id = %s", (f"sql-{seed}-{n}", job_id))
                update = {"id": rng.choice(free), "title": f"between-{seed}-{n}"}
                assert client.post("/v1/jobs.update", json=update, headers=owner.auth).status_code == 200
            conn.commit()

    def reader() -> None:
        cursor = None
        while writing.is_set():
            rows, cursor = follow(call, "jobs.changes", reader_user, cursor, per_page=5)
            keep(rows)
            time.sleep(0.02)
        until_seen(call, "jobs.changes", reader_user, cursor, lambda rows: truth() == current(rows))

    def keep(rows: list[dict[str, Any]]) -> None:
        mirror.update({row["id"]: row for row in rows if row["id"] in jobs})

    def current(rows: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
        keep(rows)
        return {job_id: (row["title"], row["location"]) for job_id, row in mirror.items()}

    def truth() -> dict[str, tuple[str, str]]:
        found = admin.sql(
            "SELECT id::text AS id, title, location FROM jobs WHERE account_id = %(a)s", {"a": owner.account_id}
        )
        return {row["id"]: (row["title"], row["location"]) for row in found}

    def guarded(work: Callable[[int], None], seed: int) -> Callable[[], None]:
        def run() -> None:
            try:
                work(seed)
            except BaseException as exc:  # reported by the test below
                failures.append(exc)

        return run

    follower = threading.Thread(target=guarded(lambda _: reader(), 0))
    follower.start()
    writers = [threading.Thread(target=guarded(api_writer, seed)) for seed in range(4)]
    writers += [threading.Thread(target=guarded(sql_writer, seed)) for seed in range(10, 13)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    writing.clear()
    follower.join()
    assert not failures, failures
    assert {job_id: (row["title"], row["location"]) for job_id, row in mirror.items()} == truth()


@pytest.mark.parametrize(
    "cursor",
    ["", "not a cursor", "AAAA", "x" * 201],
)
def test_malformed_cursors_are_invalid_params(call: Call, employer: User, cursor: str) -> None:
    error = refused(call("jobs.changes", employer, cursor=cursor), 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == ["cursor"]


def test_a_tampered_or_borrowed_cursor_is_refused(
    call: Call, employer: User, candidate: User, new_job: Callable[..., dict[str, Any]]
) -> None:
    new_job(employer)
    _, cursor = until_seen(call, "jobs.changes", employer, None, lambda rows: bool(rows))
    flipped = cursor[:3] + ("A" if cursor[3] != "A" else "B") + cursor[4:]
    for response in (
        call("jobs.changes", employer, cursor=flipped),
        call("applications.changes", candidate, cursor=cursor),
    ):
        error = refused(response, 422, "invalid_params")
        assert error["details"]["errors"][0]["field"] == "cursor"
    assert set(ok(call("jobs.changes", employer, cursor=cursor))) == FEED_KEYS  # the genuine one still works


@pytest.mark.parametrize("per_page", [0, 1001, "10"])
def test_per_page_is_bounded(call: Call, employer: User, per_page: Any) -> None:
    refused(call("jobs.changes", employer, per_page=per_page), 422, "invalid_params")


def test_paging_delivers_each_job_once(call: Call, admin: Admin, new_job: Callable[..., dict[str, Any]]) -> None:
    owner = admin.user("employer")
    made = {new_job(owner, publish=False)["id"] for _ in range(7)}
    until_seen(call, "jobs.changes", owner, None, lambda rows: made <= ids(rows))
    pages = []
    cursor = None
    while True:
        body = ok(call("jobs.changes", owner, per_page=2, **({"cursor": cursor} if cursor else {})))
        pages.append(body["data"])
        cursor = body["next_cursor"]
        if not body["has_more"]:
            break
    flat = [row["id"] for page in pages for row in page]
    assert len(flat) == len(set(flat)) and made <= set(flat)
    assert all(len(page) <= 2 for page in pages)


def test_who_sees_which_jobs(
    call: Call, employer: User, stranger: User, operator: User, new_job: Callable[..., dict[str, Any]]
) -> None:
    draft, public = new_job(employer, publish=False), new_job(employer)
    closed = ok(call("jobs.close", employer, id=new_job(employer)["id"]))
    everything = {draft["id"], public["id"], closed["id"]}
    mine, _ = until_seen(call, "jobs.changes", employer, None, lambda rows: everything <= ids(rows))
    assert everything <= ids(mine)
    theirs, _ = until_seen(call, "jobs.changes", stranger, None, lambda rows: closed["id"] in ids(rows))
    assert {public["id"], closed["id"]} <= ids(theirs) and draft["id"] not in ids(theirs)
    assert [row["status"] for row in theirs if row["id"] == closed["id"]] == ["closed"]
    ruling, _ = until_seen(call, "jobs.changes", operator, None, lambda rows: everything <= ids(rows))
    assert everything <= ids(ruling)


def test_who_sees_which_applications(
    call: Call, admin: Admin, employer: User, stranger: User, new_job: Callable[..., dict[str, Any]]
) -> None:
    applicant, other = admin.user("candidate"), admin.user("candidate")
    job = new_job(employer)
    mine = ok(call("applications.create", applicant, job_id=job["id"]))
    theirs = ok(call("applications.create", other, job_id=job["id"]))
    ok(call("applications.review", employer, id=mine["id"], rating=4, notes="strong"))
    both = {mine["id"], theirs["id"]}

    as_employer, _ = until_seen(call, "applications.changes", employer, None, lambda rows: both <= ids(rows))
    reviewed = next(row for row in as_employer if row["id"] == mine["id"])
    assert reviewed == ok(call("applications.get", employer, id=mine["id"]))
    assert (reviewed["status"], reviewed["rating"], reviewed["notes"]) == ("reviewed", 4, "strong")

    as_applicant, _ = until_seen(call, "applications.changes", applicant, None, lambda rows: mine["id"] in ids(rows))
    assert ids(as_applicant) == {mine["id"]}
    assert (as_applicant[0]["rating"], as_applicant[0]["notes"]) == (None, None)

    as_stranger, _ = follow(call, "applications.changes", stranger, None)
    assert not both & ids(as_stranger)


def test_scopes_are_checked(call: Call, admin: Admin, employer: User) -> None:
    key = admin.api_key(employer, scopes="read:jobs")["key"]
    ok(call("jobs.changes", key))
    error = refused(call("applications.changes", key), 403, "insufficient_scope")
    assert error["details"]["required"] == "read:applications"
