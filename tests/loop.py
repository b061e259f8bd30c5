"""The recruiting loop's test plumbing: a hiring team with a published job and an application to it, interview
times in a zone (never the same slot twice in one session), and calendars parsed back from the mail received."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
import zoneinfo
from dataclasses import dataclass
from typing import Any

import icalendar

from tests.smtp import Received, SmtpServer
from tests.support import Admin, Call, User, eventually, ok

ZONE = "Europe/Istanbul"
# Every slot handed out is a new hour, so that tests sharing people never book over each other by accident.
_hours = itertools.count(1)


@dataclass(frozen=True)
class Team:
    """An employer account with its members, a published job with scorecard attributes, and a candidate who
    applied to it."""

    owner: User
    members: list[User]
    candidate: User
    job: dict[str, Any]
    application: dict[str, Any]

    @property
    def member_ids(self) -> list[str]:
        return [member.user_id for member in self.members]


def team(admin: Admin, call: Call, *, members: int = 2, attributes: tuple[str, ...] = ("SQL", "Communication")) -> Team:
    owner = admin.user("employer")
    colleagues = [admin.user("employer", account_id=owner.account_id) for _ in range(members)]
    candidate = admin.user("candidate")
    title = f"Backend engineer {uuid.uuid4().hex[:6]}"
    job = ok(
        call(
            "jobs.create",
            owner,
            title=title,
            company="Acme",
            location="Izmir",
            scorecard_attributes=list(attributes),
        )
    )
    ok(call("jobs.publish", owner, id=job["id"]))
    application = ok(call("applications.create", candidate, job_id=job["id"]))
    return Team(owner, colleagues, candidate, job, application)


def slot(minutes: int = 60, *, zone: str = ZONE, start: dt.datetime | None = None) -> tuple[str, str]:
    """A new future hour (or one from `start`), as RFC 3339 times with the zone's offset."""
    begins = start or (dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0) + dt.timedelta(days=2))
    if start is None:
        begins += dt.timedelta(hours=3 * next(_hours))
    local = begins.astimezone(zoneinfo.ZoneInfo(zone))
    return local.isoformat(), (local + dt.timedelta(minutes=minutes)).isoformat()


def past_slot(minutes: int = 60) -> tuple[str, str]:
    """A new hour that is over (scorecards wait for an interview's start)."""
    now = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    return slot(minutes, start=now - dt.timedelta(hours=3 * next(_hours) + 2))


def book(
    call: Call, who: User, application: dict[str, Any], interviewers: list[User], times: tuple[str, str], **fields: Any
) -> dict[str, Any]:
    starts_at, ends_at = times
    made: dict[str, Any] = ok(
        call(
            "interviews.create",
            who,
            application_id=application["id"],
            starts_at=starts_at,
            ends_at=ends_at,
            time_zone=fields.pop("time_zone", ZONE),
            interviewer_ids=[one.user_id for one in interviewers],
            **fields,
        )
    )
    return made


def utc(text: str) -> str:
    """An RFC 3339 time as the API writes it: UTC with `Z`."""
    return dt.datetime.fromisoformat(text).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def calendar_of(mail: Received) -> icalendar.Calendar:
    """The `text/calendar` part of a message, parsed by a standard iCalendar parser."""
    parts = [part for part in mail.message.walk() if part.get_content_type() == "text/calendar"]
    assert len(parts) == 1, [part.get_content_type() for part in mail.message.walk()]
    return icalendar.Calendar.from_ical(parts[0].get_content())


def calendar_part(mail: Received) -> Any:
    [part] = [part for part in mail.message.walk() if part.get_content_type() == "text/calendar"]
    return part


def event_of(calendar: icalendar.Calendar) -> icalendar.Event:
    [event] = calendar.walk("VEVENT")
    return event


def mails(smtp: SmtpServer, address: str, subject: str, count: int = 1) -> list[Received]:
    """The messages to `address` with this subject, once `count` of them have arrived (in the order received)."""

    def arrived() -> list[Received]:
        found = [mail for mail in smtp.inbox.to(address) if mail.message["Subject"] == subject]
        return found if len(found) >= count else []

    return eventually(arrived, f"{count} message(s) {subject!r} to {address}")


def propose(call: Call, who: User, application: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """An offer on `application` made by `who`: a position, a first day, a salary and a week to answer."""
    values = {
        "application_id": application["id"],
        "title": "Backend engineer",
        "start_date": "2027-01-04",
        "salary": {"amount": "85000.00", "currency": "EUR", "period": "year"},
        "expires_at": (dt.datetime.now(dt.UTC) + dt.timedelta(days=7)).isoformat(),
        **fields,
    }
    made: dict[str, Any] = ok(call("offers.create", who, **values))
    return made
