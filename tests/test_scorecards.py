"""Scorecards (docs/interviews.md): a job's attributes, an interviewer's feedback given once from the interview's
start, the no-peeking rule whichever way one reads (and whatever credential acts for the reader), and the
reminders of a scorecard owed."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tests.loop import Team, book, mails, past_slot, slot, team
from tests.smtp import SmtpServer, mailing_settings
from tests.support import TIMESTAMP, Admin, Call, User, ok, refused

SCORECARD_KEYS = {
    "id",
    "interview_id",
    "application_id",
    "interviewer_id",
    "recommendation",
    "ratings",
    "notes",
    "submitted_at",
}
HIDDEN_KEYS = {"id", "interview_id", "interviewer_id", "submitted_at"}
REMINDER = "Reminder: your scorecard is waiting"


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    # Reminders a second after the end and every second after: their whole course fits in a test.
    return mailing_settings(
        database,
        smtp,
        tmp_path_factory.mktemp("data"),
        SCORECARD_REMINDER_SECONDS="1",
        SCORECARD_REMINDER_REPEAT_SECONDS="1",
    )


@pytest.fixture
def hiring(admin: Admin, call: Call) -> Team:
    return team(admin, call)


def held(call: Call, hiring: Team, interviewers: list[User] | None = None) -> dict[str, Any]:
    """An interview of the team that is over: it takes scorecards."""
    return book(call, hiring.owner, hiring.application, interviewers or hiring.members, past_slot())


# --- a job's attributes --------------------------------------------------------------------------------------


def test_a_job_names_its_scorecard_attributes(call: Call, employer: User) -> None:
    made = ok(call("jobs.create", employer, title="Engineer", company="Acme", location="Izmir"))
    assert made["scorecard_attributes"] == []
    named = ok(call("jobs.update", employer, id=made["id"], scorecard_attributes=["SQL", "System design"]))
    assert named["scorecard_attributes"] == ["SQL", "System design"]
    assert ok(call("jobs.get", employer, id=made["id"]))["scorecard_attributes"] == ["SQL", "System design"]


@pytest.mark.parametrize(
    "attributes",
    [[f"attribute {n}" for n in range(21)], ["SQL", "sql"], [""], ["x" * 81], ["two\nlines"], ["   "]],
)
def test_attributes_that_cannot_be_are_422(call: Call, employer: User, attributes: list[str]) -> None:
    answer = call(
        "jobs.create", employer, title="Engineer", company="Acme", location="Izmir", scorecard_attributes=attributes
    )
    error = refused(answer, 422, "invalid_params")
    assert error["details"]["errors"][0]["field"].startswith("scorecard_attributes")


# --- scorecards.submit ---------------------------------------------------------------------------------------


def test_an_interviewer_submits_once(call: Call, admin: Admin, hiring: Team) -> None:
    interview = held(call, hiring)
    me = hiring.members[0]
    ratings = [{"attribute": "SQL", "rating": 4, "note": "Window functions, unprompted."}]
    made = ok(
        call(
            "scorecards.submit",
            me,
            interview_id=interview["id"],
            recommendation="strong_yes",
            ratings=ratings,
            notes="Hire.",
        )
    )
    assert set(made) == SCORECARD_KEYS
    assert made["interviewer_id"] == me.user_id and made["application_id"] == hiring.application["id"]
    assert (made["recommendation"], made["notes"]) == ("strong_yes", "Hire.")
    assert made["ratings"] == ratings and TIMESTAMP.match(made["submitted_at"])
    again = call("scorecards.submit", me, interview_id=interview["id"], recommendation="no")
    refused(again, 409, "conflict")
    [row] = admin.sql(
        """SELECT account_ids::text[] AS account_ids, body FROM events WHERE kind = 'scorecard.submitted'
           AND convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'scorecard_id' = %(id)s""",
        {"id": made["id"]},
    )
    assert row["account_ids"] == [hiring.owner.account_id]
    assert json.loads(bytes(row["body"]))["data"] == {
        "scorecard_id": made["id"],
        "interview_id": interview["id"],
        "application_id": hiring.application["id"],
        "job_id": hiring.job["id"],
        "interviewer_id": me.user_id,
    }


def test_only_an_interviewer_of_the_interview_submits(call: Call, admin: Admin, hiring: Team, stranger: User) -> None:
    interview = held(call, hiring, hiring.members[:1])
    refused(
        call("scorecards.submit", hiring.members[1], interview_id=interview["id"], recommendation="yes"),
        403,
        "forbidden",
    )
    refused(
        call("scorecards.submit", hiring.owner, interview_id=interview["id"], recommendation="yes"), 403, "forbidden"
    )
    refused(
        call("scorecards.submit", hiring.candidate, interview_id=interview["id"], recommendation="yes"),
        403,
        "forbidden",
    )
    refused(call("scorecards.submit", stranger, interview_id=interview["id"], recommendation="yes"), 404, "not_found")


def test_not_before_the_start_nor_on_a_cancelled_interview(call: Call, hiring: Team) -> None:
    me = hiring.members[0]
    coming = book(call, hiring.owner, hiring.application, [me], slot())
    error = refused(call("scorecards.submit", me, interview_id=coming["id"], recommendation="yes"), 409, "conflict")
    assert error["details"] == {"starts_at": coming["starts_at"]}
    ok(call("interviews.cancel", hiring.owner, id=coming["id"]))
    error = refused(call("scorecards.submit", me, interview_id=coming["id"], recommendation="yes"), 409, "conflict")
    assert error["details"] == {"interview_status": "cancelled"}


def test_ratings_name_the_jobs_attributes(call: Call, hiring: Team) -> None:
    interview = held(call, hiring)
    me = hiring.members[0]
    for ratings in (
        [{"attribute": "Charm", "rating": 3}],
        [{"attribute": "SQL", "rating": 5}],
        [{"attribute": "SQL", "rating": 2}] * 2,
    ):
        answer = call("scorecards.submit", me, interview_id=interview["id"], recommendation="yes", ratings=ratings)
        error = refused(answer, 422, "invalid_params")
        assert error["details"]["errors"][0]["field"].startswith("ratings")
    refused(call("scorecards.submit", me, interview_id=interview["id"], recommendation="maybe"), 422, "invalid_params")


def test_a_cancelled_interview_keeps_its_scorecards(call: Call, hiring: Team) -> None:
    me = hiring.members[0]
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    started = book(
        call, hiring.owner, hiring.application, hiring.members, slot(60, start=now - dt.timedelta(minutes=30))
    )
    assert started["status"] == "scheduled"
    made = ok(call("scorecards.submit", me, interview_id=started["id"], recommendation="yes"))
    ok(call("interviews.cancel", hiring.owner, id=started["id"]))
    assert ok(call("scorecards.get", hiring.owner, id=made["id"]))["recommendation"] == "yes"


# --- no peeking ----------------------------------------------------------------------------------------------


def test_an_interviewer_who_owes_theirs_sees_only_that_others_submitted(call: Call, admin: Admin, hiring: Team) -> None:
    first, second = hiring.members
    interview = held(call, hiring)
    theirs = ok(call("scorecards.submit", first, interview_id=interview["id"], recommendation="no", notes="Secret."))
    for listed in (
        ok(call("scorecards.list", second, application_id=hiring.application["id"]))["data"],
        ok(call("scorecards.list", second, interview_id=interview["id"]))["data"],
        [ok(call("scorecards.get", second, id=theirs["id"]))],
    ):
        assert listed == [{key: theirs[key] for key in HIDDEN_KEYS}]
    everything = json.dumps(ok(call("applications.get", second, id=hiring.application["id"])))
    assert "Secret." not in everything and '"no"' not in everything
    key = admin.api_key(second, scopes="read:applications")["key"]
    assert ok(call("scorecards.get", key, id=theirs["id"])) == {key: theirs[key] for key in HIDDEN_KEYS}
    mine = ok(call("scorecards.submit", second, interview_id=interview["id"], recommendation="yes"))
    assert ok(call("scorecards.get", second, id=theirs["id"])) == theirs
    assert ok(call("scorecards.list", second, application_id=hiring.application["id"]))["data"] == [theirs, mine]


def test_the_list_names_one_application_or_one_interview(call: Call, hiring: Team) -> None:
    """Exactly one of the two: what the document's query parameters cannot say (tests/schemathesis_hooks.py)."""
    interview = held(call, hiring)
    both = {"application_id": hiring.application["id"], "interview_id": interview["id"]}
    for params in ({}, both, {"application_id": None, "interview_id": None}):
        error = refused(call("scorecards.list", hiring.owner, **params), 422, "invalid_params")
        assert error["details"]["errors"][0]["message"] == "Give one of application_id and interview_id."


