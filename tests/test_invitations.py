"""Invitations that calendars understand (docs/interviews.md): one message to each person on an interview, its
`text/calendar` part (RFC 6047) parsed back with a standard iCalendar parser — the method, a UID kept for life,
a SEQUENCE that grows, the wall time with its zone, exactly the API's instants — and the private calendar feed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import icalendar
import pytest

from tests.loop import Team, book, calendar_of, calendar_part, event_of, mails, slot, team
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, Call, ok, refused

MAIL_FROM = "Hire <hello@hire.test>"


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(database, smtp, tmp_path_factory.mktemp("data"), MAIL_FROM=MAIL_FROM)


@pytest.fixture
def hiring(admin: Admin, call: Call) -> Team:
    return team(admin, call)


def instant(event: icalendar.Event, name: str) -> str:
    moment = event.decoded(name)
    assert moment.tzinfo is not None
    return str(moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))


def attendees(event: icalendar.Event) -> list[str]:
    found = event.get("attendee")
    listed = found if isinstance(found, list) else [found]
    return [str(one).removeprefix("mailto:") for one in listed if one is not None]


def test_each_person_gets_one_invitation_of_their_own(call: Call, smtp: SmtpServer, hiring: Team) -> None:
    made = book(
        call,
        hiring.owner,
        hiring.application,
        hiring.members,
        slot(),
        title="Technical interview",
        video_url="https://meet.example.com/xyz",
    )
    for person in [hiring.candidate, *hiring.members]:
        [mail] = mails(smtp, person.email, "Interview invitation")
        assert mail.recipients == [person.email]
        part = calendar_part(mail)
        assert part.get_content_type() == "text/calendar"
        assert part.get_param("method") == "REQUEST" and part.get_content_charset() == "utf-8"
        calendar = calendar_of(mail)
        assert calendar["method"] == "REQUEST"
        event = event_of(calendar)
        assert str(event["uid"]).startswith(made["id"])
        assert int(event["sequence"]) == 0
        assert event["dtstart"].params["TZID"] == "Europe/Istanbul"
        assert event["dtend"].params["TZID"] == "Europe/Istanbul"
        assert [zone["tzid"] for zone in calendar.walk("VTIMEZONE")] == ["Europe/Istanbul"]
        assert (instant(event, "dtstart"), instant(event, "dtend")) == (made["starts_at"], made["ends_at"])
        assert "DTSTAMP" in event and str(event["status"]) == "CONFIRMED"
        assert str(event["organizer"]) == "mailto:hello@hire.test"
        assert attendees(event) == [person.email]
        assert str(event["location"]) == "https://meet.example.com/xyz"


def test_the_candidate_reads_nothing_internal(call: Call, smtp: SmtpServer, hiring: Team) -> None:
    book(call, hiring.owner, hiring.application, hiring.members, slot(), title="Onsite", location="Room 4")
    [mail] = mails(smtp, hiring.candidate.email, "Interview invitation")
    calendar_text = calendar_part(mail).get_content()
    everything = mail.text + mail.html + calendar_text
    for member in hiring.members:
        assert member.email not in everything
    assert "scorecard" not in everything.lower() and "/panel/" not in everything
    assert "Acme" in mail.text and "Onsite" in mail.text and "Room 4" in mail.text
    event = event_of(calendar_of(mail))
    assert "Acme" in str(event["summary"]) and "Onsite" in str(event["summary"])
    [interviewer_mail] = mails(smtp, hiring.members[0].email, "Interview invitation")
    assert "/panel/applications/" + hiring.application["id"] in interviewer_mail.text


def test_a_change_sends_the_same_event_with_a_higher_sequence(call: Call, smtp: SmtpServer, hiring: Team) -> None:
    kept, removed = hiring.members
    made = book(call, hiring.owner, hiring.application, [kept, removed], slot())
    for person in (hiring.candidate, kept, removed):
        mails(smtp, person.email, "Interview invitation")
    added = hiring.owner
    later = slot()
    ok(
        call(
            "interviews.update",
            hiring.owner,
            id=made["id"],
            starts_at=later[0],
            ends_at=later[1],
            interviewer_ids=[kept.user_id, added.user_id],
        )
    )
    for person in (hiring.candidate, kept):
        [mail] = mails(smtp, person.email, "Interview moved")
        calendar = calendar_of(mail)
        event = event_of(calendar)
        assert calendar["method"] == "REQUEST" and int(event["sequence"]) == 1
        assert str(event["uid"]).startswith(made["id"])
        assert instant(event, "dtstart") == dt.datetime.fromisoformat(later[0]).astimezone(dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
    [gone] = mails(smtp, removed.email, "You are no longer on an interview")
    calendar = calendar_of(gone)
    assert calendar["method"] == "CANCEL" and int(event_of(calendar)["sequence"]) == 1
    assert str(event_of(calendar)["status"]) == "CANCELLED"
    [joined] = mails(smtp, added.email, "Interview moved")
    assert calendar_of(joined)["method"] == "REQUEST" and int(event_of(calendar_of(joined))["sequence"]) == 1


def test_a_cancel_withdraws_it_from_every_calendar(call: Call, smtp: SmtpServer, hiring: Team) -> None:
    made = book(call, hiring.owner, hiring.application, hiring.members, slot())
    ok(call("interviews.cancel", hiring.owner, id=made["id"], reason="The role is on hold."))
    for person in [hiring.candidate, *hiring.members]:
        [mail] = mails(smtp, person.email, "Interview cancelled")
        calendar = calendar_of(mail)
        event = event_of(calendar)
        assert calendar["method"] == "CANCEL" and str(event["status"]) == "CANCELLED"
        assert str(event["uid"]).startswith(made["id"]) and int(event["sequence"]) == 1
        assert "on hold" not in mail.text + calendar_part(mail).get_content()


def test_a_replayed_booking_sends_no_second_invitation(
    call: Call, client: httpx.Client, smtp: SmtpServer, admin: Admin, hiring: Team
) -> None:
    starts_at, ends_at = slot()
    body = {
        "application_id": hiring.application["id"],
        "starts_at": starts_at,
        "ends_at": ends_at,
        "time_zone": "Europe/Istanbul",
        "interviewer_ids": [hiring.members[0].user_id],
    }
    headers = {**hiring.owner.auth, "Idempotency-Key": "book-once"}
    first = client.post("/v1/interviews.create", json=body, headers=headers)
    again = client.post("/v1/interviews.create", json=body, headers=headers)
    assert again.headers["Idempotent-Replayed"] == "true" and again.json() == first.json()
    mails(smtp, hiring.members[0].email, "Interview invitation")
    count = admin.sql(
        "SELECT count(*) AS n FROM mail_messages WHERE recipient = %(email)s AND kind = 'interview_interviewer'",
        {"email": hiring.members[0].email},
    )
    assert count[0]["n"] == 1


@pytest.mark.parametrize(("day", "offset"), [(dt.date(2027, 1, 15), "-05:00"), (dt.date(2027, 7, 15), "-04:00")])
def test_the_wall_time_keeps_its_zone_across_daylight_saving(
    call: Call, smtp: SmtpServer, admin: Admin, day: dt.date, offset: str
) -> None:
    hiring = team(admin, call)
    starts_at = f"{day.isoformat()}T10:00:00{offset}"
    ends_at = f"{day.isoformat()}T11:00:00{offset}"
    made = book(
        call, hiring.owner, hiring.application, hiring.members[:1], (starts_at, ends_at), time_zone="America/New_York"
    )
    event = event_of(calendar_of(mails(smtp, hiring.candidate.email, "Interview invitation")[0]))
    wall = event.decoded("dtstart")
    assert (wall.hour, wall.minute, str(wall.tzinfo)) == (10, 0, "America/New_York")
    assert instant(event, "dtstart") == made["starts_at"]


def test_the_private_calendar_feed(call: Call, client: httpx.Client, admin: Admin, hiring: Team) -> None:
    interviewer = hiring.members[0]
    kept = book(call, hiring.owner, hiring.application, [interviewer], slot(), title="Round one")
    dropped = book(call, hiring.owner, hiring.application, [interviewer], slot())
    ok(call("interviews.cancel", hiring.owner, id=dropped["id"]))
    address = ok(call("interviews.calendar_url", interviewer))["url"]
    assert address == ok(call("interviews.calendar_url", interviewer))["url"], "the same address until rotated"
    path = address.removeprefix(admin.settings.public_url)
    assert path.startswith("/calendar/") and path.endswith(".ics")
    answer = client.get(path)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/calendar")
    calendar = icalendar.Calendar.from_ical(answer.content)
    [event] = calendar.walk("VEVENT")
    assert str(event["uid"]).startswith(kept["id"]) and "Round one" in str(event["summary"])
    assert instant(event, "dtstart") == kept["starts_at"]
    candidate_feed = ok(call("interviews.calendar_url", hiring.candidate))["url"]
    [theirs] = icalendar.Calendar.from_ical(
        client.get(candidate_feed.removeprefix(admin.settings.public_url)).content
    ).walk("VEVENT")
    assert interviewer.email not in theirs.to_ical().decode()
    rotated = ok(call("interviews.calendar_url", interviewer, rotate=True))["url"]
    assert rotated != address
    assert client.get(path).status_code == 404
    assert client.get(rotated.removeprefix(admin.settings.public_url)).status_code == 200
    assert client.get("/calendar/not-a-token.ics").status_code == 404


def test_rotating_needs_the_write_scope(call: Call, admin: Admin, hiring: Team) -> None:
    key = admin.api_key(hiring.owner, scopes="read:applications")["key"]
    address = ok(call("interviews.calendar_url", key))["url"]
    refused(call("interviews.calendar_url", key, rotate=True), 403, "insufficient_scope")
    assert ok(call("interviews.calendar_url", key))["url"] == address


def test_the_feed_reaches_thirty_days_back(call: Call, client: httpx.Client, admin: Admin, hiring: Team) -> None:
    interviewer = hiring.members[1]
    now = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    recent = book(call, hiring.owner, hiring.application, [interviewer], slot(start=now - dt.timedelta(days=29)))
    old = book(call, hiring.owner, hiring.application, [interviewer], slot(start=now - dt.timedelta(days=31)))
    address = ok(call("interviews.calendar_url", interviewer))["url"]
    calendar = icalendar.Calendar.from_ical(client.get(address.removeprefix(admin.settings.public_url)).content)
    uids = [str(event["uid"]) for event in calendar.walk("VEVENT")]
    assert any(uid.startswith(recent["id"]) for uid in uids)
    assert not any(uid.startswith(old["id"]) for uid in uids)


def test_nothing_is_mailed_to_whom_we_may_not_mail(call: Call, admin: Admin) -> None:
    hiring = team(admin, call)
    admin.sql("UPDATE users SET email_verified_at = NULL WHERE id = %(id)s::uuid", {"id": hiring.candidate.user_id})
    book(call, hiring.owner, hiring.application, hiring.members[:1], slot())
    queued = admin.sql(
        "SELECT recipient FROM mail_messages WHERE kind LIKE 'interview_%%' AND recipient = ANY(%(emails)s)",
        {"emails": [hiring.candidate.email, hiring.members[0].email]},
    )
    assert [row["recipient"] for row in queued] == [hiring.members[0].email]
