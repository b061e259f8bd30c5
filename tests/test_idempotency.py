"""Idempotent writes (docs/security.md): `Idempotency-Key` on every write procedure, through the live server."""

from __future__ import annotations

import asyncio
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import psycopg
import pytest

from rpc.core import idempotency
from rpc.ops import admin as ops
from tests.support import Admin, User, bearer, emitter_for, error_code, eventually, ok

JOB = {"title": "Welder", "company": "Acme", "location": "Izmir"}


def post(client: httpx.Client, name: str, who: User | str, key: str | None, **params: Any) -> httpx.Response:
    headers = bearer(who.token if isinstance(who, User) else who)
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(f"/v1/{name}", json=params, headers=headers)


def jobs_of(admin: Admin, user: User) -> int:
    return int(admin.sql("SELECT count(*) AS n FROM jobs WHERE account_id = %(a)s", {"a": user.account_id})[0]["n"])


def events_of(admin: Admin, user: User) -> int:
    query = "SELECT count(*) AS n FROM events WHERE %(a)s = ANY(account_ids)"
    return int(admin.sql(query, {"a": user.account_id})[0]["n"])


def test_a_replay_answers_what_the_first_call_answered_and_does_nothing_else(
    client: httpx.Client, admin: Admin
) -> None:
    employer = admin.user("employer")
    key = f"create-{uuid.uuid4()}"
    first = post(client, "jobs.create", employer, key, **JOB)
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    job = ok(first)
    published = post(client, "jobs.publish", employer, f"publish-{key}", id=job["id"])
    events = events_of(admin, employer)
    for _ in range(2):
        again = post(client, "jobs.create", employer, key, **JOB)
        assert (again.status_code, again.content) == (200, first.content)
        assert again.headers["Idempotent-Replayed"] == "true"
        republished = post(client, "jobs.publish", employer, f"publish-{key}", id=job["id"])
        assert republished.content == published.content and republished.headers["Idempotent-Replayed"] == "true"
    assert admin.sql("SELECT count(*) AS n FROM jobs WHERE id = %(id)s", {"id": job["id"]})[0]["n"] == 1
    assert events_of(admin, employer) == events, "a replay emits nothing"


def test_parameters_compare_as_parsed_json(client: httpx.Client, employer: User) -> None:
    key = f"order-{uuid.uuid4()}"
    first = client.post(
        "/v1/jobs.create",
        content=b'{"title": "T", "company": "C", "location": "L"}',
        headers={**employer.auth, "Idempotency-Key": key, "Content-Type": "application/json"},
    )
    again = client.post(
        "/v1/jobs.create",
        content=b'{"location":"L","title":"T","company":"C"}',
        headers={**employer.auth, "Idempotency-Key": key, "Content-Type": "application/json"},
    )
    assert again.content == first.content and again.headers["Idempotent-Replayed"] == "true"


def test_the_same_key_with_other_parameters_or_procedure_is_reused(client: httpx.Client, employer: User) -> None:
    key = f"k-{uuid.uuid4()}"
    job = ok(post(client, "jobs.create", employer, key, **JOB))
    other = post(client, "jobs.create", employer, key, **{**JOB, "title": "Plumber"})
    assert (other.status_code, error_code(other)) == (422, "idempotency_key_reused")
    elsewhere = post(client, "jobs.publish", employer, key, id=job["id"])
    assert (elsewhere.status_code, error_code(elsewhere)) == (422, "idempotency_key_reused")


def test_keys_belong_to_the_account(client: httpx.Client, admin: Admin, employer: User, colleague: User) -> None:
    """Another account may use the same key; any member or credential of the account gets the kept answer."""
    key = f"shared-{uuid.uuid4()}"
    first = post(client, "jobs.create", employer, key, **JOB)
    by_colleague = post(client, "jobs.create", colleague, key, **JOB)
    assert by_colleague.content == first.content and by_colleague.headers["Idempotent-Replayed"] == "true"
    api_key = admin.api_key(employer, scopes="write:jobs")["key"]
    assert post(client, "jobs.create", api_key, key, **JOB).content == first.content
    stranger = admin.user("employer")
    theirs = post(client, "jobs.create", stranger, key, **JOB)
    assert theirs.status_code == 200 and "Idempotent-Replayed" not in theirs.headers
    assert ok(theirs)["id"] != ok(first)["id"]


