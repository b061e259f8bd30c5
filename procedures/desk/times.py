"""A time as a form asks for it — a day, a time of day and the IANA zone whose clocks say it — turned into the
RFC 3339 instant the API takes, and back. A wall time the zone's clocks skip (the hour lost to daylight saving)
is refused with a sentence saying so; one they show twice (the hour gained) is its first occurrence."""

from __future__ import annotations

import datetime as dt
import zoneinfo

from procedures.applications.interviews.calendar import is_zone
from procedures.public_pages.calls import Refused

ZONES = tuple(sorted(zoneinfo.available_timezones()))  # the zone database's names, offered to choose from
DAY = "%Y-%m-%d"
CLOCK = "%H:%M"


def instant(day: str, clock: str, zone: str, *, day_field: str = "date", clock_field: str = "time") -> dt.datetime:
    """The instant `day` at `clock` in `zone`; `Refused` (422) naming the field at fault. An unknown zone is read
    as UTC here, so that the procedure refuses it in its own words."""
    errors = {}
    try:
        date = dt.datetime.strptime(day.strip(), DAY).date()
    except ValueError:
        errors[day_field] = "Give a day as YYYY-MM-DD."
    try:
        time = dt.datetime.strptime(clock.strip(), CLOCK).time()
    except ValueError:
        errors[clock_field] = "Give a time of day as HH:MM, on a 24-hour clock."
    if errors:
        raise Refused(422, "Please correct the fields marked below.", errors)
    tz = zoneinfo.ZoneInfo(zone) if is_zone(zone) else dt.UTC
    local = dt.datetime.combine(date, time, tz)
    if local.astimezone(dt.UTC).astimezone(tz).replace(tzinfo=None) != local.replace(tzinfo=None):
        message = f"{clock} does not exist in {zone} that day: the clocks skip it. Choose another time."
        raise Refused(422, "Please correct the fields marked below.", {clock_field: message})
    return local


def rfc3339(moment: dt.datetime) -> str:
    """An instant with its offset, as the API's parameters take it."""
    return moment.isoformat(timespec="seconds")


def wall(moment: dt.datetime, zone: str) -> tuple[str, str]:
    """The day and time of day `zone`'s clocks show at `moment` (UTC for an unknown zone)."""
    local = moment.astimezone(zoneinfo.ZoneInfo(zone) if is_zone(zone) else dt.UTC)
    return local.strftime(DAY), local.strftime(CLOCK)
