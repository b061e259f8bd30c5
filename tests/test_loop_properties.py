"""Properties of the recruiting loop, found by hypothesis against the live service:

- no double booking, whatever mix of bookings, moves and cancellations arrives at once;
- a stateful walk (`RuleBasedStateMachine`) of applications, interviews, scorecards and offers through the API
  against a small model of the rules: every allowed step is taken, every other one refused with the right code,
  and nobody reads what they may not (scorecards under the no-peeking rule, the candidate's narrower view).
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import itertools
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.loop import ZONE, team
from tests.support import Admin, LiveServer, User, ok

FINAL = ("hired", "rejected", "withdrawn")
PIPELINE = ("pending", "reviewed", "interview_scheduled", "offered", "hired")
OPEN = ("pending_approval", "approved", "sent")
SHOWN = ("sent", "accepted", "declined", "expired")
HIDDEN_KEYS = {"id", "interview_id", "interviewer_id", "submitted_at"}
# Each example books in hours of its own, far from every other test's.
_days = itertools.count(3_000)


def _post(client: httpx.Client, name: str, who: User, **params: Any) -> httpx.Response:
    return client.post(f"/v1/{name}", json=params, headers=who.auth)


def _deadlocks(admin: Admin) -> int:
    rows = admin.sql("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
    return int(rows[0]["deadlocks"])


# --- no double booking under concurrency ---------------------------------------------------------------------

Operation = tuple[str, int, int, int]  # (kind, who: interviewer set or interview index, hour, length in half hours)
operations = st.lists(
    st.tuples(
        st.sampled_from(["book", "book", "move", "cancel"]), st.integers(0, 5), st.integers(0, 5), st.integers(1, 4)
    ),
    min_size=4,
    max_size=16,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=operations)
def test_no_double_booking_whatever_arrives_at_once(live: LiveServer, admin: Admin, batch: list[Operation]) -> None:
    with live.client() as client:
        owner = admin.user("employer")
        people = [admin.user("employer", account_id=owner.account_id) for _ in range(3)]
        job = ok(_post(client, "jobs.create", owner, title="Engineer", company="Acme", location="Izmir"))
        ok(_post(client, "jobs.publish", owner, id=job["id"]))
        applications = [
            ok(_post(client, "applications.create", admin.user("candidate"), job_id=job["id"])) for _ in range(3)
        ]
        day = dt.datetime.now(dt.UTC).replace(hour=8, minute=0, second=0, microsecond=0) + dt.timedelta(
            days=next(_days)
        )
        booked: list[str] = []
        # A first wave of bookings, so that moves and cancels have something to act on; then everything at once.
        for who in range(3):
            answer = _post(
                client, "interviews.create", owner, **_booking(applications[who], people[who : who + 1], day, who, 2)
            )
            booked.append(ok(answer)["id"])

        def run(operation: Operation) -> httpx.Response:
            kind, who, hour, length = operation
            with live.client() as http:
                if kind == "book":
                    interviewers = [people[who % 3], people[(who + 1) % 3]][: 1 + who // 3]
                    return _post(
                        http,
                        "interviews.create",
                        owner,
                        **_booking(applications[hour % 3], interviewers, day, hour, length),
                    )
                target = booked[who % len(booked)]
                if kind == "cancel":
                    return _post(http, "interviews.cancel", owner, id=target)
                starts, ends = _times(day, hour, length)
                return _post(http, "interviews.update", owner, id=target, starts_at=starts, ends_at=ends)

        deadlocks = _deadlocks(admin)
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(run, batch))
    assert all(answer.status_code in (200, 409) for answer in answers), [answer.text for answer in answers]
    # A deadlock is retried, and a second is a 503: one account's interview writes take turns, so none waits for
    # another in a circle (PostgreSQL may report its counts a little late: a miss here passes, never fails).
    assert _deadlocks(admin) == deadlocks, "interview writes waited for each other in a circle"
    for answer in answers:
        if answer.status_code == 409 and answer.json()["error"]["code"] == "conflict":
            assert set(answer.json()["error"]["details"]) == {"interview_id", "user_id", "starts_at", "ends_at"}
    ids = [application["id"] for application in applications]
    clashes = admin.sql(
        """SELECT a.id FROM interviews AS a JOIN interviews AS b ON a.id < b.id
           WHERE a.application_id = ANY(%(ids)s::uuid[]) AND b.application_id = ANY(%(ids)s::uuid[])
             AND a.cancelled_at IS NULL AND b.cancelled_at IS NULL
             AND tstzrange(a.starts_at, a.ends_at) && tstzrange(b.starts_at, b.ends_at)
             AND (a.candidate_id = b.candidate_id OR EXISTS (
                  SELECT FROM interview_interviewers AS x JOIN interview_interviewers AS y ON x.user_id = y.user_id
                  WHERE x.interview_id = a.id AND y.interview_id = b.id))""",
        {"ids": ids},
    )
    assert clashes == []
    copies = admin.sql(
        """SELECT o.interview_id FROM interview_interviewers AS o JOIN interviews AS i ON i.id = o.interview_id
           WHERE i.application_id = ANY(%(ids)s::uuid[])
             AND (o.starts_at, o.ends_at, o.cancelled)
                 IS DISTINCT FROM (i.starts_at, i.ends_at, i.cancelled_at IS NOT NULL)""",
        {"ids": ids},
    )
    assert copies == [], "every interviewer's copy of the time is the interview's"


def _times(day: dt.datetime, hour: int, half_hours: int) -> tuple[str, str]:
    start = day + dt.timedelta(hours=hour)
    return start.isoformat(), (start + dt.timedelta(minutes=30 * half_hours)).isoformat()


def _booking(
    application: dict[str, Any], interviewers: list[User], day: dt.datetime, hour: int, half_hours: int
) -> dict[str, Any]:
    starts, ends = _times(day, hour, half_hours)
    return {
        "application_id": application["id"],
        "starts_at": starts,
        "ends_at": ends,
        "time_zone": ZONE,
        "interviewer_ids": [one.user_id for one in interviewers],
    }


# --- a stateful walk through the loop ------------------------------------------------------------------------


@dataclass
class ModelInterview:
    interviewers: list[int]
    begun: bool
    cancelled: bool = False
    submitted: set[int] = field(default_factory=set)


@dataclass
class ModelOffer:
    status: str
    approvers: list[int]
    decided: int = 0


class Loop(RuleBasedStateMachine):
    """One application's way through the loop, by its job's account (an owner and three members), its candidate
    and an employer of another account, checked against a model after every step."""

    interviews = Bundle("interviews")
    live: LiveServer
    admin: Admin

    def __init__(self) -> None:
        super().__init__()
        self.client = self.live.client()
        self.hours = itertools.count(1)
        self.day = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)

    @initialize(target=interviews)
    def hire(self) -> str:
        hiring = team(self.admin, self._call, members=3)
        self.owner, self.members, self.candidate = hiring.owner, hiring.members, hiring.candidate
        self.stranger = self.admin.user("employer")
        self.application = hiring.application["id"]
        self.status = "pending"
        self.model: dict[str, ModelInterview] = {}
        self.offers: dict[str, ModelOffer] = {}
        self.epoch = next(_days)
        # An interview that is over, with all three members: scorecards and the no-peeking rule start here.
        return self.book({0, 1, 2}, begun=True)

    def teardown(self) -> None:
        self.client.close()

    def _call(self, name: str, who: User | str, **params: Any) -> httpx.Response:
        token = who.token if isinstance(who, User) else who
        return self.client.post(f"/v1/{name}", json=params, headers={"Authorization": f"Bearer {token}"})

    def _expect(self, answer: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
        assert answer.status_code == status, answer.text
        body: dict[str, Any] = answer.json()
        if code is not None:
            assert body["error"]["code"] == code, body
        return body

    def _decide(self, target: str) -> None:
        """The model's side of a move to a final status: interviews not begun cancelled, open offers cancelled."""
        for interview in self.model.values():
            if not interview.begun:
                interview.cancelled = True
        for offer in self.offers.values():
            if offer.status in OPEN:
                offer.status = "cancelled"
        self.status = target

    # --- the pipeline --------------------------------------------------------------------------------------

    @rule(to=st.sampled_from(["reviewed", "interview_scheduled", "offered", "hired", "rejected"]))
    def move(self, to: str) -> None:
        answer = self._call("applications.update_status", self.owner, id=self.application, status=to)
        allowed = self.status not in FINAL and (to == "rejected" or PIPELINE.index(to) > PIPELINE.index(self.status))
        if not allowed:
            self._expect(answer, 409, "invalid_transition")
            return
        self._expect(answer, 200)
        if to in FINAL:
            self._decide(to)
        else:
            self.status = to

    @rule()
    def withdraw(self) -> None:
        answer = self._call("applications.withdraw", self.candidate, id=self.application)
        if self.status in FINAL:
            self._expect(answer, 409, "invalid_transition")
        else:
            self._expect(answer, 200)
            self._decide("withdrawn")

    # --- interviews ----------------------------------------------------------------------------------------

    @rule(target=interviews, who=st.sets(st.integers(0, 2), min_size=1), begun=st.booleans())
    def book(self, who: set[int], begun: bool) -> str:
        hour = next(self.hours)
        start = self.day + dt.timedelta(days=-self.epoch if begun else self.epoch, hours=hour * 2)
        body = _booking({"id": self.application}, [self.members[i] for i in sorted(who)], start, 0, 2)
        answer = self._call("interviews.create", self.owner, **body)
        if self.status in FINAL:
            self._expect(answer, 409, "invalid_transition")
            return "none"
        made = self._expect(answer, 200)["result"]
        self.model[made["id"]] = ModelInterview(sorted(who), begun)
        if self.status in ("pending", "reviewed"):
            self.status = "interview_scheduled"
        return str(made["id"])

    @rule(interview=interviews)
    def cancel_interview(self, interview: str) -> None:
        if interview == "none":
            return
        answer = self._call("interviews.cancel", self.owner, id=interview)
        known = self.model[interview]
        if known.cancelled or known.begun:
            self._expect(answer, 409, "invalid_transition")
        else:
            self._expect(answer, 200)
            known.cancelled = True

    @rule(interview=interviews, member=st.integers(0, 2))
    def submit(self, interview: str, member: int) -> None:
        if interview == "none":
            return
        answer = self._call(
            "scorecards.submit",
            self.members[member],
            interview_id=interview,
            recommendation="yes",
            notes=f"by {member}",
        )
        known = self.model[interview]
        if member not in known.interviewers:
            self._expect(answer, 403, "forbidden")
        elif known.cancelled or not known.begun or member in known.submitted:
            self._expect(answer, 409, "conflict")
        else:
            self._expect(answer, 200)
            known.submitted.add(member)

    @rule(reader=st.integers(0, 2))
    def read_scorecards(self, reader: int) -> None:
        listed = self._expect(
            self._call("scorecards.list", self.members[reader], application_id=self.application, per_page=100), 200
        )["result"]["data"]
        owes = any(
            reader in one.interviewers and not one.cancelled and reader not in one.submitted
            for one in self.model.values()
        )
        expected = sum(len(one.submitted) for one in self.model.values())
        assert len(listed) == expected
        for card in listed:
            author = next(i for i, member in enumerate(self.members) if member.user_id == card["interviewer_id"])
            hidden = owes and author != reader
            assert (set(card) == HIDDEN_KEYS) == hidden, (card, owes)
            if not hidden:
                assert card["notes"] == f"by {author}"

    @rule()
    def outsiders_read_nothing(self) -> None:
        self._expect(self._call("scorecards.list", self.candidate, application_id=self.application), 404, "not_found")
        self._expect(self._call("scorecards.list", self.stranger, application_id=self.application), 404, "not_found")
        self._expect(self._call("applications.get", self.stranger, id=self.application), 404, "not_found")

    @rule()
    def the_candidate_reads_their_interviews(self) -> None:
        listed = self._expect(self._call("interviews.list", self.candidate, per_page=100), 200)["result"]
        assert {one["id"] for one in listed["data"]} == set(self.model)
        for one in listed["data"]:
            assert all(set(person) == {"user_id", "display_name"} for person in one["interviewers"])
            expected = "cancelled" if self.model[one["id"]].cancelled else None
            assert expected is None or one["status"] == expected

    # --- offers --------------------------------------------------------------------------------------------

    def _open(self) -> str | None:
        return next((key for key, offer in self.offers.items() if offer.status in OPEN), None)

    @rule(approvers=st.lists(st.integers(0, 2), unique=True, max_size=3))
    def make_offer(self, approvers: list[int]) -> None:
        body = {
            "application_id": self.application,
            "title": "Engineer",
            "start_date": "2027-03-01",
            "salary": {"amount": "70000", "currency": "EUR", "period": "year"},
            "expires_at": "2099-01-01T00:00:00Z",
            "approver_ids": [self.members[i].user_id for i in approvers],
        }
        answer = self._call("offers.create", self.owner, **body)
        if self.status in FINAL:
            self._expect(answer, 409, "invalid_transition")
        elif self._open() is not None:
            self._expect(answer, 409, "conflict")
        else:
            made = self._expect(answer, 200)["result"]
            self.offers[made["id"]] = ModelOffer("pending_approval" if approvers else "approved", approvers)
            assert made["status"] == self.offers[made["id"]].status

    @precondition(lambda self: self._open() is not None)
    @rule(member=st.integers(0, 2), approve=st.booleans())
    def decide_on_the_offer(self, member: int, approve: bool) -> None:
        key = self._open()
        assert key is not None
        offer = self.offers[key]
        decision = "approved" if approve else "rejected"
        answer = self._call("offers.approve", self.members[member], id=key, decision=decision)
        if member not in offer.approvers:
            self._expect(answer, 403, "forbidden")
        elif offer.status != "pending_approval":
            self._expect(answer, 409, "invalid_transition")
        elif offer.approvers.index(member) != offer.decided:
            self._expect(answer, 409, "conflict")
        else:
            self._expect(answer, 200)
            offer.decided += 1
            if not approve:
                offer.status = "rejected"
            elif offer.decided == len(offer.approvers):
                offer.status = "approved"

    @precondition(lambda self: self._open() is not None)
    @rule()
    def send_the_offer(self) -> None:
        key = self._open()
        assert key is not None
        answer = self._call("offers.send", self.owner, id=key)
        if self.offers[key].status != "approved":
            self._expect(answer, 409, "invalid_transition")
            return
        self._expect(answer, 200)
        self.offers[key].status = "sent"
        if PIPELINE.index(self.status) < PIPELINE.index("offered"):
            self.status = "offered"

    @precondition(lambda self: bool(self.offers))
    @rule(accept=st.booleans(), pick=st.integers(0, 10))
    def answer_an_offer(self, accept: bool, pick: int) -> None:
        key = list(self.offers)[pick % len(self.offers)]
        offer = self.offers[key]
        answer = self._call("offers.respond", self.candidate, id=key, decision="accept" if accept else "decline")
        if offer.status not in SHOWN:
            self._expect(answer, 404, "not_found")
        elif offer.status != "sent":
            self._expect(answer, 409, "invalid_transition")
        else:
            self._expect(answer, 200)
            offer.status = "accepted" if accept else "declined"
            if accept:
                self._decide("hired")

    @precondition(lambda self: bool(self.offers))
    @rule(pick=st.integers(0, 10))
    def cancel_an_offer(self, pick: int) -> None:
        key = list(self.offers)[pick % len(self.offers)]
        answer = self._call("offers.cancel", self.owner, id=key)
        if self.offers[key].status in OPEN:
            self._expect(answer, 200)
            self.offers[key].status = "cancelled"
        else:
            self._expect(answer, 409, "invalid_transition")

    @rule()
    def the_candidate_reads_their_offers(self) -> None:
        listed = self._expect(self._call("offers.list", self.candidate, application_id=self.application), 200)["result"]
        shown = {key for key, offer in self.offers.items() if offer.status in SHOWN}
        assert {one["id"] for one in listed["data"]} == shown
        assert all("approvals" not in one and "notes" not in one for one in listed["data"])

    @invariant()
    def the_application_is_where_the_model_says(self) -> None:
        if hasattr(self, "application"):
            seen = self._expect(self._call("applications.get", self.owner, id=self.application), 200)["result"]
            assert seen["status"] == self.status
            for key, offer in self.offers.items():
                assert (
                    self._expect(self._call("offers.get", self.owner, id=key), 200)["result"]["status"] == offer.status
                )


@pytest.fixture
def walk(live: LiveServer, admin: Admin) -> type[Loop]:
    Loop.live, Loop.admin = live, admin
    return Loop


def test_the_loop_keeps_its_rules(walk: type[Loop]) -> None:
    machine = walk.TestCase
    machine.settings = settings(max_examples=15, stateful_step_count=30, deadline=None)
    machine().runTest()