@pytest.mark.parametrize("refusal", ["not_found", "invalid_transition"])
def test_the_procedures_own_refusals_are_kept(client: httpx.Client, employer: User, refusal: str) -> None:
    job = ok(post(client, "jobs.create", employer, None, **JOB))
    target = str(uuid.uuid4()) if refusal == "not_found" else job["id"]
    name = "jobs.publish" if refusal == "not_found" else "jobs.close"  # a draft cannot be closed
    key = f"refused-{uuid.uuid4()}"
    first = post(client, name, employer, key, id=target)
    assert error_code(first) == refusal
    if refusal == "invalid_transition":
        ok(post(client, "jobs.publish", employer, None, id=job["id"]))  # closing would now succeed…
    again = post(client, name, employer, key, id=target)
    assert (again.status_code, again.content) == (first.status_code, first.content)  # …but the key kept the answer
    assert again.headers["Idempotent-Replayed"] == "true"


def test_answers_refused_before_the_procedure_ran_leave_the_key_free(client: httpx.Client, employer: User) -> None:
    key = f"free-{uuid.uuid4()}"
    bad = post(client, "jobs.create", employer, key, title="T")  # company and location missing
    assert error_code(bad) == "invalid_params"
    good = post(client, "jobs.create", employer, key, **JOB)
    assert good.status_code == 200 and "Idempotent-Replayed" not in good.headers
    candidate_turn = post(client, "jobs.create", "not-a-token", key, **JOB)
    assert candidate_turn.status_code == 401 and "Idempotent-Replayed" not in candidate_turn.headers


@pytest.mark.parametrize("key", ["", "x" * 256, "naïve", "tab\there"])
def test_a_malformed_key_is_invalid_params(client: httpx.Client, admin: Admin, employer: User, key: str) -> None:
    before = jobs_of(admin, employer)
    headers = [*employer.auth.items(), (b"Idempotency-Key", key.encode())]  # raw bytes, as sent
    response = client.post("/v1/jobs.create", json=JOB, headers=headers)
    assert response.status_code == 422
    assert response.json()["error"]["details"]["errors"] == [
        {"field": "Idempotency-Key", "message": "Use 1 to 255 printable ASCII characters."}
    ]
    assert jobs_of(admin, employer) == before


def test_a_replay_is_counted_by_the_rate_limiter(client: httpx.Client, employer: User) -> None:
    key = f"counted-{uuid.uuid4()}"
    first = post(client, "jobs.create", employer, key, **JOB)
    again = post(client, "jobs.create", employer, key, **JOB)
    assert int(again.headers["X-RateLimit-Remaining"]) == int(first.headers["X-RateLimit-Remaining"]) - 1


def test_while_the_first_call_runs_another_with_its_key_is_in_use(
    client: httpx.Client, admin: Admin, employer: User
) -> None:
    """Concurrent first calls: exactly one runs; the others are told at once, with Retry-After."""
    job = ok(post(client, "jobs.create", employer, None, **JOB))
    key = f"busy-{uuid.uuid4()}"
    holder = psycopg.connect(admin.database_url)
    holder.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (job["id"],))  # the first call will wait on it
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(post, client, "jobs.publish", employer, key, id=job["id"])
        waiting = "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted"
        # The first call has claimed its key and waits on the job's row.
        eventually(lambda: admin.sql(waiting)[0]["n"], "the first call's claim of its key")
        in_use = post(client, "jobs.publish", employer, key, id=job["id"])
        holder.rollback()
        holder.close()
        answered = first.result(timeout=30)
    assert answered.status_code == 200
    assert (in_use.status_code, error_code(in_use)) == (409, "idempotency_key_in_use")
    assert int(in_use.headers["Retry-After"]) >= 1
    after = post(client, "jobs.publish", employer, key, id=job["id"])
    assert after.content == answered.content and after.headers["Idempotent-Replayed"] == "true"


