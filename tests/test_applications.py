"""Applications through HTTP: the shape, who may apply and see what, the hiring pipeline's state machine,
reviews, withdrawal, the status history, the events and their routing, and concurrent moves
(docs/decisions.md, docs/webhooks.md)."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.support import TIMESTAMP, Admin, Call, LiveServer, User, ok, refused

APPLICATION_KEYS = {
    "id",
    "job_id",
    "candidate_id",
    "status",
    "cover_letter",
    "resume_url",
    "rating",
    "notes",
    "resume",
    "attachments",
    "created_at",
    "updated_at",
}
# What the job's account reads: the same, and who applied.
EMPLOYER_VIEW_KEYS = APPLICATION_KEYS | {"candidate"}
CANDIDATE_KEYS = {"id", "display_name", "email", "headline", "location"}
ENVELOPE_KEYS = {"event", "data", "timestamp", "idempotency_key"}
PIPELINE = ("pending", "reviewed", "interview_scheduled", "offered", "hired")
FINAL = ("hired", "rejected", "withdrawn")
APPLICATION_EVENTS = ["application.created", "application.status_changed", "application.reviewed"]

Factory = Callable[..., dict[str, Any]]


# --- fixtures and helpers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rival(admin: Admin) -> User:
    """Another candidate."""
    return admin.user("candidate")


@pytest.fixture
def job(call: Call) -> Factory:
    """`job(owner, status="published")`: a new job of the owner's account in `draft`, `published` or `closed`."""

    def make(owner: User, status: str = "published") -> dict[str, Any]:
        title = f"job-{uuid.uuid4().hex[:10]}"
        made: dict[str, Any] = ok(call("jobs.create", owner, title=title, company="Acme", location="Izmir"))
        if status in ("published", "closed"):
            made = ok(call("jobs.publish", owner, id=made["id"]))
        if status == "closed":
            made = ok(call("jobs.close", owner, id=made["id"]))
        return made

    return make


@pytest.fixture
def apply(call: Call) -> Factory:
    """`apply(candidate, job_id, **fields)`: a new application, as the candidate sees it."""

    def make(who: User, job_id: str, **fields: Any) -> dict[str, Any]:
        made: dict[str, Any] = ok(call("applications.create", who, job_id=job_id, **fields))
        return made

    return make


@pytest.fixture
def application(call: Call, employer: User, candidate: User, job: Factory, apply: Factory) -> Factory:
    """`application(status="pending", who=candidate)`: a new application to a new job of `employer`, brought to
    `status` through the API (by the employer, or withdrawn by its candidate)."""

    def make(status: str = "pending", who: User | None = None) -> dict[str, Any]:
        applicant = who or candidate
        made = apply(applicant, job(employer)["id"])
        if status == "withdrawn":
            made = ok(call("applications.withdraw", applicant, id=made["id"]))
        elif status != "pending":
            made = ok(call("applications.update_status", employer, id=made["id"], status=status))
        return made

    return make


def events_of(admin: Admin, application_id: str, kind: str | None = None) -> list[dict[str, Any]]:
    """The event rows about one application, with their envelope decoded."""
    rows = admin.sql(
        """SELECT id::text AS id, kind, account_ids::text[] AS account_ids, body, created_at FROM events
           WHERE convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'application_id' = %(id)s
           ORDER BY created_at, kind""",
        {"id": application_id},
    )
    for row in rows:
        row["envelope"] = json.loads(bytes(row["body"]))
    return [row for row in rows if kind is None or row["kind"] == kind]


def event_count(admin: Admin) -> int:
    return int(admin.sql("SELECT count(*) AS n FROM events")[0]["n"])


def history(admin: Admin, application_id: str) -> list[tuple[str | None, str, str | None]]:
    rows = admin.sql(
        """SELECT from_status, to_status, changed_by::text AS changed_by FROM application_status_history
           WHERE application_id = %(id)s ORDER BY id""",
        {"id": application_id},
    )
    return [(row["from_status"], row["to_status"], row["changed_by"]) for row in rows]


def stored(admin: Admin, application_id: str) -> dict[str, Any]:
    [row] = admin.sql(
        "SELECT status, rating, notes, updated_at FROM applications WHERE id = %(id)s::uuid", {"id": application_id}
    )
    return row


def ids(result: dict[str, Any]) -> list[str]:
    return [item["id"] for item in result["data"]]


# --- applications.create ----------------------------------------------------------------------------------


def test_candidate_applies_with_the_exact_shape(
    call: Call, admin: Admin, employer: User, candidate: User, job: Factory
) -> None:
    posting = job(employer)
    made = ok(
        call(
            "applications.create",
            candidate,
            job_id=posting["id"],
            cover_letter="Dear Acme,\nI would like to join.",
            resume_url="https://example.com/cv.pdf",
        )
    )
    assert set(made) == APPLICATION_KEYS
    assert made["status"] == "pending"
    assert made["job_id"] == posting["id"]
    assert made["candidate_id"] == candidate.user_id
    assert made["cover_letter"] == "Dear Acme,\nI would like to join."
    assert made["resume_url"] == "https://example.com/cv.pdf"
    assert made["rating"] is None and made["notes"] is None
    assert TIMESTAMP.match(made["created_at"]) and TIMESTAMP.match(made["updated_at"])
    assert isinstance(made["id"], str) and made["id"]
    assert ok(call("applications.get", candidate, id=made["id"])) == made
    seen = ok(call("applications.get", employer, id=made["id"]))
    assert set(seen) == EMPLOYER_VIEW_KEYS and {k: v for k, v in seen.items() if k != "candidate"} == made
    assert seen["candidate"] == {
        "id": candidate.user_id,
        "display_name": None,
        "email": candidate.email,
        "headline": None,
        "location": None,
    }


