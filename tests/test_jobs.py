"""Jobs through HTTP: shapes, visibility, ownership, filters, paging, partial updates and the state machine
of docs/decisions.md and docs/api.md."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from rpc.db.migrate import migrate
from tests.support import TIMESTAMP, Admin, Call, LiveServer, User, ok, published_count, refused

FULL_KEYS = {
    "id",
    "title",
    "company",
    "location",
    "status",
    "created_at",
    "description",
    "employment_type",
    "updated_at",
    "published_at",
    "closed_at",
    "scorecard_attributes",
}
SUMMARY_KEYS = {"id", "title", "company", "location", "status", "created_at"}


def unique(prefix: str = "job") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def create(call: Call) -> Callable[..., dict[str, Any]]:
    """`create(user, **fields)`: a new draft; title, company and location get unique defaults."""

    def make(who: User, **fields: Any) -> dict[str, Any]:
        fields.setdefault("title", unique("title"))
        fields.setdefault("company", "Acme")
        fields.setdefault("location", "Istanbul")
        job: dict[str, Any] = ok(call("jobs.create", who, **fields))
        return job

    return make


@pytest.fixture
def published(call: Call, create: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """`published(user, **fields)`: a new job, published."""

    def make(who: User, **fields: Any) -> dict[str, Any]:
        job = create(who, **fields)
        done: dict[str, Any] = ok(call("jobs.publish", who, id=job["id"]))
        return done

    return make


def newest_first(jobs: list[dict[str, Any]]) -> list[str]:
    """The ids of `jobs` in the list order: newest `created_at` first, then id descending."""
    ordered = sorted(jobs, key=lambda job: (job["created_at"], uuid.UUID(job["id"])), reverse=True)
    return [job["id"] for job in ordered]


def list_all(call: Call, who: User, **params: Any) -> tuple[list[dict[str, Any]], int]:
    """Every item of a list, page by page, and the total of its first page."""
    items: list[dict[str, Any]] = []
    first = ok(call("jobs.list", who, page=1, per_page=100, **params))
    items.extend(first["data"])
    page = 1
    while len(items) < first["total"]:
        page += 1
        chunk = ok(call("jobs.list", who, page=page, per_page=100, **params))["data"]
        assert chunk, "the pages ran out before the total"
        items.extend(chunk)
    return items, first["total"]


# --- jobs.create ------------------------------------------------------------------------------------------


def test_employer_creates_a_draft_with_the_full_shape(call: Call, employer: User) -> None:
    job = ok(
        call(
            "jobs.create",
            employer,
            title="Backend engineer",
            company="Acme",
            location="Ankara",
            description="Python and PostgreSQL.",
            employment_type="full_time",
        )
    )
    assert set(job) == FULL_KEYS
    assert job["status"] == "draft"
    assert (job["title"], job["company"], job["location"]) == ("Backend engineer", "Acme", "Ankara")
    assert (job["description"], job["employment_type"]) == ("Python and PostgreSQL.", "full_time")
    assert job["published_at"] is None and job["closed_at"] is None
    assert isinstance(job["id"], str) and job["id"]


def test_optional_fields_default_to_null(call: Call, employer: User) -> None:
    job = ok(call("jobs.create", employer, title="Minimal", company="Acme", location="Izmir"))
    assert job["description"] is None and job["employment_type"] is None


def test_timestamps_are_utc_with_z_and_no_fraction(call: Call, employer: User) -> None:
    job = ok(call("jobs.create", employer, title="Clock", company="Acme", location="Izmir"))
    assert TIMESTAMP.match(job["created_at"]) and TIMESTAMP.match(job["updated_at"])
    published = ok(call("jobs.publish", employer, id=job["id"]))
    closed = ok(call("jobs.close", employer, id=job["id"]))
    assert TIMESTAMP.match(published["published_at"])
    assert TIMESTAMP.match(closed["closed_at"]) and TIMESTAMP.match(closed["updated_at"])


def test_admin_may_create(call: Call, operator: User) -> None:
    assert ok(call("jobs.create", operator, title="Ops", company="Hire", location="Remote"))["status"] == "draft"


def test_candidate_may_not_create(call: Call, candidate: User, admin: Admin) -> None:
    title = unique("candidate")
    refused(call("jobs.create", candidate, title=title, company="Acme", location="Izmir"), 403, "forbidden")
    assert admin.sql("SELECT id FROM jobs WHERE title = %(t)s", {"t": title}) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"company": "Acme", "location": "Izmir"},
        {"title": "", "company": "Acme", "location": "Izmir"},
        {"title": "   \t\n", "company": "Acme", "location": "Izmir"},
        {"title": None, "company": "Acme", "location": "Izmir"},
        {"title": "x" * 201, "company": "Acme", "location": "Izmir"},
    ],
    ids=["missing", "empty", "whitespace", "null", "too-long"],
)
def test_bad_title_is_invalid_params(call: Call, employer: User, fields: dict[str, Any]) -> None:
    error = refused(call("jobs.create", employer, **fields), 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == ["title"]


def test_unknown_employment_type_is_invalid_params(call: Call, employer: User) -> None:
    response = call("jobs.create", employer, title="T", company="C", location="L", employment_type="gig")
    error = refused(response, 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == ["employment_type"]


def test_an_enum_error_lists_the_allowed_values(call: Call, employer: User) -> None:
    error = refused(
        call("jobs.create", employer, title="T", company="C", location="L", employment_type="gig"),
        422,
        "invalid_params",
    )
    [wrong] = error["details"]["errors"]
    assert wrong["field"] == "employment_type"
    assert "choose one of: full_time, part_time, contract, internship, temporary" in wrong["message"]


def test_unknown_field_is_invalid_params(call: Call, employer: User) -> None:
    error = refused(
        call("jobs.create", employer, title="T", company="C", location="L", salary=1), 422, "invalid_params"
    )
    [unknown] = [e for e in error["details"]["errors"] if e["field"] == "salary"]
    assert unknown["message"].startswith("Unknown parameter; the parameters are: title, company, location")


# --- jobs.get ---------------------------------------------------------------------------------------------


def test_owner_reads_a_draft(call: Call, employer: User, create: Callable[..., dict[str, Any]]) -> None:
    job = create(employer, description="desc")
    assert ok(call("jobs.get", employer, id=job["id"])) == job


def test_draft_of_another_account_is_not_found(
    call: Call, employer: User, stranger: User, candidate: User, create: Callable[..., dict[str, Any]]
) -> None:
    job = create(employer)
    refused(call("jobs.get", stranger, id=job["id"]), 404, "not_found")
    refused(call("jobs.get", candidate, id=job["id"]), 404, "not_found")


@pytest.mark.parametrize("final", ["published", "closed"])
def test_published_and_closed_jobs_are_visible_to_all(
    call: Call,
    employer: User,
    stranger: User,
    candidate: User,
    published: Callable[..., dict[str, Any]],
    final: str,
) -> None:
    job = published(employer)
    if final == "closed":
        job = ok(call("jobs.close", employer, id=job["id"]))
    for who in (stranger, candidate):
        seen = ok(call("jobs.get", who, id=job["id"]))
        assert set(seen) == FULL_KEYS and seen == job


@pytest.mark.parametrize(
    "bad_id", ["abc", 42, 4.5, True, None, "", "00000000-0000-0000-0000-00000000000g", str(uuid.uuid4())]
)
def test_malformed_or_unknown_id_is_not_found(call: Call, employer: User, bad_id: object) -> None:
    refused(call("jobs.get", employer, id=bad_id), 404, "not_found")


def test_malformed_id_by_get_is_not_found(client: httpx.Client, employer: User) -> None:
    response = client.get("/v1/jobs.get", params={"id": "abc"}, headers=employer.auth)
    refused(response, 404, "not_found")


@pytest.mark.parametrize("name", ["jobs.update", "jobs.publish", "jobs.close"])
def test_malformed_id_on_writes_is_not_found(call: Call, employer: User, name: str) -> None:
    refused(call(name, employer, id="abc"), 404, "not_found")
    refused(call(name, employer, id=42), 404, "not_found")


# --- jobs.list --------------------------------------------------------------------------------------------


def test_list_shows_only_published_jobs_of_every_account(
    call: Call,
    employer: User,
    stranger: User,
    candidate: User,
    create: Callable[..., dict[str, Any]],
    published: Callable[..., dict[str, Any]],
) -> None:
    company = unique("co")
    mine = published(employer, company=company)
    theirs = published(stranger, company=company)
    draft = create(employer, company=company)
    closed = published(stranger, company=company)
    ok(call("jobs.close", stranger, id=closed["id"]))
    result = ok(call("jobs.list", candidate, company=company))
    assert {job["id"] for job in result["data"]} == {mine["id"], theirs["id"]}
    assert result["total"] == 2
    assert all(set(job) == SUMMARY_KEYS for job in result["data"])
    assert draft["id"] not in {job["id"] for job in result["data"]}


def test_list_form_is_exact(call: Call, employer: User, published: Callable[..., dict[str, Any]]) -> None:
    company = unique("co")
    job = published(employer, company=company, description="long text", employment_type="contract")
    [item] = ok(call("jobs.list", employer, company=company))["data"]
    assert item == {key: job[key] for key in SUMMARY_KEYS}


def test_mine_lists_every_status_of_the_callers_account(
    call: Call,
    admin: Admin,
    stranger: User,
    create: Callable[..., dict[str, Any]],
    published: Callable[..., dict[str, Any]],
) -> None:
    owner = admin.user("employer")
    colleague = admin.user("employer", account_id=owner.account_id)
    draft = create(owner)
    live = published(colleague)
    closed = published(owner)
    ok(call("jobs.close", owner, id=closed["id"]))
    published(stranger)  # another account's: never in `mine`
    expected = newest_first([draft, live, closed])
    for who in (owner, colleague):
        result = ok(call("jobs.list", who, mine=True))
        assert result["total"] == 3
        assert [job["id"] for job in result["data"]] == expected
        assert {job["status"] for job in result["data"]} == {"draft", "published", "closed"}
        assert all(set(job) == SUMMARY_KEYS for job in result["data"])


def test_mine_of_an_account_without_jobs_is_empty(call: Call, admin: Admin) -> None:
    loner = admin.user("employer")
    assert ok(call("jobs.list", loner, mine=True)) == {"data": [], "total": 0, "page": 1, "per_page": 20}


def test_get_with_query_strings(
    client: httpx.Client, admin: Admin, create: Callable[..., dict[str, Any]], published: Callable[..., dict[str, Any]]
) -> None:
    owner = admin.user("employer")
    ids = {create(owner)["id"], create(owner)["id"], published(owner)["id"]}
    response = client.get("/v1/jobs.list", params={"mine": "true", "per_page": "2"}, headers=owner.auth)
    result = ok(response)
    assert (result["total"], result["page"], result["per_page"], len(result["data"])) == (3, 1, 2, 2)
    second = ok(client.get("/v1/jobs.list", params={"mine": "true", "per_page": "2", "page": "2"}, headers=owner.auth))
    assert {job["id"] for job in result["data"] + second["data"]} == ids
    not_mine = ok(client.get("/v1/jobs.list", params={"mine": "false", "per_page": "100"}, headers=owner.auth))
    assert {job["status"] for job in not_mine["data"]} <= {"published"}
    one = result["data"][0]
    assert ok(client.get("/v1/jobs.get", params={"id": one["id"]}, headers=owner.auth))["id"] == one["id"]


def test_q_matches_title_or_company_case_insensitively(
    call: Call, employer: User, published: Callable[..., dict[str, Any]]
) -> None:
    token = uuid.uuid4().hex[:10]
    by_title = published(employer, title=f"Senior {token.upper()} developer", company="Acme")
    by_company = published(employer, title="Engineer", company=f"{token} Ltd")
    published(employer, title="Unrelated", company="Other")
    for q in (token, token.upper(), token[2:8]):
        result = ok(call("jobs.list", employer, q=q))
        assert {job["id"] for job in result["data"]} == {by_title["id"], by_company["id"]}
        assert result["total"] == 2


def test_location_and_company_filters_are_case_insensitive_substrings(
    call: Call, employer: User, published: Callable[..., dict[str, Any]]
) -> None:
    token = uuid.uuid4().hex[:10]
    here = published(employer, location=f"North {token} City", company=f"{token} Holdings")
    published(employer, location=f"South {token} Town", company="Elsewhere")
    result = ok(call("jobs.list", employer, location=f"NORTH {token.upper()}"))
    assert [job["id"] for job in result["data"]] == [here["id"]] and result["total"] == 1
    result = ok(call("jobs.list", employer, company=f"{token.upper()} hold"))
    assert [job["id"] for job in result["data"]] == [here["id"]] and result["total"] == 1
    both = ok(call("jobs.list", employer, location=token, company=token))
    assert [job["id"] for job in both["data"]] == [here["id"]]


def test_employment_type_filter(call: Call, employer: User, published: Callable[..., dict[str, Any]]) -> None:
    company = unique("co")
    intern = published(employer, company=company, employment_type="internship")
    published(employer, company=company, employment_type="full_time")
    published(employer, company=company)
    result = ok(call("jobs.list", employer, company=company, employment_type="internship"))
    assert [job["id"] for job in result["data"]] == [intern["id"]] and result["total"] == 1
    refused(call("jobs.list", employer, employment_type="gig"), 422, "invalid_params")


def test_wildcards_in_q_are_literal(call: Call, employer: User, published: Callable[..., dict[str, Any]]) -> None:
    company = unique("wild")
    percent = published(employer, company=company, title="100% remote")
    underscore = published(employer, company=company, title="a_b")
    backslash = published(employer, company=company, title="C:\\dir")
    published(employer, company=company, title="100 remote")
    published(employer, company=company, title="axb")
    for q, expected in (("%", percent), ("100%", percent), ("_", underscore), ("a_b", underscore), ("\\", backslash)):
        result = ok(call("jobs.list", employer, q=q, company=company))
        assert [job["id"] for job in result["data"]] == [expected["id"]], q
        assert result["total"] == 1, q


def test_order_is_newest_first_then_id_descending(call: Call, admin: Admin) -> None:
    owner = admin.user("employer")
    created = [ok(call("jobs.create", owner, title=f"n{i}", company="Ord", location="X")) for i in range(6)]
    # Give three of them the same second, so that the id decides among those.
    same = [job["id"] for job in created[:3]]
    admin.sql(
        "UPDATE jobs SET created_at = '2030-01-01T00:00:00Z' WHERE id = ANY(%(ids)s::uuid[])",
        {"ids": same},
    )
    admin.sql(
        "UPDATE jobs SET created_at = '2020-01-01T00:00:00Z' WHERE id = %(id)s::uuid",
        {"id": created[3]["id"]},
    )
    rows = admin.sql("SELECT id::text AS id, created_at FROM jobs WHERE account_id = %(a)s", {"a": owner.account_id})
    expected = [row["id"] for row in sorted(rows, key=lambda r: (r["created_at"], uuid.UUID(r["id"])), reverse=True)]
    listed = ok(call("jobs.list", owner, mine=True))["data"]
    assert [job["id"] for job in listed] == expected
    assert expected[:3] == sorted(same, reverse=True)
    assert expected[-1] == created[3]["id"]
    stamps = [job["created_at"] for job in listed]
    assert stamps == sorted(stamps, reverse=True)


def test_paging_is_exact(call: Call, admin: Admin, published: Callable[..., dict[str, Any]]) -> None:
    owner = admin.user("employer")
    company = unique("page")
    ids = {published(owner, company=company)["id"] for _ in range(7)}
    seen: list[str] = []
    for page in (1, 2, 3):
        result = ok(call("jobs.list", owner, company=company, page=page, per_page=3))
        assert (result["total"], result["page"], result["per_page"]) == (7, page, 3)
        assert len(result["data"]) == (3 if page < 3 else 1)
        seen += [job["id"] for job in result["data"]]
    assert len(seen) == 7 and set(seen) == ids
    beyond = ok(call("jobs.list", owner, company=company, page=4, per_page=3))
    assert beyond == {"data": [], "total": 7, "page": 4, "per_page": 3}
    mine = ok(call("jobs.list", owner, mine=True, per_page=5))
    assert mine["total"] == 7 and len(mine["data"]) == 5


def test_defaults_and_paging_limits(call: Call, employer: User) -> None:
    result = ok(call("jobs.list", employer))
    assert (result["page"], result["per_page"]) == (1, 20)
    for params in ({"per_page": 0}, {"per_page": 101}, {"page": 0}, {"page": 101, "per_page": 100}):
        refused(call("jobs.list", employer, **params), 422, "invalid_params")
    assert ok(call("jobs.list", employer, page=100, per_page=100))["page"] == 100


def test_unfiltered_total_is_exact_across_many_publishes_and_closes(
    call: Call, admin: Admin, live: LiveServer, candidate: User
) -> None:
    owners = [admin.user("employer") for _ in range(3)]
    drafts = [
        ok(call("jobs.create", owners[i % 3], title=f"bulk {i}", company="Bulk", location="X")) for i in range(24)
    ]

    def total() -> int:
        return int(ok(call("jobs.list", candidate))["total"])

    start = total()
    assert start == published_count(admin)

    def act(name: str, job: dict[str, Any], who: User) -> int:
        with live.client() as http:  # one connection per thread
            return http.post(f"/v1/{name}", json={"id": job["id"]}, headers=who.auth).status_code

    pairs = [(job, owners[i % 3]) for i, job in enumerate(drafts)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        # Concurrent publishes, each job published twice at once: exactly one wins.
        codes = list(pool.map(lambda p: act("jobs.publish", *p), pairs + pairs))
    assert sorted(codes) == [200] * 24 + [409] * 24
    assert total() == start + 24 == published_count(admin)
    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(lambda p: act("jobs.close", *p), pairs[:10] + pairs[:10]))
    assert sorted(codes) == [200] * 10 + [409] * 10
    assert total() == start + 14 == published_count(admin)
    items, listed_total = list_all(call, candidate)
    assert listed_total == len(items) == published_count(admin)
    assert all(job["status"] == "published" for job in items)
    assert listed_total == int(admin.sql("SELECT total FROM job_totals WHERE status = 'published'")[0]["total"])


def test_counter_arriving_on_an_existing_database_starts_exact(
    call: Call, admin: Admin, database: str, employer: User, candidate: User, published: Callable[..., Any]
) -> None:
    """`schema.sql` re-applied to a database from before `job_totals` must count the jobs already published."""
    published(employer)
    admin.sql("DROP TABLE job_totals")  # as in a database made before the counter existed,
    admin.sql("DELETE FROM schema_digests")  # which no schema of today was recorded as applied to
    asyncio.run(migrate(database))
    assert published_count(admin) > 0
    assert ok(call("jobs.list", candidate))["total"] == published_count(admin)
    job = published(employer)
    ok(call("jobs.close", employer, id=job["id"]))
    assert ok(call("jobs.list", candidate))["total"] == published_count(admin)


def test_filtered_total_equals_the_matching_items(
    call: Call, employer: User, stranger: User, published: Callable[..., dict[str, Any]]
) -> None:
    token = uuid.uuid4().hex[:10]
    for i in range(5):
        published(employer if i % 2 else stranger, title=f"{token} role {i}", employment_type="part_time")
    items, total = list_all(call, employer, q=token)
    assert total == len(items) == 5
    items, total = list_all(call, employer, q=token, employment_type="part_time")
    assert total == len(items) == 5
    items, total = list_all(call, employer, q=token, employment_type="contract")
    assert total == len(items) == 0
    beyond = ok(call("jobs.list", employer, q=token, page=2, per_page=5))
    assert (beyond["data"], beyond["total"]) == ([], 5)


# --- jobs.update ------------------------------------------------------------------------------------------


def test_update_changes_only_the_fields_sent(
    call: Call, employer: User, create: Callable[..., dict[str, Any]], admin: Admin
) -> None:
    job = create(employer, description="old", employment_type="contract")
    admin.sql("UPDATE jobs SET updated_at = updated_at - interval '1 hour' WHERE id = %(id)s::uuid", {"id": job["id"]})
    before = ok(call("jobs.get", employer, id=job["id"]))
    updated = ok(call("jobs.update", employer, id=job["id"], title="New title"))
    assert set(updated) == FULL_KEYS
    assert updated["title"] == "New title"
    unchanged = {k: v for k, v in updated.items() if k not in {"title", "updated_at"}}
    assert unchanged == {k: v for k, v in before.items() if k not in {"title", "updated_at"}}
    assert updated["updated_at"] > before["updated_at"]
    assert ok(call("jobs.get", employer, id=job["id"])) == updated


def test_update_every_field_and_null_clears(call: Call, employer: User, create: Callable[..., dict[str, Any]]) -> None:
    job = create(employer, description="old", employment_type="contract")
    changed = ok(
        call(
            "jobs.update",
            employer,
            id=job["id"],
            company="NewCo",
            location="Bursa",
            description="new",
            employment_type="temporary",
        )
    )
    assert (changed["company"], changed["location"], changed["description"], changed["employment_type"]) == (
        "NewCo",
        "Bursa",
        "new",
        "temporary",
    )
    cleared = ok(call("jobs.update", employer, id=job["id"], description=None, employment_type=None))
    assert cleared["description"] is None and cleared["employment_type"] is None
    assert cleared["title"] == job["title"] and cleared["company"] == "NewCo"


def test_empty_update_returns_the_job_unchanged(
    call: Call, employer: User, create: Callable[..., dict[str, Any]]
) -> None:
    job = create(employer, description="keep")
    assert ok(call("jobs.update", employer, id=job["id"])) == job
    assert ok(call("jobs.get", employer, id=job["id"])) == job


@pytest.mark.parametrize(
    "fields",
    [{"title": ""}, {"title": "  "}, {"title": None}, {"company": None}, {"employment_type": "gig"}, {"x": 1}],
)
def test_bad_update_is_invalid_params(
    call: Call, employer: User, create: Callable[..., dict[str, Any]], fields: dict[str, Any]
) -> None:
    job = create(employer)
    refused(call("jobs.update", employer, id=job["id"], **fields), 422, "invalid_params")
    assert ok(call("jobs.get", employer, id=job["id"])) == job


def test_update_of_a_published_and_a_closed_job(
    call: Call, employer: User, published: Callable[..., dict[str, Any]]
) -> None:
    job = published(employer)
    assert ok(call("jobs.update", employer, id=job["id"], location="Remote"))["status"] == "published"
    ok(call("jobs.close", employer, id=job["id"]))
    assert ok(call("jobs.update", employer, id=job["id"], location="Nowhere"))["location"] == "Nowhere"


def test_update_of_another_accounts_published_job_is_forbidden(
    call: Call, employer: User, stranger: User, published: Callable[..., dict[str, Any]]
) -> None:
    job = published(employer)
    refused(call("jobs.update", stranger, id=job["id"], title="Hijacked"), 403, "forbidden")
    assert ok(call("jobs.get", employer, id=job["id"]))["title"] == job["title"]


def test_candidate_may_not_update(call: Call, employer: User, candidate: User, published: Callable[..., Any]) -> None:
    job = published(employer)
    refused(call("jobs.update", candidate, id=job["id"], title="Mine now"), 403, "forbidden")


# --- the state machine ------------------------------------------------------------------------------------


def test_publish_then_close(call: Call, employer: User, create: Callable[..., dict[str, Any]]) -> None:
    job = create(employer)
    live = ok(call("jobs.publish", employer, id=job["id"]))
    assert live["status"] == "published" and TIMESTAMP.match(live["published_at"]) and live["closed_at"] is None
    assert live["published_at"] >= job["created_at"]
    assert {k: live[k] for k in ("id", "title", "company", "location", "created_at")} == {
        k: job[k] for k in ("id", "title", "company", "location", "created_at")
    }
    closed = ok(call("jobs.close", employer, id=job["id"]))
    assert closed["status"] == "closed" and closed["published_at"] == live["published_at"]
    assert TIMESTAMP.match(closed["closed_at"]) and closed["closed_at"] >= live["published_at"]
    assert ok(call("jobs.get", employer, id=job["id"])) == closed


def test_publish_twice_is_invalid_transition(call: Call, employer: User, published: Callable[..., Any]) -> None:
    job = published(employer)
    error = refused(call("jobs.publish", employer, id=job["id"]), 409, "invalid_transition")
    assert error["details"] == {"from": "published", "to": "published"}
    assert ok(call("jobs.get", employer, id=job["id"])) == job


def test_close_a_draft_is_invalid_transition(call: Call, employer: User, create: Callable[..., Any]) -> None:
    job = create(employer)
    error = refused(call("jobs.close", employer, id=job["id"]), 409, "invalid_transition")
    assert error["details"] == {"from": "draft", "to": "closed"}
    assert ok(call("jobs.get", employer, id=job["id"]))["status"] == "draft"


def test_closed_is_final(call: Call, employer: User, published: Callable[..., Any]) -> None:
    job = published(employer)
    closed = ok(call("jobs.close", employer, id=job["id"]))
    error = refused(call("jobs.publish", employer, id=job["id"]), 409, "invalid_transition")
    assert error["details"] == {"from": "closed", "to": "published"}
    error = refused(call("jobs.close", employer, id=job["id"]), 409, "invalid_transition")
    assert error["details"] == {"from": "closed", "to": "closed"}
    assert ok(call("jobs.get", employer, id=job["id"])) == closed


# --- ownership --------------------------------------------------------------------------------------------


def test_another_account_cannot_touch_a_draft(
    call: Call, employer: User, stranger: User, create: Callable[..., dict[str, Any]]
) -> None:
    job = create(employer)
    refused(call("jobs.get", stranger, id=job["id"]), 404, "not_found")
    refused(call("jobs.update", stranger, id=job["id"], title="Hijacked"), 404, "not_found")
    refused(call("jobs.update", stranger, id=job["id"]), 404, "not_found")
    refused(call("jobs.publish", stranger, id=job["id"]), 404, "not_found")
    refused(call("jobs.close", stranger, id=job["id"]), 404, "not_found")
    assert ok(call("jobs.get", employer, id=job["id"])) == job


def test_another_account_cannot_act_on_a_published_job(
    call: Call, employer: User, stranger: User, published: Callable[..., dict[str, Any]]
) -> None:
    job = published(employer)
    refused(call("jobs.close", stranger, id=job["id"]), 403, "forbidden")
    refused(call("jobs.publish", stranger, id=job["id"]), 403, "forbidden")
    assert ok(call("jobs.get", employer, id=job["id"])) == job


def test_candidate_cannot_publish_or_close(
    call: Call, employer: User, candidate: User, create: Callable[..., dict[str, Any]]
) -> None:
    job = create(employer)
    refused(call("jobs.publish", candidate, id=job["id"]), 403, "forbidden")
    ok(call("jobs.publish", employer, id=job["id"]))
    refused(call("jobs.close", candidate, id=job["id"]), 403, "forbidden")


def test_admin_reads_and_acts_on_any_accounts_jobs(
    call: Call, employer: User, operator: User, create: Callable[..., dict[str, Any]]
) -> None:
    job = create(employer)
    assert ok(call("jobs.get", operator, id=job["id"])) == job
    assert ok(call("jobs.update", operator, id=job["id"], title="Fixed by ops"))["title"] == "Fixed by ops"
    assert ok(call("jobs.publish", operator, id=job["id"]))["status"] == "published"
    assert ok(call("jobs.close", operator, id=job["id"]))["status"] == "closed"
    # The job stays the owner's: it is in the owner's `mine`, not the admin's.
    assert job["id"] not in {j["id"] for j in list_all(call, operator, mine=True)[0]}
    assert job["id"] in {j["id"] for j in list_all(call, employer, mine=True)[0]}


def test_a_colleague_of_the_same_account_acts_on_its_jobs(
    call: Call, employer: User, colleague: User, create: Callable[..., dict[str, Any]]
) -> None:
    job = create(employer)
    assert ok(call("jobs.get", colleague, id=job["id"])) == job
    assert ok(call("jobs.update", colleague, id=job["id"], title="Colleague"))["title"] == "Colleague"
    assert ok(call("jobs.publish", colleague, id=job["id"]))["status"] == "published"
    assert ok(call("jobs.close", colleague, id=job["id"]))["status"] == "closed"
    mine = {j["id"]: j["status"] for j in list_all(call, colleague, mine=True)[0]}
    assert mine[job["id"]] == "closed"


def test_the_account_owns_the_job_not_its_creator(
    call: Call, admin: Admin, employer: User, create: Callable[..., dict[str, Any]]
) -> None:
    newcomer = admin.user("employer", account_id=employer.account_id)
    job = create(newcomer)
    assert ok(call("jobs.publish", employer, id=job["id"]))["status"] == "published"