def test_concurrent_first_calls_run_once(client: httpx.Client, admin: Admin, employer: User) -> None:
    key = f"race-{uuid.uuid4()}"
    gate = threading.Barrier(8)

    def call() -> httpx.Response:
        gate.wait()
        return post(client, "jobs.create", employer, key, **{**JOB, "title": key})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: call(), range(8)))
    assert all(a.status_code in (200, 409) for a in answers), [a.status_code for a in answers]
    assert admin.sql("SELECT count(*) AS n FROM jobs WHERE title = %(t)s", {"t": key})[0]["n"] == 1
    firsts = [a for a in answers if a.status_code == 200 and "Idempotent-Replayed" not in a.headers]
    assert len(firsts) == 1


def test_keys_are_purged_after_24_hours(client: httpx.Client, admin: Admin, employer: User) -> None:
    key = f"old-{uuid.uuid4()}"
    ok(post(client, "jobs.create", employer, key, **JOB))
    admin.sql("UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = %(k)s", {"k": key})
    assert "Idempotent-Replayed" not in post(client, "jobs.create", employer, key, **JOB).headers, "expired: free"
    admin.sql("UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = %(k)s", {"k": key})

    async def purge() -> None:
        async with await ops.connect(admin.database_url) as conn, conn.transaction():
            await idempotency.PERIODIC.run(conn, emitter_for(admin.settings))

    asyncio.run(purge())
    assert admin.sql("SELECT 1 FROM idempotency_keys WHERE key = %(k)s", {"k": key}) == []


def test_keys_of_procedures_about_one_person_are_that_persons(client: httpx.Client, admin: Admin) -> None:
    """A colleague sending the same key and body to profile.update gets their own answer, not the first member's."""
    first = admin.user("employer")
    colleague = admin.user("employer", account_id=first.account_id)
    key = f"profile-{uuid.uuid4()}"
    mine = ok(post(client, "profile.update", first, key, headline="Hiring welders"))
    theirs = post(client, "profile.update", colleague, key, headline="Hiring welders")
    assert "Idempotent-Replayed" not in theirs.headers, "the colleague's update ran"
    assert ok(theirs)["id"] == colleague.user_id and mine["id"] == first.user_id
    assert first.email not in theirs.text
    rows = admin.sql(
        "SELECT user_id::text AS user_id FROM idempotency_keys WHERE key = %(k)s ORDER BY created_at", {"k": key}
    )
    assert sorted(row["user_id"] for row in rows) == sorted([first.user_id, colleague.user_id])


def test_erasing_a_member_removes_only_their_keys(client: httpx.Client, admin: Admin) -> None:
    """Another member's retry after the erasure still answers what it first did, and makes no second job."""
    leaving = admin.user("employer")
    staying = admin.user("employer", account_id=leaving.account_id)
    theirs, mine = f"leaving-{uuid.uuid4()}", f"staying-{uuid.uuid4()}"
    ok(post(client, "jobs.create", leaving, theirs, **JOB))
    first = post(client, "jobs.create", staying, mine, **JOB)
    jobs = jobs_of(admin, staying)
    ok(post(client, "profile.delete", leaving, None, confirm=leaving.email))
    again = post(client, "jobs.create", staying, mine, **JOB)
    assert again.headers.get("Idempotent-Replayed") == "true" and again.content == first.content
    assert jobs_of(admin, staying) == jobs
    assert admin.sql("SELECT 1 FROM idempotency_keys WHERE key = %(k)s", {"k": theirs}) == []
