"""Who is told of an interview, and what their mail and calendar say.

Each person invited gets one message of their own: the text, the HTML and the calendar object (`text/calendar;
method=REQUEST`, RFC 6047) that names them alone as attendee. The candidate's names the company, the title, the
time and the place or link, and nothing internal — not the interviewers' addresses, scorecards or notes. After a
change every person still invited gets the event again with a higher SEQUENCE; a person taken off it, or everyone
when it is cancelled, gets `METHOD:CANCEL`.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import urllib.parse
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from procedures.applications.interviews import calendar
from procedures.applications.letters import desk_link, home_link, mail_of, mailable, send
from rpc.api import Context
from rpc.mail.compose import Alternative
from rpc.mail.outbox import Letter
from rpc.settings import Settings

Change = Literal["scheduled", "rescheduled", "updated", "cancelled"]
HEADLINES: dict[Change, str] = {
    "scheduled": "Interview invitation",
    "rescheduled": "Interview moved",
    "updated": "Interview updated",
    "cancelled": "Interview cancelled",
}
REMOVED = "You are no longer on an interview"

BRIEFINGS = f"""
SELECT i.id::text AS id, i.application_id::text AS application_id, i.candidate_id::text AS candidate_id,
       i.title, i.starts_at, i.ends_at, i.time_zone,
       i.location, i.video_url, i.sequence, i.cancelled_at IS NOT NULL AS cancelled, j.title AS job_title,
       j.company, c.display_name AS candidate_name, CASE WHEN {mailable("c")} THEN c.email END AS candidate_email,
       (SELECT json_agg(json_build_object('id', u.id::text, 'name', u.display_name,
                                          'email', CASE WHEN {mailable("u")} THEN u.email END) ORDER BY o.position)
        FROM interview_interviewers AS o JOIN users AS u ON u.id = o.user_id
        WHERE o.interview_id = i.id) AS interviewers
FROM interviews AS i JOIN jobs AS j ON j.id = i.job_id JOIN users AS c ON c.id = i.candidate_id
"""


class Attendee(msgspec.Struct, frozen=True):
    """An interviewer as the mail needs them: their address only when they may be mailed."""

    id: str
    name: str | None
    email: str | None


@dataclass(frozen=True, slots=True)
class Briefing:
    """Everything an interview's messages and calendars say, read once."""

    id: str
    application_id: str
    candidate_id: str
    title: str
    starts_at: dt.datetime
    ends_at: dt.datetime
    time_zone: str
    location: str | None
    video_url: str | None
    sequence: int
    cancelled: bool
    job_title: str
    company: str
    candidate_name: str | None
    candidate_email: str | None
    interviewers: list[Attendee]

    def when(self) -> str:
        return wall_time(self.starts_at, self.ends_at, self.time_zone)


def wall_time(starts_at: dt.datetime, ends_at: dt.datetime, time_zone: str) -> str:
    """`Tuesday 8 December 2026, 10:00–11:00 (Europe/Istanbul)`: an interview's time as its zone's clocks say."""
    zone = zoneinfo.ZoneInfo(time_zone)
    start, end = starts_at.astimezone(zone), ends_at.astimezone(zone)
    day = f"{start:%A} {start.day} {start:%B %Y}"
    until = f"{end:%H:%M}" if end.date() == start.date() else f"{end:%A} {end.day} {end:%B %Y}, {end:%H:%M}"
    return f"{day}, {start:%H:%M}–{until} ({time_zone})"


async def brief(ctx: Context, interview_id: str) -> Briefing:
    """What the messages of one interview say."""
    row = await (await ctx.conn.execute(BRIEFINGS + "WHERE i.id = %(id)s", {"id": interview_id})).fetchone()
    assert row is not None, "an interview of this transaction"
    return briefing_of(row)


def briefing_of(row: dict[str, Any]) -> Briefing:
    """A row of `BRIEFINGS` (its interviewers arrive as JSON)."""
    return Briefing(**{**row, "interviewers": msgspec.convert(row["interviewers"] or [], list[Attendee])})