def test_an_interview_still_to_come_holds_its_interviewer_too(call: Call, hiring: Team) -> None:
    first, second = hiring.members
    interview = held(call, hiring, [first])
    theirs = ok(call("scorecards.submit", first, interview_id=interview["id"], recommendation="yes", notes="Strong."))
    coming = book(call, hiring.owner, hiring.application, [second], slot())
    assert ok(call("scorecards.get", second, id=theirs["id"])) == {key: theirs[key] for key in HIDDEN_KEYS}
    ok(call("interviews.cancel", hiring.owner, id=coming["id"]))  # no longer owed: a cancelled interview takes none
    assert ok(call("scorecards.get", second, id=theirs["id"])) == theirs


def test_other_members_and_admins_read_them_whole(call: Call, hiring: Team, operator: User) -> None:
    first = hiring.members[0]
    interview = held(call, hiring, [first])
    theirs = ok(call("scorecards.submit", first, interview_id=interview["id"], recommendation="yes", notes="Strong."))
    assert ok(call("scorecards.get", hiring.owner, id=theirs["id"])) == theirs
    assert ok(call("scorecards.list", operator, application_id=hiring.application["id"]))["data"] == [theirs]
    assert ok(call("scorecards.list", first, application_id=hiring.application["id"]))["total"] == 1


