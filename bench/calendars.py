"""The recruiting loop's data for `bench.interviews`: enterprise accounts of five interviewers each, 10,000 jobs,
and interviews on a calendar from three years back to a quarter ahead, seeded by COPY with the exclusion
constraints on (the database checks that no row overlaps); and the requests the scenario sends.

Each account books its interviews into hour-long slots of weekdays (07:00–17:00 UTC), one interview a slot, in
random slots of the calendar; an interviewer belongs to one account, so no interviewer is booked twice at once.
Each application with interviews is its candidate's only one (1 to 3 interviews, in slots of its account), so
no candidate is either. At a million interviews an account holds 5,000 of its 8,450 slots and an interviewer
sits in about 11 interviews a week; at a thousand, an account holds five. Past interviews have most of their
scorecards; one in twenty is cancelled.

The bookings the scenario makes go into slots that no size seeds, from next week on, each for a new application
in `reviewed` (its first interview, which also moves it to `interview_scheduled`), so none is refused.
"""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import random
import time
import urllib.parse
import uuid
import zoneinfo
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import msgspec

from bench.seeding import chunked, copy_lines, employer_email, load_jobs, replica, seed_employers, stamp
from procedures.vocabulary import VOCABULARY
from rpc.core.types import Connection
from rpc.settings import Settings

ACCOUNTS = 200
INTERVIEWERS = 5  # per account: the API key's holder and four colleagues
JOBS = 10_000
SLOTS_A_DAY, FIRST_HOUR, DAY, WEEK = 10, 7, 86_400, 7 * 86_400
WEEKS_BACK, WEEKS_AHEAD = 156, 13
SLOTS_A_WEEK = 5 * SLOTS_A_DAY
SLOTS = (WEEKS_BACK + WEEKS_AHEAD) * SLOTS_A_WEEK
ZONES = ("Europe/Istanbul", "Europe/Berlin", "Europe/London", "Europe/Amsterdam", "Europe/Warsaw")
KINDS = ("Phone screen", "Technical interview", "System design", "Hiring manager", "Culture and values")
PANELS = (1, 1, 2, 2, 2, 3)  # interviewers on an interview
ROUNDS = (1, 2, 2, 3)  # interviews of an application
MINUTES = (30, 45, 60)
CANCELLED, SUBMITTED = 0.05, 0.9
REMINDED_AFTER = 3600  # seconds after its end that an interview's missing scorecards are first asked for
RECOMMENDATIONS = ("strong_no", "no", "yes", "strong_yes")
TEAMS_A_BATCH = 10  # accounts whose interviews are made and copied together

_COPY = {
    "accounts": "COPY accounts (id, name) FROM STDIN",
    "users": "COPY users (id, account_id, role, email, display_name, email_verified_at) FROM STDIN",
    "applications": """COPY applications (id, job_id, candidate_id, candidate_account_id, status, created_at,
        updated_at) FROM STDIN""",
    "interviews": """COPY interviews (id, application_id, job_id, account_id, candidate_id, title, starts_at,
        ends_at, time_zone, video_url, sequence, cancelled_at, created_by, created_at, updated_at) FROM STDIN""",
    "interview_interviewers": """COPY interview_interviewers (interview_id, user_id, position, starts_at, ends_at,
        cancelled, next_reminder_at) FROM STDIN""",
    "scorecards": """COPY scorecards (interview_id, application_id, interviewer_id, recommendation, submitted_at)
        FROM STDIN""",
}
_HOLDERS = "SELECT id::text AS id, email FROM users WHERE email = ANY(%(emails)s)"
_VERIFIED = """
UPDATE users SET email_verified_at = now(), display_name = coalesce(display_name, 'Interviewer ' || left(id::text, 8))
WHERE role = 'employer'
"""

Line = tuple[str, str, str, str, str]


@dataclass(slots=True)
class Team:
    """An enterprise account: its API key, its interviewers (the key's holder first), its time zone, its published
    jobs, and the slots its interviews take at the largest size, in the order they are seeded."""

    account: str
    key: str
    interviewers: tuple[str, ...]
    zone: str
    jobs: tuple[str, ...]
    plan: list[int]
    seeded: int = 0