def test_optional_fields_default_to_null_and_http_resume_is_fine(
    call: Call, employer: User, admin: Admin, job: Factory
) -> None:
    applicant = admin.user("candidate")
    bare = ok(call("applications.create", applicant, job_id=job(employer)["id"]))
    assert bare["cover_letter"] is None and bare["resume_url"] is None
    plain = ok(call("applications.create", applicant, job_id=job(employer)["id"], resume_url="http://cv.example/me"))
    assert plain["resume_url"] == "http://cv.example/me"


@pytest.mark.parametrize("role", ["employer", "admin"])
def test_only_candidates_apply(call: Call, admin: Admin, employer: User, job: Factory, role: str) -> None:
    posting = job(employer)
    who = admin.user(role)
    before = event_count(admin)
    refused(call("applications.create", who, job_id=posting["id"]), 403, "forbidden")
    refused(call("applications.create", employer, job_id=posting["id"]), 403, "forbidden")
    assert admin.sql("SELECT id FROM applications WHERE job_id = %(j)s::uuid", {"j": posting["id"]}) == []
    assert event_count(admin) == before


def test_second_application_to_one_job_is_a_conflict(
    call: Call, admin: Admin, employer: User, candidate: User, job: Factory, apply: Factory
) -> None:
    posting = job(employer)
    first = apply(candidate, posting["id"], cover_letter="first")
    before = event_count(admin)
    error = refused(
        call("applications.create", candidate, job_id=posting["id"], cover_letter="second"), 409, "conflict"
    )
    assert error["details"] is None, "no name of our schema's constraints"
    assert error["message"] == "You have already applied to this job."
    rows = admin.sql(
        "SELECT id::text AS id, cover_letter FROM applications WHERE job_id = %(j)s::uuid", {"j": posting["id"]}
    )
    assert rows == [{"id": first["id"], "cover_letter": "first"}]
    assert event_count(admin) == before
    assert history(admin, first["id"]) == [(None, "pending", candidate.user_id)]


def test_concurrent_duplicate_applications_make_one(
    admin: Admin, live: LiveServer, employer: User, job: Factory
) -> None:
    posting = job(employer)
    applicant = admin.user("candidate")

    def attempt(_: int) -> int:
        with live.client() as http:
            response = http.post("/v1/applications.create", json={"job_id": posting["id"]}, headers=applicant.auth)
            return response.status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = sorted(pool.map(attempt, range(8)))
    assert codes == [200] + [409] * 7
    [row] = admin.sql("SELECT id::text AS id FROM applications WHERE job_id = %(j)s::uuid", {"j": posting["id"]})
    assert len(events_of(admin, row["id"], "application.created")) == 1


def test_a_closed_job_takes_no_application(
    call: Call, admin: Admin, employer: User, candidate: User, job: Factory
) -> None:
    closed = job(employer, "closed")
    before = event_count(admin)
    error = refused(call("applications.create", candidate, job_id=closed["id"]), 409, "conflict")
    assert error["details"] == {"job_status": "closed"}
    assert admin.sql("SELECT id FROM applications WHERE job_id = %(j)s::uuid", {"j": closed["id"]}) == []
    assert event_count(admin) == before


def test_another_accounts_draft_is_not_found(
    call: Call, admin: Admin, employer: User, candidate: User, job: Factory
) -> None:
    draft = job(employer, "draft")
    error = refused(call("applications.create", candidate, job_id=draft["id"]), 404, "not_found")
    assert "draft" not in json.dumps(error)  # nothing tells the caller that a draft exists
    assert admin.sql("SELECT id FROM applications WHERE job_id = %(j)s::uuid", {"j": draft["id"]}) == []


@pytest.mark.parametrize("bad_id", [str(uuid.uuid4()), "abc", "", 42, 4.5, True, None])
def test_unknown_or_malformed_job_is_not_found(call: Call, candidate: User, bad_id: object) -> None:
    refused(call("applications.create", candidate, job_id=bad_id), 404, "not_found")


def test_missing_job_id_is_invalid_params(call: Call, candidate: User) -> None:
    error = refused(call("applications.create", candidate), 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == ["job_id"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"resume_url": "ftp://example.com/cv.pdf"}, "resume_url"),
        ({"resume_url": "javascript:alert(1)"}, "resume_url"),
        ({"resume_url": "example.com/cv.pdf"}, "resume_url"),
        ({"resume_url": "https://"}, "resume_url"),
        ({"resume_url": "https://exa mple.com/cv"}, "resume_url"),
        ({"resume_url": 7}, "resume_url"),
        ({"cover_letter": "before\x00after"}, "cover_letter"),
        ({"cover_letter": 12}, "cover_letter"),
        ({"rating": 5}, "rating"),
    ],
    ids=["ftp", "javascript", "no-scheme", "no-host", "space", "number", "nul", "not-text", "unknown-field"],
)
def test_bad_fields_are_invalid_params(
    call: Call, admin: Admin, employer: User, candidate: User, job: Factory, fields: dict[str, Any], field: str
) -> None:
    posting = job(employer)
    error = refused(call("applications.create", candidate, job_id=posting["id"], **fields), 422, "invalid_params")
    assert field in [e["field"] for e in error["details"]["errors"]]
    assert admin.sql("SELECT id FROM applications WHERE job_id = %(j)s::uuid", {"j": posting["id"]}) == []