def test_the_candidate_gets_404_always(call: Call, hiring: Team, stranger: User) -> None:
    first = hiring.members[0]
    interview = held(call, hiring, [first])
    theirs = ok(call("scorecards.submit", first, interview_id=interview["id"], recommendation="yes"))
    refused(call("scorecards.get", hiring.candidate, id=theirs["id"]), 404, "not_found")
    refused(call("scorecards.list", hiring.candidate, application_id=hiring.application["id"]), 404, "not_found")
    refused(call("scorecards.list", hiring.candidate, interview_id=interview["id"]), 404, "not_found")
    refused(call("scorecards.get", stranger, id=theirs["id"]), 404, "not_found")
    refused(call("scorecards.list", hiring.owner), 422, "invalid_params")


# --- reminders -----------------------------------------------------------------------------------------------


def test_reminders_until_submitted(call: Call, admin: Admin, smtp: SmtpServer, hiring: Team) -> None:
    first, second = hiring.members
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    interview = book(
        call, hiring.owner, hiring.application, [first, second], slot(30, start=now - dt.timedelta(minutes=30))
    )
    mails(smtp, first.email, REMINDER, count=2)
    ok(call("scorecards.submit", first, interview_id=interview["id"], recommendation="yes"))
    reminders = mails(smtp, second.email, REMINDER, count=5)
    reminder = reminders[0]
    assert interview["title"] in reminder.text
    assert f"/panel/applications/{hiring.application['id']}" in reminder.text
    # Nothing more is scheduled: the one who submitted is done, the other had their five.
    rows = admin.sql(
        """SELECT user_id::text AS user_id, reminders_sent, next_reminder_at FROM interview_interviewers
           WHERE interview_id = %(id)s::uuid""",
        {"id": interview["id"]},
    )
    state = {row["user_id"]: (row["reminders_sent"], row["next_reminder_at"]) for row in rows}
    assert state[second.user_id] == (5, None)
    assert state[first.user_id][1] is None and state[first.user_id][0] == len(mails(smtp, first.email, REMINDER))


def test_no_reminder_before_the_end_or_for_a_cancelled_interview(call: Call, admin: Admin, hiring: Team) -> None:
    first = hiring.members[0]
    coming = book(call, hiring.owner, hiring.application, [first], slot())
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    ended = book(
        call, hiring.owner, hiring.application, [hiring.members[1]], slot(30, start=now - dt.timedelta(minutes=40))
    )
    ok(call("interviews.cancel", hiring.owner, id=coming["id"]))
    rows = admin.sql(
        """SELECT interview_id::text AS interview_id, next_reminder_at FROM interview_interviewers
           WHERE interview_id = ANY(%(ids)s::uuid[])""",
        {"ids": [coming["id"], ended["id"]]},
    )
    due = {row["interview_id"]: row["next_reminder_at"] for row in rows}
    assert due[coming["id"]] is None
    assert due[ended["id"]] is not None