@dataclass(slots=True)
class Rows:
    """COPY lines of one batch, by table."""

    tables: dict[str, list[str]] = field(default_factory=lambda: {table: [] for table in _COPY})

    def add(self, table: str, *values: object) -> None:
        self.tables[table].append("\t".join(r"\N" if value is None else str(value) for value in values) + "\n")

    def person(self, name: str) -> tuple[str, str]:
        """A new candidate in an account of their own, their address confirmed: (user, account)."""
        user, account = str(uuid.uuid4()), str(uuid.uuid4())
        self.add("accounts", account, name)
        self.add("users", user, account, "candidate", f"{user}@candidates.example.com", name, stamp(time.time()))
        return user, account

    async def copy(self, conn: Connection) -> None:
        async with replica(conn):
            for table, lines in self.tables.items():
                if lines:
                    await copy_lines(conn, _COPY[table], chunked(iter(lines)))


@dataclass(slots=True)
class Calendar:
    """The accounts and what is booked: interviews by (account, interviewer, week), for the week requests."""

    teams: list[Team]
    epoch: float  # Monday 00:00 UTC of slot 0
    now: float
    rng: random.Random
    weeks: collections.Counter[tuple[int, str, int]] = field(default_factory=collections.Counter)

    def start(self, slot: int) -> float:
        week, in_week = divmod(slot, SLOTS_A_WEEK)
        day, hour = divmod(in_week, SLOTS_A_DAY)
        return self.epoch + week * WEEK + day * DAY + (FIRST_HOUR + hour) * 3600


async def seed_teams(conn: Connection, settings: Settings, hook_url: str, largest: int) -> Calendar:
    """The accounts (a key and a webhook endpoint each, through bench.seeding), their interviewers with confirmed
    addresses, the jobs, and each account's plan of slots for `largest` interviews."""
    rng = random.Random(32)  # noqa: S311 - reproducible data, not secrets
    employers = await seed_employers(conn, settings, VOCABULARY, ACCOUNTS, hook_url)
    jobs = await load_jobs(conn, rng, JOBS, employers.accounts, collect=True, rebuild=False)
    emails = [employer_email(number) for number in range(ACCOUNTS)]
    holders = {row["email"]: row["id"] for row in await (await conn.execute(_HOLDERS, {"emails": emails})).fetchall()}
    rows = Rows()
    colleagues = {account: [str(uuid.uuid4()) for _ in range(INTERVIEWERS - 1)] for account in employers.accounts}
    for account, users in colleagues.items():
        for user in users:
            rows.add("users", user, account, "employer", f"{user}@employers.example.com", None, None)
    await rows.copy(conn)
    await conn.execute(_VERIFIED)
    published: dict[str, list[str]] = collections.defaultdict(list)
    for job, account in jobs:
        published[account].append(job)
    now = time.time()
    monday = (now - 4 * DAY) // WEEK * WEEK + 4 * DAY  # this week's (1 January 1970 was a Thursday)
    calendar = Calendar([], epoch=monday - WEEKS_BACK * WEEK, now=now, rng=rng)
    share, extra = divmod(largest, ACCOUNTS)
    for number, (account, key) in enumerate(zip(employers.accounts, employers.keys, strict=True)):
        calendar.teams.append(
            Team(
                account=account,
                key=key,
                interviewers=(holders[emails[number]], *colleagues[account]),
                zone=ZONES[number % len(ZONES)],
                jobs=tuple(published[account]),
                plan=rng.sample(range(SLOTS), share + (number < extra)),
            )
        )
    return calendar


async def book(conn: Connection, calendar: Calendar, total: int) -> None:
    """Interviews up to `total` in all: each account seeds the next slots of its plan, a batch of accounts at a
    time; then the tables are vacuumed and analysed, as a database that grew over years would be."""
    share, extra = divmod(total, ACCOUNTS)
    for first in range(0, ACCOUNTS, TEAMS_A_BATCH):
        rows = Rows()
        for number in range(first, min(ACCOUNTS, first + TEAMS_A_BATCH)):
            team = calendar.teams[number]
            upto = share + (number < extra)
            _interviews(calendar, number, sorted(team.plan[team.seeded : upto]), rows)
            team.seeded = max(team.seeded, upto)
        await rows.copy(conn)
    for table in ("users", "applications", "interviews", "interview_interviewers", "scorecards"):
        await conn.execute(f"VACUUM ANALYZE {table}")


