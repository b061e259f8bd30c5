"""The calendar format, in one place, over `icalendar` (RFC 5545): invitations for mail (RFC 5546's REQUEST and
CANCEL, carried as RFC 6047 says), a person's subscribed feed, and one interview to add by hand.

Every event keeps its interview's UID for the interview's whole life, and its SEQUENCE, so that a calendar
replaces the event it holds with each update and removes it on a cancel. DTSTART and DTEND are the wall time in
the interview's zone with its TZID and a VTIMEZONE beside them (what a calendar shows stays right whatever its own
zone), and a standard parser reads back exactly the instants the API gives.
"""

from __future__ import annotations

import datetime as dt
import functools
import zoneinfo
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import icalendar

PRODUCT_ID = "-//Hire//Interviews//EN"
Method = Literal["REQUEST", "CANCEL", "PUBLISH"]
# How often a subscribed calendar should look again (RFC 7986's REFRESH-INTERVAL, and Outlook's own property).
REFRESH = dt.timedelta(minutes=15)


@dataclass(frozen=True, slots=True)
class Person:
    """Someone a calendar names: their name (or None) and address."""

    name: str | None
    email: str

    def address(self, **parameters: str) -> icalendar.vCalAddress:
        address = icalendar.vCalAddress(f"mailto:{self.email}")
        if self.name:
            address.params["CN"] = self.name
        address.params.update(parameters)
        return address


@dataclass(frozen=True, slots=True)
class Meeting:
    """What one person's calendar says of one interview: its identity and version, its time in its zone, and the
    words that person may read (the candidate's name nothing internal)."""

    uid: str
    sequence: int
    starts_at: dt.datetime
    ends_at: dt.datetime
    time_zone: str
    summary: str
    location: str | None
    description: str
    cancelled: bool = False


def invitation(meeting: Meeting, method: Method, organizer: Person, attendee: Person) -> str:
    """The calendar object of an invitation (`REQUEST`) or of its withdrawal (`CANCEL`) to one attendee."""
    calendar = _calendar(method, [meeting])
    event = calendar.walk("VEVENT")[0]
    event.add("organizer", organizer.address())
    event.add("attendee", attendee.address(ROLE="REQ-PARTICIPANT", PARTSTAT="NEEDS-ACTION", RSVP="FALSE"))
    return _text(calendar)


def feed(meetings: Sequence[Meeting], name: str) -> str:
    """A calendar to subscribe to: these interviews, refreshed every quarter of an hour."""
    calendar = _calendar(None, meetings)
    calendar.add("name", name)
    calendar.add("x-wr-calname", name)
    calendar.add("refresh-interval", REFRESH, parameters={"VALUE": "DURATION"})
    calendar.add("x-published-ttl", icalendar.vDuration(REFRESH))
    return _text(calendar)


def single(meeting: Meeting) -> str:
    """One interview, to add to a calendar by hand (an `.ics` download)."""
    return _text(_calendar("PUBLISH", [meeting]))


def _calendar(method: Method | None, meetings: Sequence[Meeting]) -> icalendar.Calendar:
    calendar = icalendar.Calendar()
    calendar.add("prodid", PRODUCT_ID)
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    if method is not None:
        calendar.add("method", method)
    for zone in _zones(meetings):
        calendar.add_component(zone)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    for meeting in meetings:
        calendar.add_component(_event(meeting, now, cancelled=meeting.cancelled or method == "CANCEL"))
    return calendar


def _text(calendar: icalendar.Calendar) -> str:
    ical: bytes = calendar.to_ical()
    return ical.decode()


def _event(meeting: Meeting, stamp: dt.datetime, *, cancelled: bool) -> icalendar.Event:
    zone = zoneinfo.ZoneInfo(meeting.time_zone)
    event = icalendar.Event()
    event.add("uid", meeting.uid)
    event.add("dtstamp", stamp)
    event.add("sequence", meeting.sequence)
    for name, moment in (("dtstart", meeting.starts_at), ("dtend", meeting.ends_at)):
        # The wall time with its zone's name, always (UTC too): RFC 5545 section 3.3.5's form 3.
        wall = moment.astimezone(zone).replace(tzinfo=None)
        event.add(name, wall, parameters={"TZID": meeting.time_zone})
    event.add("summary", meeting.summary)
    if meeting.location:
        event.add("location", meeting.location)
    event.add("description", meeting.description)
    event.add("status", "CANCELLED" if cancelled else "CONFIRMED")
    event.add("transp", "OPAQUE")
    return event


def _zones(meetings: Iterable[Meeting]) -> list[icalendar.Timezone]:
    """A VTIMEZONE for each zone the meetings are in, covering the years they fall in (and the next, so that a
    meeting late in December keeps its rules), from the zone database (`zoneinfo`)."""
    years: dict[str, tuple[int, int]] = {}
    for meeting in meetings:
        first, last = years.get(meeting.time_zone, (meeting.starts_at.year, meeting.ends_at.year))
        years[meeting.time_zone] = (min(first, meeting.starts_at.year - 1), max(last, meeting.ends_at.year + 1))
    return [_vtimezone(name, first, last) for name, (first, last) in sorted(years.items())]


@functools.lru_cache(maxsize=256)
def _vtimezone(name: str, first: int, last: int) -> icalendar.Timezone:
    """The zone's VTIMEZONE from the first year to the last: a pure function of its arguments, kept for the next
    calendar that needs it (at most 256 are kept). Making one costs icalendar 20–35 ms for a zone without daylight
    saving in those years (Europe/Istanbul, Asia/Tokyo, UTC), which it looks through hour by hour: three times
    over for every booking with two interviewers, when each mail made its own. The calendars that carry one only
    write it out, never change it."""
    return icalendar.Timezone.from_tzinfo(
        zoneinfo.ZoneInfo(name), tzid=name, first_date=dt.date(first, 1, 1), last_date=dt.date(last, 12, 31)
    )


def is_zone(name: str) -> bool:
    """Whether `name` is an IANA time zone the service knows (a path or a made-up name is not)."""
    return name in _ZONES


_ZONES = frozenset(zoneinfo.available_timezones())  # the zone database's names, read once
