"""Offers (docs/interviews.md): terms approved in order, versions when the terms change, sending and answering
them with the application's moves, expiry, what the candidate may read, and who is told."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tests.loop import Team, mails, team
from tests.smtp import SmtpServer, mailing_settings
from tests.support import TIMESTAMP, Admin, Call, User, ok, refused

OFFER_KEYS = {
    "id",
    "application_id",
    "job_id",
    "version",
    "previous_id",
    "status",
    "title",
    "start_date",
    "salary",
    "expires_at",
    "approvals",
    "notes",
    "created_by",
    "sent_at",
    "responded_at",
    "created_at",
    "updated_at",
}
CANDIDATE_OFFER_KEYS = OFFER_KEYS - {"approvals", "notes"}
SALARY = {"amount": "85000.00", "currency": "EUR", "period": "year"}


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(database, smtp, tmp_path_factory.mktemp("data"))


@pytest.fixture
def hiring(admin: Admin, call: Call) -> Team:
    return team(admin, call, members=3)


def deadline(days: int = 14) -> str:
    return (dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def offer(call: Call, hiring: Team, approvers: list[User] | None = None, **fields: Any) -> dict[str, Any]:
    body = {
        "application_id": hiring.application["id"],
        "title": "Senior backend engineer",
        "start_date": "2027-01-04",
        "salary": SALARY,
        "expires_at": deadline(),
        "approver_ids": [one.user_id for one in approvers or []],
        "notes": "Within band.",
    }
    made: dict[str, Any] = ok(call("offers.create", hiring.owner, **{**body, **fields}))
    return made


def sent(call: Call, hiring: Team, **fields: Any) -> dict[str, Any]:
    made = offer(call, hiring, **fields)
    result: dict[str, Any] = ok(call("offers.send", hiring.owner, id=made["id"]))
    return result


def offer_events(admin: Admin, application_id: str) -> list[tuple[str, dict[str, Any]]]:
    rows = admin.sql(
        """SELECT kind, body FROM events WHERE kind LIKE 'offer.%%'
           AND convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'application_id' = %(id)s ORDER BY seq""",
        {"id": application_id},
    )
    return [(row["kind"], json.loads(bytes(row["body"]))["data"]) for row in rows]


# --- offers.create -------------------------------------------------------------------------------------------


def test_an_offer_with_approvers_waits_for_them(call: Call, admin: Admin, hiring: Team) -> None:
    first, second, _ = hiring.members
    made = offer(call, hiring, [first, second])
    assert set(made) == OFFER_KEYS
    assert (made["version"], made["previous_id"], made["status"]) == (1, None, "pending_approval")
    assert made["salary"] == SALARY and made["start_date"] == "2027-01-04" and made["notes"] == "Within band."
    assert made["approvals"] == [
        {"approver_id": first.user_id, "decision": "pending", "decided_at": None},
        {"approver_id": second.user_id, "decision": "pending", "decided_at": None},
    ]
    assert made["created_by"] == hiring.owner.user_id and made["sent_at"] is None and made["responded_at"] is None
    assert TIMESTAMP.match(made["expires_at"]) and TIMESTAMP.match(made["created_at"])
    assert offer_events(admin, hiring.application["id"]) == [
        (
            "offer.created",
            {
                "offer_id": made["id"],
                "application_id": hiring.application["id"],
                "job_id": hiring.job["id"],
                "version": 1,
                "status": "pending_approval",
            },
        )
    ]


def test_without_approvers_an_offer_is_approved_at_once(call: Call, hiring: Team) -> None:
    made = offer(call, hiring)
    assert made["status"] == "approved" and made["approvals"] == []


def test_one_open_offer_per_application(call: Call, hiring: Team) -> None:
    made = offer(call, hiring)
    body = {
        "application_id": hiring.application["id"],
        "title": "Engineer",
        "start_date": "2027-01-04",
        "salary": SALARY,
        "expires_at": deadline(),
    }
    error = refused(call("offers.create", hiring.owner, **body), 409, "conflict")
    assert error["details"] == {"offer_id": made["id"]}
    ok(call("offers.cancel", hiring.owner, id=made["id"]))
    assert ok(call("offers.create", hiring.owner, **body))["version"] == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"salary": {**SALARY, "currency": "ABC"}}, "salary"),
        ({"salary": {**SALARY, "currency": "eur"}}, "salary"),
        ({"salary": {**SALARY, "amount": "0"}}, "salary"),
        ({"salary": {**SALARY, "amount": "1,000"}}, "salary"),
        ({"salary": {**SALARY, "period": "week"}}, "salary"),
        ({"expires_at": "2020-01-01T00:00:00Z"}, "expires_at"),
        ({"start_date": "next monday"}, "start_date"),
        ({"approver_ids": ["not-an-id"]}, "approver_ids"),
    ],
)
def test_terms_that_cannot_be_are_422(call: Call, hiring: Team, fields: dict[str, Any], field: str) -> None:
    body = {
        "application_id": hiring.application["id"],
        "title": "Engineer",
        "start_date": "2027-01-04",
        "salary": SALARY,
        "expires_at": deadline(),
        **fields,
    }
    error = refused(call("offers.create", hiring.owner, **body), 422, "invalid_params")
    assert field in [entry["field"] for entry in error["details"]["errors"]]
    assert not any(entry["message"].endswith("..") for entry in error["details"]["errors"])
    if "period" in fields.get("salary", {}) and fields["salary"]["period"] == "week":
        assert "(at salary.period)" in error["details"]["errors"][0]["message"]


def test_approvers_are_other_members_of_the_account(call: Call, hiring: Team, stranger: User) -> None:
    for approvers in (
        [hiring.owner.user_id],
        [stranger.user_id],
        [hiring.candidate.user_id],
        [hiring.members[0].user_id] * 2,
    ):
        body = {
            "application_id": hiring.application["id"],
            "title": "Engineer",
            "start_date": "2027-01-04",
            "salary": SALARY,
            "expires_at": deadline(),
            "approver_ids": approvers,
        }
        error = refused(call("offers.create", hiring.owner, **body), 422, "invalid_params")
        assert [entry["field"] for entry in error["details"]["errors"]] == ["approver_ids"]


def test_a_decided_application_takes_no_offer(call: Call, hiring: Team) -> None:
    ok(call("applications.update_status", hiring.owner, id=hiring.application["id"], status="rejected"))
    body = {
        "application_id": hiring.application["id"],
        "title": "Engineer",
        "start_date": "2027-01-04",
        "salary": SALARY,
        "expires_at": deadline(),
    }
    error = refused(call("offers.create", hiring.owner, **body), 409, "invalid_transition")
    assert error["details"] == {"from": "rejected", "to": "offered"}


# --- offers.approve ------------------------------------------------------------------------------------------


def test_approvers_decide_in_order(call: Call, admin: Admin, smtp: SmtpServer, hiring: Team) -> None:
    first, second, outsider = hiring.members
    made = offer(call, hiring, [first, second])
    mails(smtp, first.email, "An offer waits for your approval")
    error = refused(call("offers.approve", second, id=made["id"], decision="approved"), 409, "conflict")
    assert error["details"] == {"waiting_for": first.user_id}
    refused(call("offers.approve", outsider, id=made["id"], decision="approved"), 403, "forbidden")
    halfway = ok(call("offers.approve", first, id=made["id"], decision="approved", note="Fits the band."))
    assert halfway["status"] == "pending_approval"
    assert halfway["approvals"][0]["decision"] == "approved" and TIMESTAMP.match(halfway["approvals"][0]["decided_at"])
    mails(smtp, second.email, "An offer waits for your approval")
    refused(call("offers.approve", first, id=made["id"], decision="approved"), 409, "conflict")
    done = ok(call("offers.approve", second, id=made["id"], decision="approved"))
    assert done["status"] == "approved"
    assert [kind for kind, _ in offer_events(admin, hiring.application["id"])] == ["offer.created", "offer.approved"]
    error = refused(call("offers.approve", second, id=made["id"], decision="approved"), 409, "invalid_transition")
    assert error["details"] == {"from": "approved", "to": "approved"}


def test_one_rejection_rejects_the_offer(call: Call, admin: Admin, hiring: Team) -> None:
    first, second, _ = hiring.members
    made = offer(call, hiring, [first, second])
    rejected = ok(call("offers.approve", first, id=made["id"], decision="rejected", note="Over budget."))
    assert rejected["status"] == "rejected"
    assert offer_events(admin, hiring.application["id"])[-1][0] == "offer.rejected"
    refused(call("offers.send", hiring.owner, id=made["id"]), 409, "invalid_transition")


# --- offers.update -------------------------------------------------------------------------------------------


def test_new_terms_make_a_new_version_approved_afresh(call: Call, admin: Admin, hiring: Team) -> None:
    first = hiring.members[0]
    made = offer(call, hiring, [first])
    ok(call("offers.approve", first, id=made["id"], decision="rejected"))
    better = {"amount": "90000.00", "currency": "EUR", "period": "year"}
    second = ok(call("offers.update", hiring.owner, id=made["id"], salary=better))
    assert (second["version"], second["previous_id"], second["status"]) == (2, made["id"], "pending_approval")
    assert second["salary"] == better and second["title"] == made["title"] and second["notes"] == made["notes"]
    assert second["approvals"] == [{"approver_id": first.user_id, "decision": "pending", "decided_at": None}]
    assert ok(call("offers.get", hiring.owner, id=made["id"]))["status"] == "superseded"
    third = ok(call("offers.update", hiring.owner, id=second["id"], title="Staff engineer"))
    assert ok(call("offers.get", hiring.owner, id=second["id"]))["status"] == "superseded"
    listed = ok(call("offers.list", hiring.owner, application_id=hiring.application["id"]))
    assert [one["version"] for one in listed["data"]] == [3, 2, 1] and listed["total"] == 3
    assert listed["data"][0]["id"] == third["id"]


def test_a_change_of_notes_alone_changes_this_version(call: Call, admin: Admin, hiring: Team) -> None:
    made = offer(call, hiring)
    noted = ok(call("offers.update", hiring.owner, id=made["id"], notes="Relocation agreed."))
    assert (noted["id"], noted["version"], noted["notes"], noted["status"]) == (
        made["id"],
        1,
        "Relocation agreed.",
        "approved",
    )
    same = ok(call("offers.update", hiring.owner, id=made["id"], salary=SALARY))
    assert same["id"] == made["id"], "the same terms are no change of terms"
    assert [kind for kind, _ in offer_events(admin, hiring.application["id"])] == ["offer.created"]


def test_a_sent_offer_is_not_updated(call: Call, hiring: Team) -> None:
    made = sent(call, hiring)
    error = refused(call("offers.update", hiring.owner, id=made["id"], title="Other"), 409, "invalid_transition")
    assert error["details"]["from"] == "sent"


# --- offers.send, offers.respond -----------------------------------------------------------------------------


def test_sending_tells_the_candidate_and_moves_the_application(
    call: Call, admin: Admin, smtp: SmtpServer, hiring: Team
) -> None:
    made = sent(call, hiring)
    assert made["status"] == "sent" and TIMESTAMP.match(made["sent_at"])
    assert ok(call("applications.get", hiring.owner, id=hiring.application["id"]))["status"] == "offered"
    [mail] = mails(smtp, hiring.candidate.email, "You have an offer")
    assert "85,000.00 EUR a year" in mail.text and "/me" in mail.text and "Within band" not in mail.text
    assert [kind for kind, _ in offer_events(admin, hiring.application["id"])] == ["offer.created", "offer.sent"]
    error = refused(call("offers.send", hiring.owner, id=made["id"]), 409, "invalid_transition")
    assert error["details"] == {"from": "sent", "to": "sent"}


def test_accepting_hires(call: Call, admin: Admin, smtp: SmtpServer, hiring: Team) -> None:
    made = sent(call, hiring)
    answered = ok(call("offers.respond", hiring.candidate, id=made["id"], decision="accept", note="Thank you!"))
    assert set(answered) == CANDIDATE_OFFER_KEYS
    assert answered["status"] == "accepted" and TIMESTAMP.match(answered["responded_at"])
    assert ok(call("applications.get", hiring.owner, id=hiring.application["id"]))["status"] == "hired"
    assert [kind for kind, _ in offer_events(admin, hiring.application["id"])][-1] == "offer.accepted"
    mails(smtp, hiring.candidate.email, "Your application was successful")
    refused(call("offers.respond", hiring.candidate, id=made["id"], decision="decline"), 409, "invalid_transition")


def test_declining_leaves_the_application_offered(call: Call, admin: Admin, hiring: Team) -> None:
    made = sent(call, hiring)
    answered = ok(call("offers.respond", hiring.candidate, id=made["id"], decision="decline"))
    assert answered["status"] == "declined"
    assert ok(call("applications.get", hiring.owner, id=hiring.application["id"]))["status"] == "offered"
    assert [kind for kind, _ in offer_events(admin, hiring.application["id"])][-1] == "offer.declined"


def test_an_offer_past_its_time_reads_expired(call: Call, admin: Admin, hiring: Team) -> None:
    made = sent(call, hiring)
    admin.sql("UPDATE offers SET expires_at = now() - interval '1 minute' WHERE id = %(id)s::uuid", {"id": made["id"]})
    assert ok(call("offers.get", hiring.candidate, id=made["id"]))["status"] == "expired"
    error = refused(
        call("offers.respond", hiring.candidate, id=made["id"], decision="accept"), 409, "invalid_transition"
    )
    assert error["details"] == {"from": "expired", "to": "accepted"}
    again = offer(call, hiring)  # an expired offer holds no place
    assert again["status"] == "approved"


def test_only_the_candidate_answers(call: Call, hiring: Team) -> None:
    made = sent(call, hiring)
    refused(call("offers.respond", hiring.owner, id=made["id"], decision="accept"), 403, "forbidden")
    someone = ok(call("profile.me", hiring.candidate))
    assert someone["id"] == hiring.candidate.user_id


# --- reads, cancel -------------------------------------------------------------------------------------------


def test_the_candidate_reads_only_what_reached_them(call: Call, admin: Admin, hiring: Team, stranger: User) -> None:
    first = hiring.members[0]
    waiting = offer(call, hiring, [first])
    refused(call("offers.get", hiring.candidate, id=waiting["id"]), 404, "not_found")
    assert ok(call("offers.list", hiring.candidate, application_id=hiring.application["id"]))["data"] == []
    ok(call("offers.approve", first, id=waiting["id"], decision="approved"))
    out = ok(call("offers.send", hiring.owner, id=waiting["id"]))
    seen = ok(call("offers.get", hiring.candidate, id=out["id"]))
    assert set(seen) == CANDIDATE_OFFER_KEYS
    assert seen == {key: value for key, value in out.items() if key in CANDIDATE_OFFER_KEYS}
    assert ok(call("offers.list", hiring.candidate, application_id=hiring.application["id"]))["data"] == [seen]
    refused(call("offers.get", stranger, id=out["id"]), 404, "not_found")
    refused(call("offers.get", admin.user("candidate"), id=out["id"]), 404, "not_found")


def test_cancelling_a_sent_offer_tells_the_candidate(call: Call, admin: Admin, smtp: SmtpServer, hiring: Team) -> None:
    made = sent(call, hiring)
    cancelled = ok(call("offers.cancel", hiring.owner, id=made["id"]))
    assert cancelled["status"] == "cancelled"
    [mail] = mails(smtp, hiring.candidate.email, "An offer was withdrawn")
    assert made["title"] in mail.text
    error = refused(call("offers.cancel", hiring.owner, id=made["id"]), 409, "invalid_transition")
    assert error["details"] == {"from": "cancelled", "to": "cancelled"}
    # A withdrawn offer is no longer the candidate's to read, nor to answer.
    refused(call("offers.respond", hiring.candidate, id=made["id"], decision="accept"), 404, "not_found")


def test_a_decision_withdraws_the_open_offer(call: Call, admin: Admin, hiring: Team) -> None:
    made = offer(call, hiring)
    ok(call("applications.update_status", hiring.owner, id=hiring.application["id"], status="rejected"))
    assert ok(call("offers.get", hiring.owner, id=made["id"]))["status"] == "cancelled"
    assert offer_events(admin, hiring.application["id"])[-1][0] == "offer.cancelled"