def _interviews(calendar: Calendar, number: int, slots: Sequence[int], rows: Rows) -> None:
    """The interviews of account `number` in `slots` (in order), 1 to 3 to an application."""
    rng, team = calendar.rng, calendar.teams[number]
    given = iter(slots)
    while group := list(itertools.islice(given, rng.choice(ROUNDS))):
        candidate, candidate_account = rows.person(f"Candidate {rng.getrandbits(24):06x}")
        application, job = str(uuid.uuid4()), rng.choice(team.jobs)
        applied = stamp(calendar.start(group[0]) - 7 * DAY)
        rows.add(
            "applications", application, job, candidate, candidate_account, "interview_scheduled", applied, applied
        )
        for slot in group:
            interview, starts = str(uuid.uuid4()), calendar.start(slot)
            ends = starts + 60 * rng.choice(MINUTES)
            cancelled = rng.random() < CANCELLED
            booked = stamp(min(starts, calendar.now) - rng.uniform(DAY, 14 * DAY))
            rows.add(
                "interviews", interview, application, job, team.account, candidate, rng.choice(KINDS),
                stamp(starts), stamp(ends), team.zone, _meeting_link(rng),
                int(cancelled), booked if cancelled else None, team.interviewers[0], booked, booked,
            )  # fmt: skip
            for position, user in enumerate(rng.sample(team.interviewers, rng.choice(PANELS))):
                calendar.weeks[number, user, slot // SLOTS_A_WEEK] += 1
                submitted = not cancelled and ends < calendar.now and rng.random() < SUBMITTED
                owed = not cancelled and not submitted and ends >= calendar.now
                reminder = stamp(ends + REMINDED_AFTER) if owed else None
                rows.add(
                    "interview_interviewers", interview, user, position, stamp(starts), stamp(ends),
                    str(cancelled).lower(), reminder,
                )  # fmt: skip
                if submitted:
                    verdict = rng.choice(RECOMMENDATIONS)
                    rows.add("scorecards", interview, application, user, verdict, stamp(ends + 3600))


async def fresh_applications(conn: Connection, calendar: Calendar, count: int) -> list[tuple[int, str]]:
    """`count` applications in `reviewed`, each by a new candidate, to the accounts in turn: (account, id)."""
    rows, made = Rows(), []
    applied = stamp(calendar.now - DAY)
    for line in range(count):
        number = line % ACCOUNTS
        team = calendar.teams[number]
        candidate, candidate_account = rows.person(f"Applicant {line}")
        application = str(uuid.uuid4())
        rows.add("applications", application, calendar.rng.choice(team.jobs), candidate, candidate_account,
                 "reviewed", applied, applied)  # fmt: skip
        made.append((number, application))
    await rows.copy(conn)
    await conn.execute("ANALYZE applications")
    return made


def booking_lines(calendar: Calendar, applications: Sequence[tuple[int, str]]) -> list[Line]:
    """One `interviews.create` for each application, in a slot no size seeds, from next week on: none conflicts."""
    rng = calendar.rng
    free: dict[int, Iterator[int]] = {}
    lines = []
    for number, application in applications:
        team = calendar.teams[number]
        if number not in free:
            free[number] = _free_slots(team)
        starts = calendar.start(next(free[number]))
        zone = zoneinfo.ZoneInfo(team.zone)
        body = {
            "application_id": application,
            "starts_at": dt.datetime.fromtimestamp(starts, zone).isoformat(),
            "ends_at": dt.datetime.fromtimestamp(starts + 60 * rng.choice(MINUTES), zone).isoformat(),
            "time_zone": team.zone,
            "interviewer_ids": rng.sample(team.interviewers, rng.choice(PANELS)),
            "title": rng.choice(KINDS),
            "video_url": _meeting_link(rng),
        }
        encoded = msgspec.json.encode(body).decode()
        lines.append(("POST", "/v1/interviews.create", f"Bearer {team.key}", "application/json", encoded))
    return lines


def _free_slots(team: Team) -> Iterator[int]:
    """The slots no size seeds for `team`, from next week on."""
    taken = set(team.plan)
    return (slot for slot in itertools.count((WEEKS_BACK + 1) * SLOTS_A_WEEK) if slot not in taken)


def week_lines(calendar: Calendar, count: int) -> tuple[list[Line], float]:
    """`count` requests for an interviewer's week that holds interviews, drawn at random among every such
    interviewer and week seeded; and how many interviews such a week holds on average."""
    weeks = sorted(calendar.weeks)
    drawn = calendar.rng.choices(weeks, k=count)
    lines = []
    for number, user, week in drawn:
        monday = calendar.epoch + week * WEEK
        query = urllib.parse.urlencode({"interviewer_id": user, "from": _utc(monday), "to": _utc(monday + WEEK)})
        lines.append(("GET", f"/v1/interviews.list?{query}", f"Bearer {calendar.teams[number].key}", "", ""))
    return lines, sum(calendar.weeks[one] for one in drawn) / max(1, count)


def _utc(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _meeting_link(rng: random.Random) -> str:
    return f"https://meet.example.com/{rng.getrandbits(40):010x}"