# --- visibility: applications.get and applications.list ----------------------------------------------------


def test_the_candidate_never_sees_rating_or_notes(
    call: Call, employer: User, candidate: User, application: Factory
) -> None:
    made = application()
    reviewed = ok(call("applications.review", employer, id=made["id"], rating=4, notes="Strong Python."))
    assert (reviewed["rating"], reviewed["notes"]) == (4, "Strong Python.")
    seen = ok(call("applications.get", candidate, id=made["id"]))
    assert seen["status"] == "reviewed"
    assert seen["rating"] is None and seen["notes"] is None
    assert "candidate" not in seen
    assert seen == {**{k: v for k, v in reviewed.items() if k != "candidate"}, "rating": None, "notes": None}
    listed = ok(call("applications.list", candidate, job_id=made["job_id"]))
    assert listed["data"] == [seen]
    everything = ok(call("applications.list", candidate, per_page=100))
    assert all(item["rating"] is None and item["notes"] is None for item in everything["data"])
    withdrawn = ok(call("applications.withdraw", candidate, id=made["id"]))
    assert withdrawn["rating"] is None and withdrawn["notes"] is None


def test_the_employers_account_sees_rating_and_notes(
    call: Call, employer: User, colleague: User, application: Factory
) -> None:
    made = application()
    reviewed = ok(call("applications.review", employer, id=made["id"], rating=2, notes="Meh."))
    for who in (employer, colleague):
        assert ok(call("applications.get", who, id=made["id"])) == reviewed
        assert ok(call("applications.list", who, job_id=made["job_id"]))["data"] == [reviewed]


def test_another_employer_cannot_see_it(
    call: Call, admin: Admin, employer: User, stranger: User, rival: User, application: Factory
) -> None:
    made = application()
    refused(call("applications.get", stranger, id=made["id"]), 404, "not_found")
    refused(call("applications.get", rival, id=made["id"]), 404, "not_found")
    for who in (stranger, rival):
        listed = ok(call("applications.list", who, per_page=100))
        assert made["id"] not in ids(listed)


def test_admin_sees_every_application(call: Call, operator: User, employer: User, application: Factory) -> None:
    made = application()
    ok(call("applications.review", employer, id=made["id"], rating=5, notes="Hire."))
    seen = ok(call("applications.get", operator, id=made["id"]))
    assert (seen["rating"], seen["notes"]) == (5, "Hire.")
    listed = ok(call("applications.list", operator, job_id=made["job_id"]))
    assert listed["data"] == [seen] and listed["total"] == 1
    assert ok(call("applications.list", operator, per_page=1))["total"] >= 1


@pytest.mark.parametrize("bad_id", [str(uuid.uuid4()), "abc", 42, None])
def test_unknown_or_malformed_application_is_not_found(call: Call, employer: User, bad_id: object) -> None:
    refused(call("applications.get", employer, id=bad_id), 404, "not_found")


def test_list_scopes_of_each_role(call: Call, admin: Admin, job: Factory, apply: Factory) -> None:
    owner = admin.user("employer")
    other = admin.user("employer")
    alice, bob = admin.user("candidate"), admin.user("candidate")
    mine_a, mine_b, theirs = job(owner), job(owner), job(other)
    a1 = apply(alice, mine_a["id"])
    a2 = apply(alice, theirs["id"])
    b1 = apply(bob, mine_a["id"])
    b2 = apply(bob, mine_b["id"])
    owner_list = ok(call("applications.list", owner, per_page=100))
    assert set(ids(owner_list)) == {a1["id"], b1["id"], b2["id"]} and owner_list["total"] == 3
    other_list = ok(call("applications.list", other))
    assert ids(other_list) == [a2["id"]] and other_list["total"] == 1
    alice_list = ok(call("applications.list", alice))
    assert set(ids(alice_list)) == {a1["id"], a2["id"]} and alice_list["total"] == 2
    bob_list = ok(call("applications.list", bob, job_id=mine_a["id"]))
    assert ids(bob_list) == [b1["id"]] and bob_list["total"] == 1
    by_job = ok(call("applications.list", owner, job_id=mine_a["id"]))
    assert set(ids(by_job)) == {a1["id"], b1["id"]} and by_job["total"] == 2
    assert all(set(item) == EMPLOYER_VIEW_KEYS for item in by_job["data"])
    assert all(set(item) == APPLICATION_KEYS for item in alice_list["data"])
    nobody = admin.user("employer")
    assert ok(call("applications.list", nobody)) == {"data": [], "total": 0, "page": 1, "per_page": 20}


def test_list_by_a_job_one_sees_but_does_not_own_is_forbidden(
    call: Call, admin: Admin, employer: User, stranger: User, job: Factory, apply: Factory
) -> None:
    posting = job(employer)
    apply(admin.user("candidate"), posting["id"])
    refused(call("applications.list", stranger, job_id=posting["id"]), 403, "forbidden")
    closed = job(employer, "closed")
    refused(call("applications.list", stranger, job_id=closed["id"]), 403, "forbidden")