async def tell(ctx: Context, briefing: Briefing, change: Change, removed: Sequence[Attendee] = ()) -> None:
    """Mail everyone on the interview of `change` (a cancel withdraws it from their calendars), and withdraw it
    from the calendars of the interviewers `removed` from it."""
    method: calendar.Method = "CANCEL" if change == "cancelled" else "REQUEST"
    headline = HEADLINES[change]
    letters: list[Letter] = []
    if briefing.candidate_email:
        letters.append(_for_candidate(ctx, briefing, method, headline))
    letters += [_for_interviewer(ctx, briefing, one, method, headline) for one in briefing.interviewers if one.email]
    letters += [_for_interviewer(ctx, briefing, one, "CANCEL", REMOVED) for one in removed if one.email]
    await send(ctx, letters)


def uid(settings: Settings, interview_id: str) -> str:
    """The interview's UID in every calendar, for its whole life."""
    host = urllib.parse.urlsplit(settings.public_url).hostname or "localhost"
    return f"{interview_id}@{host}"


def candidate_meeting(settings: Settings, briefing: Briefing) -> calendar.Meeting:
    """The interview as the candidate's calendar shows it: company, title, time, place or link."""
    lines = [f"Your interview for {briefing.job_title} at {briefing.company}."]
    lines += _where(briefing)
    return _meeting(settings, briefing, f"{briefing.title} · {briefing.company}", lines)


def interviewer_meeting(settings: Settings, briefing: Briefing) -> calendar.Meeting:
    """The interview as an interviewer's calendar shows it: whom, for what, with whom, and the application."""
    candidate = briefing.candidate_name or "a candidate"
    lines = [f"Interview of {candidate} for {briefing.job_title}."]
    names = ", ".join(one.name or "a colleague" for one in briefing.interviewers)
    lines.append(f"Interviewers: {names}.")
    lines += _where(briefing)
    lines.append(f"The application and your scorecard: {desk_link(settings, briefing.application_id)}")
    return _meeting(settings, briefing, f"{briefing.title}: {candidate} ({briefing.job_title})", lines)


def _meeting(settings: Settings, briefing: Briefing, summary: str, lines: list[str]) -> calendar.Meeting:
    return calendar.Meeting(
        uid=uid(settings, briefing.id),
        sequence=briefing.sequence,
        starts_at=briefing.starts_at,
        ends_at=briefing.ends_at,
        time_zone=briefing.time_zone,
        summary=summary,
        location=briefing.location or briefing.video_url,
        description="\n".join(lines),
        cancelled=briefing.cancelled,
    )


def _where(briefing: Briefing) -> list[str]:
    lines = []
    if briefing.location:
        lines.append(f"Where: {briefing.location}")
    if briefing.video_url:
        lines.append(f"Join: {briefing.video_url}")
    return lines


def _organizer(ctx: Context) -> calendar.Person:
    name, address = email.utils.parseaddr(mail_of(ctx).composer.sender)
    return calendar.Person(name or None, address)


def _invitation(ctx: Context, meeting: calendar.Meeting, method: calendar.Method, to: calendar.Person) -> Alternative:
    text = calendar.invitation(meeting, method, _organizer(ctx), to)
    return Alternative("calendar", text, {"method": method})


def _for_candidate(ctx: Context, briefing: Briefing, method: calendar.Method, headline: str) -> Letter:
    assert briefing.candidate_email is not None
    person = calendar.Person(briefing.candidate_name, briefing.candidate_email)
    context = _context(briefing, headline, method) | {"link": home_link(ctx.settings)}
    alternative = _invitation(ctx, candidate_meeting(ctx.settings, briefing), method, person)
    return Letter("interview_candidate", person.email, context, alternatives=(alternative,))


def _for_interviewer(
    ctx: Context, briefing: Briefing, interviewer: Attendee, method: calendar.Method, headline: str
) -> Letter:
    assert interviewer.email is not None
    person = calendar.Person(interviewer.name, interviewer.email)
    context = _context(briefing, headline, method) | {
        "candidate_name": briefing.candidate_name or "A candidate",
        "interviewers": [one.name or "A colleague" for one in briefing.interviewers],
        "link": desk_link(ctx.settings, briefing.application_id),
    }
    alternative = _invitation(ctx, interviewer_meeting(ctx.settings, briefing), method, person)
    return Letter("interview_interviewer", person.email, context, alternatives=(alternative,))


def _context(briefing: Briefing, headline: str, method: calendar.Method) -> dict[str, Any]:
    return {
        "headline": headline,
        "withdrawn": method == "CANCEL",
        "title": briefing.title,
        "job_title": briefing.job_title,
        "company": briefing.company,
        "when": briefing.when(),
        "location": briefing.location,
        "video_url": briefing.video_url,
    }
