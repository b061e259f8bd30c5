"""Interviews (docs/interviews.md): booking, moving and calling off an interview of an application, with the
checks of its time and people, the double bookings the database refuses (also when booked at once), the status
as of the moment read, the reads of each reader, and the pipeline moves around it."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
from typing import Any

import httpx
import pytest

from tests.loop import ZONE, Team, book, past_slot, slot, team, utc
from tests.support import TIMESTAMP, Admin, Call, LiveServer, User, ok, refused

INTERVIEW_KEYS = {
    "id",
    "application_id",
    "job_id",
    "candidate_id",
    "title",
    "starts_at",
    "ends_at",
    "time_zone",
    "location",
    "video_url",
    "status",
    "interviewers",
    "sequence",
    "created_at",
    "updated_at",
}
PAGE_KEYS = {"data", "total", "page", "per_page", "next_cursor"}


@pytest.fixture
def hiring(admin: Admin, call: Call) -> Team:
    return team(admin, call)


def events(admin: Admin, kind: str, interview_id: str) -> list[dict[str, Any]]:
    rows = admin.sql(
        """SELECT account_ids::text[] AS account_ids, body FROM events
           WHERE kind = %(kind)s AND convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'interview_id' = %(id)s
           ORDER BY seq""",
        {"kind": kind, "id": interview_id},
    )
    return [{"account_ids": row["account_ids"], **json.loads(bytes(row["body"]))} for row in rows]


# --- interviews.create ---------------------------------------------------------------------------------------


def test_an_interview_is_booked_with_its_exact_shape(call: Call, admin: Admin, hiring: Team) -> None:
    first, second = hiring.members
    times = slot()
    made = book(
        call,
        hiring.owner,
        hiring.application,
        [first, second],
        times,
        title="Technical interview",
        location="Room 4",
        video_url="https://meet.example.com/abc",
    )
    assert set(made) == INTERVIEW_KEYS
    assert made["application_id"] == hiring.application["id"] and made["job_id"] == hiring.job["id"]
    assert made["candidate_id"] == hiring.candidate.user_id
    assert (made["starts_at"], made["ends_at"]) == (utc(times[0]), utc(times[1]))
    assert made["time_zone"] == ZONE and made["title"] == "Technical interview"
    assert (made["location"], made["video_url"]) == ("Room 4", "https://meet.example.com/abc")
    assert made["status"] == "scheduled" and made["sequence"] == 0
    assert made["interviewers"] == [
        {"user_id": first.user_id, "display_name": None, "scorecard_submitted": False},
        {"user_id": second.user_id, "display_name": None, "scorecard_submitted": False},
    ]
    assert TIMESTAMP.match(made["created_at"]) and TIMESTAMP.match(made["updated_at"])
    assert ok(call("interviews.get", hiring.owner, id=made["id"])) == made
    [event] = events(admin, "interview.scheduled", made["id"])
    assert event["account_ids"] == [hiring.owner.account_id]
    assert event["data"] == {
        "interview_id": made["id"],
        "application_id": hiring.application["id"],
        "job_id": hiring.job["id"],
        "starts_at": utc(times[0]),
        "ends_at": utc(times[1]),
        "interviewer_ids": [first.user_id, second.user_id],
    }


def test_booking_moves_an_early_application_to_interview_scheduled(call: Call, admin: Admin, hiring: Team) -> None:
    book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    application = ok(call("applications.get", hiring.owner, id=hiring.application["id"]))
    assert application["status"] == "interview_scheduled"
    rows = admin.sql(
        """SELECT convert_from(body, 'UTF8')::jsonb -> 'data' AS data FROM events
           WHERE kind = 'application.status_changed'
             AND convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'application_id' = %(id)s""",
        {"id": hiring.application["id"]},
    )
    assert [(row["data"]["old_status"], row["data"]["new_status"]) for row in rows] == [
        ("pending", "interview_scheduled")
    ]
    book(call, hiring.owner, hiring.application, hiring.members[:1], slot())  # a second round moves nothing
    assert ok(call("applications.get", hiring.owner, id=hiring.application["id"]))["status"] == "interview_scheduled"


def test_a_booking_later_in_the_pipeline_leaves_the_application_where_it_is(call: Call, hiring: Team) -> None:
    ok(call("applications.update_status", hiring.owner, id=hiring.application["id"], status="offered"))
    book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    assert ok(call("applications.get", hiring.owner, id=hiring.application["id"]))["status"] == "offered"


def test_the_title_defaults_to_the_job(call: Call, hiring: Team) -> None:
    made = book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    assert made["title"] == f"Interview for {hiring.job['title']}"
    assert made["location"] is None and made["video_url"] is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ends_at": "starts_at"}, "ends_at"),
        ({"minutes": -30}, "ends_at"),
        ({"minutes": 8 * 60 + 1}, "ends_at"),
        ({"time_zone": "Mars/Olympus_Mons"}, "time_zone"),
        ({"time_zone": "../etc/passwd"}, "time_zone"),
        ({"starts_at": "next tuesday"}, "starts_at"),
        ({"starts_at": "2027-01-05T10:00:00"}, "starts_at"),
        ({"fraction": True}, "starts_at"),
    ],
)
def test_times_that_do_not_make_an_interview_are_422(
    call: Call, hiring: Team, change: dict[str, Any], field: str
) -> None:
    minutes = change.get("minutes", 60)
    starts_at, ends_at = slot(abs(minutes))
    if minutes < 0:
        starts_at, ends_at = ends_at, starts_at
    if change.get("ends_at") == "starts_at":
        ends_at = starts_at
    if change.get("fraction"):
        starts_at = starts_at.replace(":00+", ":00.250+")
    body = {
        "application_id": hiring.application["id"],
        "starts_at": change.get("starts_at", starts_at),
        "ends_at": ends_at,
        "time_zone": change.get("time_zone", ZONE),
        "interviewer_ids": [hiring.members[0].user_id],
    }
    error = refused(call("interviews.create", hiring.owner, **body), 422, "invalid_params")
    assert field in [entry["field"] for entry in error["details"]["errors"]]


def test_exactly_eight_hours_is_fine(call: Call, hiring: Team) -> None:
    made = book(call, hiring.owner, hiring.application, hiring.members[:1], slot(8 * 60))
    assert made["status"] == "scheduled"


def test_interviewers_must_be_distinct_members_of_the_jobs_account(
    call: Call, admin: Admin, hiring: Team, stranger: User
) -> None:
    member = hiring.members[0].user_id
    outsiders = [[stranger.user_id], [hiring.candidate.user_id], ["not-an-id"], [member, member], [], [member] * 11]
    for ids in outsiders:
        starts_at, ends_at = slot()
        answer = call(
            "interviews.create",
            hiring.owner,
            application_id=hiring.application["id"],
            starts_at=starts_at,
            ends_at=ends_at,
            time_zone=ZONE,
            interviewer_ids=ids,
        )
        error = refused(answer, 422, "invalid_params")
        assert [entry["field"] for entry in error["details"]["errors"]] == ["interviewer_ids"], ids
    assert (
        admin.sql(
            "SELECT count(*) AS n FROM interviews WHERE application_id = %(id)s::uuid", {"id": hiring.application["id"]}
        )[0]["n"]
        == 0
    )


def test_a_decided_application_takes_no_interview(call: Call, hiring: Team) -> None:
    ok(call("applications.update_status", hiring.owner, id=hiring.application["id"], status="rejected"))
    starts_at, ends_at = slot()
    answer = call(
        "interviews.create",
        hiring.owner,
        application_id=hiring.application["id"],
        starts_at=starts_at,
        ends_at=ends_at,
        time_zone=ZONE,
        interviewer_ids=[hiring.members[0].user_id],
    )
    error = refused(answer, 409, "invalid_transition")
    assert error["details"] == {"from": "rejected", "to": "interview_scheduled"}


def test_only_the_jobs_account_books(call: Call, hiring: Team, stranger: User) -> None:
    starts_at, ends_at = slot()
    body = {
        "application_id": hiring.application["id"],
        "starts_at": starts_at,
        "ends_at": ends_at,
        "time_zone": ZONE,
        "interviewer_ids": [hiring.members[0].user_id],
    }
    refused(call("interviews.create", stranger, **body), 404, "not_found")
    refused(call("interviews.create", hiring.candidate, **body), 403, "forbidden")
    refused(call("interviews.create", hiring.owner, **{**body, "application_id": "nope"}), 404, "not_found")


# --- double bookings -----------------------------------------------------------------------------------------


def test_an_interviewer_is_never_booked_twice_at_once(call: Call, admin: Admin, hiring: Team) -> None:
    other = team(admin, call)
    busy = hiring.members[0]
    starts_at, ends_at = slot()
    first = book(call, hiring.owner, hiring.application, [busy], (starts_at, ends_at))
    another = ok(call("applications.create", other.candidate, job_id=hiring.job["id"]))
    half_hour = dt.timedelta(minutes=30)
    overlapping = (
        (dt.datetime.fromisoformat(starts_at) + half_hour).isoformat(),
        (dt.datetime.fromisoformat(ends_at) + half_hour).isoformat(),
    )
    answer = call(
        "interviews.create",
        hiring.owner,
        application_id=another["id"],
        starts_at=overlapping[0],
        ends_at=overlapping[1],
        time_zone=ZONE,
        interviewer_ids=[hiring.members[1].user_id, busy.user_id],
    )
    error = refused(answer, 409, "conflict")
    assert error["details"] == {
        "interview_id": first["id"],
        "user_id": busy.user_id,
        "starts_at": first["starts_at"],
        "ends_at": first["ends_at"],
    }
    # Back to back is fine: the ranges are half-open.
    after = (ends_at, (dt.datetime.fromisoformat(ends_at) + dt.timedelta(hours=1)).isoformat())
    book(call, hiring.owner, another, [busy], after)


def test_a_candidate_is_never_booked_twice_at_once(call: Call, hiring: Team) -> None:
    times = slot()
    first = book(call, hiring.owner, hiring.application, hiring.members[:1], times)
    answer = call(
        "interviews.create",
        hiring.owner,
        application_id=hiring.application["id"],
        starts_at=times[0],
        ends_at=times[1],
        time_zone=ZONE,
        interviewer_ids=[hiring.members[1].user_id],
    )
    error = refused(answer, 409, "conflict")
    assert error["details"]["interview_id"] == first["id"]
    assert error["details"]["user_id"] == hiring.candidate.user_id
    assert error["message"].startswith("The candidate already has an interview")


def test_a_cancelled_interview_frees_its_time(call: Call, hiring: Team) -> None:
    times = slot()
    first = book(call, hiring.owner, hiring.application, hiring.members[:1], times)
    ok(call("interviews.cancel", hiring.owner, id=first["id"]))
    again = book(call, hiring.owner, hiring.application, hiring.members[:1], times)
    assert again["status"] == "scheduled"


def test_of_twenty_bookings_at_once_exactly_one_succeeds(live: LiveServer, admin: Admin, call: Call) -> None:
    owner = admin.user("employer")
    interviewer = admin.user("employer", account_id=owner.account_id)
    job = ok(call("jobs.create", owner, title="Site reliability engineer", company="Acme", location="Izmir"))
    ok(call("jobs.publish", owner, id=job["id"]))
    applications = [ok(call("applications.create", admin.user("candidate"), job_id=job["id"])) for _ in range(20)]
    starts_at, ends_at = slot()

    def attempt(application: dict[str, Any]) -> httpx.Response:
        with live.client() as http:
            return http.post(
                "/v1/interviews.create",
                headers=owner.auth,
                json={
                    "application_id": application["id"],
                    "starts_at": starts_at,
                    "ends_at": ends_at,
                    "time_zone": ZONE,
                    "interviewer_ids": [interviewer.user_id],
                },
            )

    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(attempt, applications))
    assert sorted(answer.status_code for answer in answers) == [200] + [409] * 19, [a.text for a in answers]
    winner = next(answer.json()["result"] for answer in answers if answer.status_code == 200)
    for answer in answers:
        if answer.status_code == 409:
            assert answer.json()["error"]["details"]["interview_id"] == winner["id"]
    rows = admin.sql(
        "SELECT count(*) AS n FROM interview_interviewers WHERE user_id = %(id)s::uuid AND NOT cancelled",
        {"id": interviewer.user_id},
    )
    assert rows[0]["n"] == 1


def test_another_accounts_interview_is_not_named(call: Call, admin: Admin, hiring: Team) -> None:
    other = team(admin, call)
    applied_there = ok(call("applications.create", hiring.candidate, job_id=other.job["id"]))
    times = slot()
    book(call, other.owner, applied_there, other.members[:1], times)
    answer = call(
        "interviews.create",
        hiring.owner,
        application_id=hiring.application["id"],
        starts_at=times[0],
        ends_at=times[1],
        time_zone=ZONE,
        interviewer_ids=[hiring.members[0].user_id],
    )
    error = refused(answer, 409, "conflict")
    assert error["details"] == {
        "interview_id": None,
        "user_id": hiring.candidate.user_id,
        "starts_at": utc(times[0]),
        "ends_at": utc(times[1]),
    }


# --- interviews.update ---------------------------------------------------------------------------------------


def test_moving_an_interview_raises_its_sequence_and_says_so(call: Call, admin: Admin, hiring: Team) -> None:
    made = book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    later = slot(90)
    moved = ok(call("interviews.update", hiring.owner, id=made["id"], starts_at=later[0], ends_at=later[1]))
    assert (moved["starts_at"], moved["ends_at"], moved["sequence"]) == (utc(later[0]), utc(later[1]), 1)
    [event] = events(admin, "interview.rescheduled", made["id"])
    assert event["data"] == {
        "interview_id": made["id"],
        "application_id": hiring.application["id"],
        "job_id": hiring.job["id"],
        "old_starts_at": made["starts_at"],
        "old_ends_at": made["ends_at"],
        "starts_at": moved["starts_at"],
        "ends_at": moved["ends_at"],
    }
    assert events(admin, "interview.updated", made["id"]) == []


def test_other_changes_are_an_update(call: Call, admin: Admin, hiring: Team) -> None:
    first, second = hiring.members
    made = book(call, hiring.owner, hiring.application, [first], slot())
    changed = ok(
        call("interviews.update", hiring.owner, id=made["id"], interviewer_ids=[second.user_id], location="Room 9")
    )
    assert [one["user_id"] for one in changed["interviewers"]] == [second.user_id]
    assert changed["location"] == "Room 9" and changed["sequence"] == 1
    [event] = events(admin, "interview.updated", made["id"])
    assert event["data"]["interviewer_ids"] == [second.user_id]
    assert events(admin, "interview.rescheduled", made["id"]) == []
    same = ok(call("interviews.update", hiring.owner, id=made["id"], location="Room 9"))
    assert same["sequence"] == 1, "a change that changes nothing is no change"


def test_a_move_onto_another_interview_is_refused(call: Call, admin: Admin, hiring: Team) -> None:
    busy = hiring.members[0]
    taken = slot()
    other = team(admin, call)
    elsewhere = ok(call("applications.create", other.candidate, job_id=hiring.job["id"]))
    book(call, hiring.owner, elsewhere, [busy], taken)
    made = book(call, hiring.owner, hiring.application, [busy], slot())
    answer = call("interviews.update", hiring.owner, id=made["id"], starts_at=taken[0], ends_at=taken[1])
    assert refused(answer, 409, "conflict")["details"]["user_id"] == busy.user_id
    assert ok(call("interviews.get", hiring.owner, id=made["id"]))["sequence"] == 0


def test_only_a_scheduled_interview_changes(call: Call, hiring: Team) -> None:
    over = book(call, hiring.owner, hiring.application, hiring.members[:1], past_slot())
    assert over["status"] == "awaiting_feedback"
    error = refused(
        call("interviews.update", hiring.owner, id=over["id"], location="Room 1"), 409, "invalid_transition"
    )
    assert error["details"] == {"from": "awaiting_feedback", "to": "scheduled"}
    refused(call("interviews.cancel", hiring.owner, id=over["id"]), 409, "invalid_transition")


def test_update_checks_times_as_create_does(call: Call, hiring: Team) -> None:
    made = book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    nine_hours = (dt.datetime.fromisoformat(made["starts_at"]) + dt.timedelta(hours=9)).isoformat()
    error = refused(call("interviews.update", hiring.owner, id=made["id"], ends_at=nine_hours), 422, "invalid_params")
    assert [entry["field"] for entry in error["details"]["errors"]] == ["ends_at"]


# --- interviews.cancel ---------------------------------------------------------------------------------------


def test_cancelling_an_interview(call: Call, admin: Admin, hiring: Team) -> None:
    made = book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    cancelled = ok(call("interviews.cancel", hiring.owner, id=made["id"], reason="Moved to next week."))
    assert cancelled["status"] == "cancelled" and cancelled["sequence"] == 1
    [event] = events(admin, "interview.cancelled", made["id"])
    assert event["data"] == {
        "interview_id": made["id"],
        "application_id": hiring.application["id"],
        "job_id": hiring.job["id"],
    }
    error = refused(call("interviews.cancel", hiring.owner, id=made["id"]), 409, "invalid_transition")
    assert error["details"] == {"from": "cancelled", "to": "cancelled"}


def test_a_decision_cancels_the_interviews_not_yet_started(call: Call, admin: Admin, hiring: Team) -> None:
    interviewer = hiring.members[0]
    held = book(call, hiring.owner, hiring.application, [interviewer], past_slot())
    coming = book(call, hiring.owner, hiring.application, [interviewer], slot())
    ok(call("applications.update_status", hiring.owner, id=hiring.application["id"], status="rejected"))
    assert ok(call("interviews.get", hiring.owner, id=coming["id"]))["status"] == "cancelled"
    assert ok(call("interviews.get", hiring.owner, id=held["id"]))["status"] == "awaiting_feedback"
    assert len(events(admin, "interview.cancelled", coming["id"])) == 1
    assert events(admin, "interview.cancelled", held["id"]) == []


def test_withdrawing_cancels_the_interviews_not_yet_started(call: Call, hiring: Team) -> None:
    coming = book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    ok(call("applications.withdraw", hiring.candidate, id=hiring.application["id"]))
    assert ok(call("interviews.get", hiring.owner, id=coming["id"]))["status"] == "cancelled"


# --- reads ---------------------------------------------------------------------------------------------------


def test_status_follows_time_and_scorecards(call: Call, hiring: Team) -> None:
    first, second = hiring.members
    over = book(call, hiring.owner, hiring.application, [first, second], past_slot())
    assert over["status"] == "awaiting_feedback"
    ok(call("scorecards.submit", first, interview_id=over["id"], recommendation="yes"))
    assert ok(call("interviews.get", first, id=over["id"]))["status"] == "awaiting_feedback"
    ok(call("scorecards.submit", second, interview_id=over["id"], recommendation="no"))
    done = ok(call("interviews.get", first, id=over["id"]))
    assert done["status"] == "completed"
    assert [one["scorecard_submitted"] for one in done["interviewers"]] == [True, True]


def test_the_candidate_reads_their_interview_without_what_is_the_employers(call: Call, hiring: Team) -> None:
    made = book(call, hiring.owner, hiring.application, hiring.members, slot())
    seen = ok(call("interviews.get", hiring.candidate, id=made["id"]))
    assert set(seen) == INTERVIEW_KEYS
    assert seen["interviewers"] == [{"user_id": one.user_id, "display_name": None} for one in hiring.members]
    listed = ok(call("interviews.list", hiring.candidate))
    assert [one["id"] for one in listed["data"]] == [made["id"]] and listed["data"][0] == seen


def test_nobody_else_sees_an_interview(call: Call, admin: Admin, hiring: Team, stranger: User) -> None:
    made = book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    refused(call("interviews.get", stranger, id=made["id"]), 404, "not_found")
    refused(call("interviews.get", admin.user("candidate"), id=made["id"]), 404, "not_found")
    refused(call("interviews.get", hiring.owner, id="123"), 404, "not_found")
    assert ok(call("interviews.list", stranger, application_id=hiring.application["id"]))["data"] == []
    assert ok(call("interviews.get", hiring.members[1], id=made["id"]))["id"] == made["id"]


def test_an_interviewers_week_in_order_a_page_at_a_time(call: Call, admin: Admin) -> None:
    owner = admin.user("employer")
    me = admin.user("employer", account_id=owner.account_id)
    job = ok(call("jobs.create", owner, title="Analyst", company="Acme", location="Izmir"))
    ok(call("jobs.publish", owner, id=job["id"]))
    monday = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(days=400)
    made = []
    for day in (3, 0, 5, 1, 9):  # the ninth day is outside the week
        application = ok(call("applications.create", admin.user("candidate"), job_id=job["id"]))
        start = monday + dt.timedelta(days=day, hours=9)
        made.append((day, book(call, owner, application, [me], slot(start=start))))
    week = {"interviewer_id": "me", "from": monday.isoformat(), "to": (monday + dt.timedelta(days=7)).isoformat()}
    first = ok(call("interviews.list", me, per_page=2, **week))
    assert set(first) == PAGE_KEYS and first["total"] == 4 and first["page"] == 1 and first["per_page"] == 2
    second = ok(call("interviews.list", me, per_page=2, cursor=first["next_cursor"], **week))
    assert second["page"] == 2 and second["next_cursor"] is None and second["total"] == 4
    expected = [interview["id"] for day, interview in sorted(made) if day < 7]
    assert [one["id"] for one in first["data"] + second["data"]] == expected
    by_id = ok(call("interviews.list", owner, **{**week, "interviewer_id": me.user_id}))
    assert [one["id"] for one in by_id["data"]] == expected
    refused(call("interviews.list", me, cursor=first["next_cursor"], interviewer_id="me"), 422, "invalid_params")
    refused(call("interviews.list", me, cursor="garbage", **week), 422, "invalid_params")


def test_lists_filter_by_job_application_and_status(call: Call, hiring: Team) -> None:
    over = book(call, hiring.owner, hiring.application, hiring.members[:1], past_slot())
    coming = book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    by_job = ok(call("interviews.list", hiring.owner, job_id=hiring.job["id"]))
    assert [one["id"] for one in by_job["data"]] == [over["id"], coming["id"]]
    scheduled = ok(call("interviews.list", hiring.owner, application_id=hiring.application["id"], status="scheduled"))
    assert [one["id"] for one in scheduled["data"]] == [coming["id"]]
    waiting = ok(call("interviews.list", hiring.owner, job_id=hiring.job["id"], status="awaiting_feedback"))
    assert [one["id"] for one in waiting["data"]] == [over["id"]]
    refused(call("interviews.list", hiring.owner, status="postponed"), 422, "invalid_params")