def test_list_by_another_accounts_draft_is_not_found(
    call: Call, employer: User, stranger: User, candidate: User, job: Factory
) -> None:
    draft = job(employer, "draft")
    refused(call("applications.list", stranger, job_id=draft["id"]), 404, "not_found")
    refused(call("applications.list", candidate, job_id=draft["id"]), 404, "not_found")
    assert ok(call("applications.list", employer, job_id=draft["id"]))["total"] == 0
    for bad_id in (str(uuid.uuid4()), "abc", 42):
        refused(call("applications.list", employer, job_id=bad_id), 404, "not_found")


def test_list_filters_by_status(call: Call, admin: Admin, job: Factory, apply: Factory) -> None:
    owner = admin.user("employer")
    posting = job(owner)
    made = [apply(admin.user("candidate"), posting["id"]) for _ in range(4)]
    ok(call("applications.update_status", owner, id=made[0]["id"], status="offered"))
    ok(call("applications.update_status", owner, id=made[1]["id"], status="offered"))
    ok(call("applications.update_status", owner, id=made[2]["id"], status="rejected"))
    offered = ok(call("applications.list", owner, status="offered"))
    assert set(ids(offered)) == {made[0]["id"], made[1]["id"]} and offered["total"] == 2
    assert all(item["status"] == "offered" for item in offered["data"])
    pending = ok(call("applications.list", owner, job_id=posting["id"], status="pending"))
    assert ids(pending) == [made[3]["id"]] and pending["total"] == 1
    assert ok(call("applications.list", owner, status="hired"))["total"] == 0
    error = refused(call("applications.list", owner, status="sleeping"), 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == ["status"]


def test_list_paging_order_and_exact_total(call: Call, admin: Admin, job: Factory, apply: Factory) -> None:
    owner = admin.user("employer")
    posting = job(owner)
    made = [apply(admin.user("candidate"), posting["id"]) for _ in range(7)]
    # Three in one second, so that the id decides among them; one long ago.
    same = [item["id"] for item in made[:3]]
    admin.sql(
        "UPDATE applications SET created_at = '2030-01-01T00:00:00Z' WHERE id = ANY(%(ids)s::uuid[])", {"ids": same}
    )
    admin.sql(
        "UPDATE applications SET created_at = '2020-01-01T00:00:00Z' WHERE id = %(id)s::uuid", {"id": made[3]["id"]}
    )
    rows = admin.sql(
        "SELECT id::text AS id, created_at FROM applications WHERE job_id = %(j)s::uuid", {"j": posting["id"]}
    )
    expected = [r["id"] for r in sorted(rows, key=lambda r: (r["created_at"], uuid.UUID(r["id"])), reverse=True)]
    assert expected[:3] == sorted(same, key=uuid.UUID, reverse=True) and expected[-1] == made[3]["id"]
    seen: list[str] = []
    for page in (1, 2, 3):
        result = ok(call("applications.list", owner, job_id=posting["id"], page=page, per_page=3))
        assert (result["total"], result["page"], result["per_page"]) == (7, page, 3)
        assert len(result["data"]) == (3 if page < 3 else 1)
        seen += ids(result)
    assert seen == expected
    beyond = ok(call("applications.list", owner, job_id=posting["id"], page=4, per_page=3))
    assert beyond == {"data": [], "total": 7, "page": 4, "per_page": 3}
    for params in ({"per_page": 0}, {"per_page": 101}, {"page": 0}, {"page": 101, "per_page": 100}):
        refused(call("applications.list", owner, **params), 422, "invalid_params")


def test_list_by_query_string(live: LiveServer, candidate: User, application: Factory) -> None:
    made = application()
    with live.client() as http:
        response = http.get(
            "/v1/applications.list",
            params={"job_id": made["job_id"], "status": "pending", "per_page": "5"},
            headers=candidate.auth,
        )
        assert ok(response) == {"data": [made], "total": 1, "page": 1, "per_page": 5}
        assert ok(http.get("/v1/applications.get", params={"id": made["id"]}, headers=candidate.auth)) == made


# --- applications.update_status ---------------------------------------------------------------------------


def test_forward_skipping_is_allowed(
    call: Call, admin: Admin, employer: User, candidate: User, application: Factory
) -> None:
    made = application()
    moved = ok(call("applications.update_status", employer, id=made["id"], status="interview_scheduled"))
    assert set(moved) == EMPLOYER_VIEW_KEYS
    assert moved["status"] == "interview_scheduled"
    assert {k: moved[k] for k in ("id", "job_id", "candidate_id", "created_at")} == {
        k: made[k] for k in ("id", "job_id", "candidate_id", "created_at")
    }
    assert ok(call("applications.get", candidate, id=made["id"]))["status"] == "interview_scheduled"
    assert ok(call("applications.update_status", employer, id=made["id"], status="hired"))["status"] == "hired"
    assert stored(admin, made["id"])["status"] == "hired"


@pytest.mark.parametrize(
    ("start", "target"),
    [
        ("pending", "reviewed"),
        ("pending", "offered"),
        ("pending", "hired"),
        ("pending", "rejected"),
        ("reviewed", "interview_scheduled"),
        ("interview_scheduled", "offered"),
        ("offered", "hired"),
        ("offered", "rejected"),
    ],
)
def test_allowed_moves(call: Call, employer: User, application: Factory, start: str, target: str) -> None:
    made = application(start)
    assert ok(call("applications.update_status", employer, id=made["id"], status=target))["status"] == target


@pytest.mark.parametrize(
    ("start", "target"),
    [
        ("pending", "pending"),
        ("reviewed", "reviewed"),
        ("reviewed", "pending"),
        ("interview_scheduled", "reviewed"),
        ("offered", "pending"),
        ("offered", "offered"),
        ("hired", "rejected"),
        ("hired", "hired"),
        ("hired", "offered"),
        ("rejected", "offered"),
        ("rejected", "rejected"),
        ("rejected", "hired"),
        ("withdrawn", "reviewed"),
        ("withdrawn", "rejected"),
    ],
)
def test_backwards_same_or_from_final_is_invalid_transition(
    call: Call, admin: Admin, employer: User, application: Factory, start: str, target: str
) -> None:
    made = application(start)
    before, events = stored(admin, made["id"]), event_count(admin)
    error = refused(
        call("applications.update_status", employer, id=made["id"], status=target), 409, "invalid_transition"
    )
    assert error["details"] == {"from": start, "to": target}
    assert stored(admin, made["id"]) == before
    assert event_count(admin) == events


@pytest.mark.parametrize("start", ["pending", "offered", "hired"])
def test_employer_asking_withdrawn_is_forbidden(
    call: Call, admin: Admin, employer: User, application: Factory, start: str
) -> None:
    made = application(start)
    events = event_count(admin)
    refused(call("applications.update_status", employer, id=made["id"], status="withdrawn"), 403, "forbidden")
    assert stored(admin, made["id"])["status"] == start
    assert event_count(admin) == events


def test_candidate_may_not_update_status(call: Call, admin: Admin, candidate: User, application: Factory) -> None:
    made = application()
    events = event_count(admin)
    for target in ("reviewed", "withdrawn", "rejected"):
        refused(call("applications.update_status", candidate, id=made["id"], status=target), 403, "forbidden")
    assert stored(admin, made["id"])["status"] == "pending"
    assert event_count(admin) == events


@pytest.mark.parametrize("status", ["sleeping", "", "PENDING", None, 3])
def test_unknown_status_is_invalid_params(call: Call, employer: User, application: Factory, status: object) -> None:
    made = application()
    error = refused(call("applications.update_status", employer, id=made["id"], status=status), 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == ["status"]


def test_another_accounts_employer_gets_not_found(
    call: Call, admin: Admin, stranger: User, application: Factory
) -> None:
    made = application()
    events = event_count(admin)
    for target in ("reviewed", "rejected", "withdrawn", "pending"):
        refused(call("applications.update_status", stranger, id=made["id"], status=target), 404, "not_found")
    assert stored(admin, made["id"])["status"] == "pending"
    assert event_count(admin) == events


@pytest.mark.parametrize("bad_id", [str(uuid.uuid4()), "abc", 42, None])
def test_update_status_of_an_unknown_application_is_not_found(call: Call, employer: User, bad_id: object) -> None:
    refused(call("applications.update_status", employer, id=bad_id, status="reviewed"), 404, "not_found")


def test_a_candidate_turned_employer_cannot_hire_themselves_or_read_the_notes(
    call: Call, admin: Admin, employer: User, application: Factory
) -> None:
    """Applying is no way into another account's pipeline: after a role change the applicant sees their
    application still, but may neither move nor review it, nor read the employer's rating and notes."""
    applicant = admin.user("candidate")
    made = application(who=applicant)
    ok(call("applications.review", employer, id=made["id"], rating=2, notes="not a fit"))
    admin.sql("UPDATE users SET role = 'employer' WHERE id = %(id)s", {"id": applicant.user_id})
    events = event_count(admin)
    refused(call("applications.update_status", applicant, id=made["id"], status="hired"), 403, "forbidden")
    refused(call("applications.review", applicant, id=made["id"], rating=5, notes="great"), 403, "forbidden")
    seen = ok(call("applications.get", applicant, id=made["id"]))
    assert (seen["rating"], seen["notes"]) == (None, None)
    assert stored(admin, made["id"])["status"] == "reviewed" and event_count(admin) == events


def test_a_colleague_and_an_admin_move_it(
    call: Call, admin: Admin, colleague: User, operator: User, application: Factory
) -> None:
    made = application()
    ok(call("applications.update_status", colleague, id=made["id"], status="reviewed"))
    ok(call("applications.update_status", operator, id=made["id"], status="offered"))
    assert [(e[0], e[1], e[2]) for e in history(admin, made["id"])][1:] == [
        ("pending", "reviewed", colleague.user_id),
        ("reviewed", "offered", operator.user_id),
    ]


def test_update_status_keeps_rating_and_notes(call: Call, employer: User, application: Factory) -> None:
    made = application()
    ok(call("applications.review", employer, id=made["id"], rating=3, notes="ok"))
    moved = ok(call("applications.update_status", employer, id=made["id"], status="offered"))
    assert (moved["rating"], moved["notes"], moved["status"]) == (3, "ok", "offered")


# --- applications.review ----------------------------------------------------------------------------------


@pytest.mark.parametrize("rating", [0, 6, -1, 2.5, "5", True])
def test_rating_out_of_range_is_invalid_params(
    call: Call, admin: Admin, employer: User, application: Factory, rating: object
) -> None:
    made = application()
    events = event_count(admin)
    error = refused(call("applications.review", employer, id=made["id"], rating=rating), 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == ["rating"]
    assert stored(admin, made["id"])["status"] == "pending"
    assert event_count(admin) == events


def test_notes_with_nul_is_invalid_params(call: Call, employer: User, application: Factory) -> None:
    made = application()
    error = refused(call("applications.review", employer, id=made["id"], notes="a\x00b"), 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == ["notes"]


@pytest.mark.parametrize("rating", [1, 5])
def test_review_of_a_pending_application_moves_it_to_reviewed(
    call: Call, admin: Admin, employer: User, application: Factory, rating: int
) -> None:
    made = application()
    reviewed = ok(call("applications.review", employer, id=made["id"], rating=rating, notes="Good fit."))
    assert set(reviewed) == EMPLOYER_VIEW_KEYS
    assert (reviewed["status"], reviewed["rating"], reviewed["notes"]) == ("reviewed", rating, "Good fit.")
    kinds = sorted(row["kind"] for row in events_of(admin, made["id"]))
    assert kinds == ["application.created", "application.reviewed", "application.status_changed"]
    [changed] = events_of(admin, made["id"], "application.status_changed")
    assert changed["envelope"]["data"]["old_status"] == "pending"
    assert changed["envelope"]["data"]["new_status"] == "reviewed"
    assert history(admin, made["id"])[-1] == ("pending", "reviewed", employer.user_id)


def test_review_without_fields_still_moves_a_pending_application(
    call: Call, admin: Admin, employer: User, application: Factory
) -> None:
    made = application()
    reviewed = ok(call("applications.review", employer, id=made["id"]))
    assert (reviewed["status"], reviewed["rating"], reviewed["notes"]) == ("reviewed", None, None)
    [event] = events_of(admin, made["id"], "application.reviewed")
    assert event["envelope"]["data"]["rating"] is None


@pytest.mark.parametrize("start", ["reviewed", "interview_scheduled", "offered"])
def test_review_later_only_updates_rating_and_notes(
    call: Call, admin: Admin, employer: User, application: Factory, start: str
) -> None:
    made = application(start)
    before_events = events_of(admin, made["id"])
    before_history = history(admin, made["id"])
    reviewed = ok(call("applications.review", employer, id=made["id"], rating=3, notes="Later."))
    assert (reviewed["status"], reviewed["rating"], reviewed["notes"]) == (start, 3, "Later.")
    new = [row for row in events_of(admin, made["id"]) if row["id"] not in {e["id"] for e in before_events}]
    assert [row["kind"] for row in new] == ["application.reviewed"]
    assert history(admin, made["id"]) == before_history


@pytest.mark.parametrize("final", FINAL)
def test_review_of_a_final_application_is_a_conflict(
    call: Call, admin: Admin, employer: User, application: Factory, final: str
) -> None:
    made = application(final)
    before, events = stored(admin, made["id"]), event_count(admin)
    error = refused(
        call("applications.review", employer, id=made["id"], rating=5, notes="Too late"), 409, "invalid_transition"
    )
    assert error["details"]["from"] == final
    assert stored(admin, made["id"]) == before
    assert event_count(admin) == events


def test_review_is_partial(call: Call, admin: Admin, employer: User, application: Factory) -> None:
    made = application()
    first = ok(call("applications.review", employer, id=made["id"], rating=4, notes="First look."))
    assert (first["rating"], first["notes"]) == (4, "First look.")
    rating_only = ok(call("applications.review", employer, id=made["id"], rating=2))
    assert (rating_only["rating"], rating_only["notes"]) == (2, "First look.")
    notes_only = ok(call("applications.review", employer, id=made["id"], notes="Second look."))
    assert (notes_only["rating"], notes_only["notes"]) == (2, "Second look.")
    cleared = ok(call("applications.review", employer, id=made["id"], notes=None))
    assert (cleared["rating"], cleared["notes"]) == (2, None)
    unrated = ok(call("applications.review", employer, id=made["id"], rating=None))
    assert (unrated["rating"], unrated["notes"]) == (None, None)
    row = stored(admin, made["id"])
    assert (row["status"], row["rating"], row["notes"]) == ("reviewed", None, None)
    ratings = [e["envelope"]["data"]["rating"] for e in events_of(admin, made["id"], "application.reviewed")]
    assert sorted(ratings, key=lambda r: (r is None, r)) == [2, 2, 2, 4, None]


def test_who_may_review(
    call: Call,
    admin: Admin,
    candidate: User,
    stranger: User,
    rival: User,
    operator: User,
    colleague: User,
    application: Factory,
) -> None:
    made = application()
    events = event_count(admin)
    refused(call("applications.review", candidate, id=made["id"], rating=5), 403, "forbidden")
    refused(call("applications.review", rival, id=made["id"], rating=5), 403, "forbidden")
    refused(call("applications.review", stranger, id=made["id"], rating=5), 404, "not_found")
    refused(call("applications.review", stranger, id="abc", rating=5), 404, "not_found")
    assert stored(admin, made["id"])["rating"] is None
    assert event_count(admin) == events
    assert ok(call("applications.review", colleague, id=made["id"], rating=1))["rating"] == 1
    assert ok(call("applications.review", operator, id=made["id"], rating=2))["rating"] == 2


# --- applications.withdraw --------------------------------------------------------------------------------


@pytest.mark.parametrize("start", ["pending", "reviewed", "interview_scheduled", "offered"])
def test_the_candidate_withdraws(
    call: Call, admin: Admin, candidate: User, employer: User, application: Factory, start: str
) -> None:
    made = application(start)
    done = ok(call("applications.withdraw", candidate, id=made["id"]))
    assert set(done) == APPLICATION_KEYS
    assert done["status"] == "withdrawn" and done["rating"] is None and done["notes"] is None
    assert ok(call("applications.get", employer, id=made["id"]))["status"] == "withdrawn"
    assert history(admin, made["id"])[-1] == (start, "withdrawn", candidate.user_id)


def test_only_the_candidate_withdraws(
    call: Call, admin: Admin, employer: User, rival: User, operator: User, stranger: User, application: Factory
) -> None:
    made = application()
    events = event_count(admin)
    refused(call("applications.withdraw", rival, id=made["id"]), 404, "not_found")
    refused(call("applications.withdraw", employer, id=made["id"]), 403, "forbidden")
    refused(call("applications.withdraw", stranger, id=made["id"]), 403, "forbidden")
    refused(call("applications.withdraw", rival, id=str(uuid.uuid4())), 404, "not_found")
    refused(call("applications.withdraw", rival, id="abc"), 404, "not_found")
    assert stored(admin, made["id"])["status"] == "pending"
    assert event_count(admin) == events


@pytest.mark.parametrize("final", FINAL)
def test_withdraw_from_final_is_invalid_transition(
    call: Call, admin: Admin, candidate: User, application: Factory, final: str
) -> None:
    made = application(final)
    events = event_count(admin)
    error = refused(call("applications.withdraw", candidate, id=made["id"]), 409, "invalid_transition")
    assert error["details"] == {"from": final, "to": "withdrawn"}
    assert stored(admin, made["id"])["status"] == final
    assert event_count(admin) == events


# --- history ----------------------------------------------------------------------------------------------


def test_history_has_one_row_per_change(
    call: Call, admin: Admin, employer: User, colleague: User, candidate: User, application: Factory
) -> None:
    made = application()
    assert history(admin, made["id"]) == [(None, "pending", candidate.user_id)]
    ok(call("applications.review", employer, id=made["id"], rating=4))
    ok(call("applications.review", employer, id=made["id"], notes="no status change"))
    refused(call("applications.update_status", employer, id=made["id"], status="pending"), 409, "invalid_transition")
    ok(call("applications.update_status", colleague, id=made["id"], status="offered"))
    ok(call("applications.withdraw", candidate, id=made["id"]))
    refused(call("applications.withdraw", candidate, id=made["id"]), 409, "invalid_transition")
    assert history(admin, made["id"]) == [
        (None, "pending", candidate.user_id),
        ("pending", "reviewed", employer.user_id),
        ("reviewed", "offered", colleague.user_id),
        ("offered", "withdrawn", candidate.user_id),
    ]


# --- events -----------------------------------------------------------------------------------------------


def test_application_created_event(admin: Admin, employer: User, candidate: User, application: Factory) -> None:
    made = application()
    [row] = events_of(admin, made["id"])
    assert row["kind"] == "application.created"
    assert set(row["account_ids"]) == {employer.account_id, candidate.account_id}
    assert len(row["account_ids"]) == 2
    envelope = row["envelope"]
    assert set(envelope) == ENVELOPE_KEYS
    assert envelope["event"] == "application.created"
    assert envelope["data"] == {
        "application_id": made["id"],
        "job_id": made["job_id"],
        "candidate_id": candidate.user_id,
        "status": "pending",
        "candidate": {
            "id": candidate.user_id,
            "display_name": None,
            "email": candidate.email,
            "headline": None,
            "location": None,
        },
    }
    assert envelope["idempotency_key"] == row["id"]
    assert TIMESTAMP.match(envelope["timestamp"])


def test_status_changed_event(
    call: Call, admin: Admin, employer: User, candidate: User, operator: User, application: Factory
) -> None:
    made = application()
    ok(call("applications.update_status", employer, id=made["id"], status="interview_scheduled"))
    ok(call("applications.update_status", operator, id=made["id"], status="offered"))
    ok(call("applications.withdraw", candidate, id=made["id"]))
    rows = events_of(admin, made["id"], "application.status_changed")
    assert len(rows) == 3
    datas = sorted((row["envelope"]["data"] for row in rows), key=lambda d: PIPELINE.index(d["old_status"]))
    base = {"application_id": made["id"], "job_id": made["job_id"]}
    assert datas == [
        {**base, "old_status": "pending", "new_status": "interview_scheduled", "updated_by": employer.user_id},
        {**base, "old_status": "interview_scheduled", "new_status": "offered", "updated_by": operator.user_id},
        {**base, "old_status": "offered", "new_status": "withdrawn", "updated_by": candidate.user_id},
    ]
    for row in rows:
        assert set(row["account_ids"]) == {employer.account_id, candidate.account_id}
        assert set(row["envelope"]) == ENVELOPE_KEYS and row["envelope"]["event"] == "application.status_changed"
        assert row["envelope"]["idempotency_key"] == row["id"]


def test_reviewed_event_goes_to_the_jobs_account_only(
    call: Call, admin: Admin, employer: User, colleague: User, application: Factory
) -> None:
    made = application()
    ok(call("applications.review", colleague, id=made["id"], rating=5, notes="secret notes"))
    [row] = events_of(admin, made["id"], "application.reviewed")
    assert row["account_ids"] == [employer.account_id]
    assert row["envelope"]["data"] == {
        "application_id": made["id"],
        "job_id": made["job_id"],
        "reviewed_by": colleague.user_id,
        "rating": 5,
    }
    assert b"secret notes" not in bytes(row["body"])


def test_refused_calls_write_no_event(
    call: Call,
    admin: Admin,
    employer: User,
    stranger: User,
    candidate: User,
    rival: User,
    job: Factory,
    application: Factory,
) -> None:
    made = application("offered")
    hired = application("hired")
    closed = job(employer, "closed")
    before = event_count(admin)
    refused(call("applications.create", candidate, job_id=made["job_id"]), 409, "conflict")
    refused(call("applications.create", candidate, job_id=closed["id"]), 409, "conflict")
    refused(call("applications.create", employer, job_id=made["job_id"]), 403, "forbidden")
    refused(call("applications.update_status", employer, id=made["id"], status="reviewed"), 409, "invalid_transition")
    refused(call("applications.update_status", employer, id=made["id"], status="withdrawn"), 403, "forbidden")
    refused(call("applications.update_status", stranger, id=made["id"], status="hired"), 404, "not_found")
    refused(call("applications.update_status", candidate, id=made["id"], status="hired"), 403, "forbidden")
    refused(call("applications.review", employer, id=hired["id"], rating=3), 409, "invalid_transition")
    refused(call("applications.review", employer, id=made["id"], rating=9), 422, "invalid_params")
    refused(call("applications.withdraw", rival, id=made["id"]), 404, "not_found")
    refused(call("applications.withdraw", candidate, id=hired["id"]), 409, "invalid_transition")
    assert event_count(admin) == before
    assert stored(admin, made["id"])["status"] == "offered"


def test_events_reach_the_subscribed_endpoints_of_the_right_accounts(
    call: Call, admin: Admin, job: Factory, apply: Factory
) -> None:
    owner, applicant = admin.user("employer"), admin.user("candidate")
    hooks = {
        "owner": admin.webhook(owner, "http://127.0.0.1:9/owner", APPLICATION_EVENTS)["id"],
        "owner-created-only": admin.webhook(owner, "http://127.0.0.1:9/created", ["application.created"])["id"],
        "applicant": admin.webhook(applicant, "http://127.0.0.1:9/applicant", APPLICATION_EVENTS)["id"],
    }
    made = apply(applicant, job(owner)["id"])
    ok(call("applications.review", owner, id=made["id"], rating=4))
    ok(call("applications.withdraw", applicant, id=made["id"]))
    names = {endpoint: name for name, endpoint in hooks.items()}
    routed: dict[str, list[str]] = {}
    for row in events_of(admin, made["id"]):
        deliveries = admin.sql(
            "SELECT endpoint_id::text AS endpoint_id FROM webhook_deliveries WHERE event_id = %(e)s::uuid",
            {"e": row["id"]},
        )
        routed.setdefault(row["kind"], []).extend(names[d["endpoint_id"]] for d in deliveries)
    assert {kind: sorted(endpoints) for kind, endpoints in routed.items()} == {
        "application.created": ["applicant", "owner", "owner-created-only"],
        "application.reviewed": ["owner"],
        "application.status_changed": ["applicant", "applicant", "owner", "owner"],
    }


# --- concurrency ------------------------------------------------------------------------------------------


def test_concurrent_status_moves_lose_no_update(
    admin: Admin, live: LiveServer, employer: User, application: Factory
) -> None:
    made = application()
    targets = ["reviewed", "interview_scheduled", "offered", "hired", "rejected"] * 6
    random.Random(7).shuffle(targets)

    def move_to(target: str) -> tuple[str, int, dict[str, Any]]:
        with live.client() as http:
            response = http.post(
                "/v1/applications.update_status", json={"id": made["id"], "status": target}, headers=employer.auth
            )
            return target, response.status_code, response.json()

    with ThreadPoolExecutor(max_workers=30) as pool:
        answers = list(pool.map(move_to, targets))

    accepted = [target for target, status, body in answers if status == 200]
    for target, status, body in answers:
        assert status in (200, 409), body
        if status == 200:
            assert body["result"]["status"] == target
        else:
            assert body["error"]["code"] == "invalid_transition"
            assert body["error"]["details"]["to"] == target
    assert accepted and len(accepted) == len(set(accepted))  # forward only: no target is reached twice

    rows = events_of(admin, made["id"], "application.status_changed")
    assert len(rows) == len(accepted)
    changes = [(row["envelope"]["data"]["old_status"], row["envelope"]["data"]["new_status"]) for row in rows]
    # Every change starts where the previous one ended: walk the chain from `pending`.
    by_old = {old: new for old, new in changes}
    assert len(by_old) == len(changes), f"two changes left one status: a lost update {changes}"
    chain, current = [], "pending"
    while current in by_old:
        current = by_old[current]
        chain.append(current)
    assert len(chain) == len(changes) and sorted(chain) == sorted(accepted)
    # The last accepted move is the final status, in the database and in the history.
    assert stored(admin, made["id"])["status"] == chain[-1]
    assert [(h[0], h[1]) for h in history(admin, made["id"])] == [
        (None, "pending"),
        *zip(["pending", *chain[:-1]], chain, strict=True),
    ]
    assert all(row["envelope"]["data"]["updated_by"] == employer.user_id for row in rows)
