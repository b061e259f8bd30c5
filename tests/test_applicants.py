"""Who applied, and who is told (docs/interviews.md): the job's account reads the person behind an application
(API, changes feed, `application.created`), its members hear of each new application unless they turned it off,
the candidate hears of a rejection or a hire in courteous words with nothing internal, and erasure takes the
person out of all of it; the export holds the loop's records."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.loop import Team, book, mails, past_slot, slot, team
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, Call, eventually, ok

NEW = "A new application"


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(database, smtp, tmp_path_factory.mktemp("data"))


@pytest.fixture
def hiring(admin: Admin, call: Call) -> Team:
    return team(admin, call)


def test_the_job_account_reads_who_applied(call: Call, admin: Admin) -> None:
    hiring = team(admin, call)
    ok(call("profile.update", hiring.candidate, display_name="Ada Lovelace", headline="Analyst", location="London"))
    person = {
        "id": hiring.candidate.user_id,
        "display_name": "Ada Lovelace",
        "email": hiring.candidate.email,
        "headline": "Analyst",
        "location": "London",
    }
    assert ok(call("applications.get", hiring.owner, id=hiring.application["id"]))["candidate"] == person
    [listed] = ok(call("applications.list", hiring.owner, job_id=hiring.job["id"]))["data"]
    assert listed["candidate"] == person

    def in_the_feed() -> list[dict[str, Any]]:  # a change shows once no older transaction still runs
        feed = ok(call("applications.changes", hiring.members[0]))
        return [item["candidate"] for item in feed["data"] if item["id"] == hiring.application["id"]]

    assert eventually(in_the_feed, "the application in the changes feed") == [person]
    own = ok(call("applications.get", hiring.candidate, id=hiring.application["id"]))
    assert "candidate" not in own


def test_members_hear_of_each_new_application(call: Call, smtp: SmtpServer, admin: Admin) -> None:
    hiring = team(admin, call)
    quiet = hiring.members[1]
    assert ok(call("profile.me", quiet))["notify_new_applications"] is True
    assert ok(call("profile.update", quiet, notify_new_applications=False))["notify_new_applications"] is False
    applicant = admin.user("candidate")
    ok(call("profile.update", applicant, display_name="Grace Hopper"))
    made = ok(call("applications.create", applicant, job_id=hiring.job["id"]))
    for member in (hiring.owner, hiring.members[0]):
        latest = mails(smtp, member.email, NEW, count=2)[-1]
        assert "Grace Hopper" in latest.text and hiring.job["title"] in latest.text
        assert f"/panel/applications/{made['id']}" in latest.text
    rows = admin.sql(
        "SELECT count(*) AS n FROM mail_messages WHERE kind = 'application_new' AND recipient = %(email)s",
        {"email": quiet.email},
    )
    assert rows[0]["n"] == 1, "only the application made before they turned it off"


def test_a_rejected_candidate_is_told_courteously_and_nothing_internal(
    call: Call, smtp: SmtpServer, hiring: Team
) -> None:
    application = hiring.application["id"]
    ok(call("applications.review", hiring.owner, id=application, rating=1, notes="Weak on SQL, arrogant."))
    ok(call("applications.update_status", hiring.owner, id=application, status="rejected"))
    [mail] = mails(smtp, hiring.candidate.email, "An update on your application")
    text = mail.text + mail.html
    assert hiring.job["title"] in text and "Acme" in text
    assert "Weak on SQL" not in text and "arrogant" not in text and "rating" not in text.lower()
    assert mail.message["Subject"] == "An update on your application"


def test_a_hired_candidate_is_told(call: Call, smtp: SmtpServer, hiring: Team) -> None:
    ok(call("applications.update_status", hiring.owner, id=hiring.application["id"], status="hired"))
    [mail] = mails(smtp, hiring.candidate.email, "Your application was successful")
    assert hiring.job["title"] in mail.text


def test_other_moves_say_nothing_to_the_candidate(call: Call, admin: Admin, hiring: Team) -> None:
    ok(call("applications.update_status", hiring.owner, id=hiring.application["id"], status="offered"))
    ok(call("applications.withdraw", hiring.candidate, id=hiring.application["id"]))
    rows = admin.sql(
        "SELECT kind FROM mail_messages WHERE recipient = %(email)s AND kind LIKE 'application_%%'",
        {"email": hiring.candidate.email},
    )
    assert rows == []


def test_the_export_holds_the_loop(call: Call, hiring: Team) -> None:
    interviewer = hiring.members[0]
    over = book(call, hiring.owner, hiring.application, [interviewer], past_slot())
    card = ok(call("scorecards.submit", interviewer, interview_id=over["id"], recommendation="yes", notes="Good."))
    body = {
        "application_id": hiring.application["id"],
        "title": "Engineer",
        "start_date": "2027-02-01",
        "salary": {"amount": "5000", "currency": "TRY", "period": "month"},
        "expires_at": "2099-01-01T00:00:00Z",
        "notes": "Internal: top of band.",
    }
    offer = ok(call("offers.create", hiring.owner, **body))
    ok(call("offers.send", hiring.owner, id=offer["id"]))
    mine = ok(call("profile.export", hiring.candidate))
    assert [one["id"] for one in mine["interviews"]] == [over["id"]] and mine["interviews"][0]["role"] == "candidate"
    assert [one["id"] for one in mine["offers"]] == [offer["id"]]
    assert "top of band" not in json.dumps(mine) and mine["scorecards"] == []
    theirs = ok(call("profile.export", interviewer))
    assert [one["id"] for one in theirs["scorecards"]] == [card["id"]]
    assert theirs["interviews"][0]["role"] == "interviewer"


def test_erasure_takes_the_person_out_of_the_loop(call: Call, admin: Admin, hiring: Team) -> None:
    book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    ok(call("profile.delete", hiring.candidate, confirm=hiring.candidate.email))
    seen = ok(call("applications.get", hiring.owner, id=hiring.application["id"]))
    assert seen["candidate"] == {
        "id": hiring.candidate.user_id,
        "display_name": None,
        "email": None,
        "headline": None,
        "location": None,
    }
    assert ok(call("interviews.list", hiring.owner, application_id=hiring.application["id"]))["data"] == []
    bodies = admin.sql(
        """SELECT body FROM events WHERE kind = 'application.created'
           AND account_ids @> ARRAY[%(account)s::uuid]""",
        {"account": hiring.candidate.account_id},
    )
    assert bodies and all(bytes(row["body"]) == b"" for row in bodies)
    named = admin.sql(
        "SELECT id FROM events WHERE position(convert_to(%(email)s, 'UTF8') IN body) > 0",
        {"email": hiring.candidate.email},
    )
    assert named == []
