"""A rule-based walk over application transitions through HTTP (docs/decisions.md, docs/webhooks.md): every answer of
`update_status`, `review` and `withdraw` — 200, 409 invalid_transition, 403 forbidden, 404 not_found — is what a
small model of the application predicts; every accepted change emits exactly one `application.status_changed`
with the right old and new status, and every refused call changes nothing and emits nothing."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.support import Admin, Call, User, ok

PIPELINE = ("pending", "reviewed", "interview_scheduled", "offered", "hired")
FINAL = frozenset({"hired", "rejected", "withdrawn"})
STATUSES = (*PIPELINE, "rejected", "withdrawn")
# The employer of the job's account, an employer of another account, the applicant, another candidate.
ACTORS = ("owner", "stranger", "applicant", "rival")
# Who calls what, weighted toward the one whose call can succeed, so that walks get far along the pipeline.
EMPLOYER_MOVES = st.sampled_from(("owner", "owner", "owner", *ACTORS))
CANDIDATE_MOVES = st.sampled_from(("applicant", "applicant", *ACTORS))

OMIT = -1  # a review that does not send `rating` at all

Outcome = tuple[int, str | None]


def expected_update(actor: str, current: str, target: str) -> Outcome:
    if actor in ("applicant", "rival"):
        return 403, "forbidden"  # a candidate never calls update_status
    if actor == "stranger":
        return 404, "not_found"
    if target == "withdrawn":
        return 403, "forbidden"  # only the candidate withdraws
    if current in FINAL:
        return 409, "invalid_transition"
    if target == "rejected" or (target in PIPELINE and PIPELINE.index(target) > PIPELINE.index(current)):
        return 200, None
    return 409, "invalid_transition"


def expected_review(actor: str, current: str) -> Outcome:
    if actor in ("applicant", "rival"):
        return 403, "forbidden"
    if actor == "stranger":
        return 404, "not_found"
    if current in FINAL:
        return 409, "invalid_transition"
    return 200, None


def expected_withdraw(actor: str, current: str) -> Outcome:
    if actor in ("owner", "stranger"):
        return 403, "forbidden"  # employers never withdraw
    if actor == "rival":
        return 404, "not_found"  # another candidate's application is invisible
    if current in FINAL:
        return 409, "invalid_transition"
    return 200, None


def test_application_transitions_follow_the_model(call: Call, admin: Admin, employer: User, candidate: User) -> None:
    actors: dict[str, User] = {
        "owner": employer,
        "stranger": admin.user("employer"),
        "applicant": candidate,
        "rival": admin.user("candidate"),
    }

    def snapshot(application_id: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """In one round trip: the stored application, and every event about it by id (its kind and data)."""
        [row] = admin.sql(
            """SELECT a.status, a.rating, a.notes,
                      (SELECT coalesce(jsonb_object_agg(e.id::text, jsonb_build_object('kind', e.kind, 'data',
                                  convert_from(e.body, 'UTF8')::jsonb -> 'data')), '{}'::jsonb)
                       FROM events AS e
                       WHERE convert_from(e.body, 'UTF8')::jsonb -> 'data' ->> 'application_id' = %(id)s) AS events
               FROM applications AS a WHERE a.id = %(id)s::uuid""",
            {"id": application_id},
        )
        events = {key: {"kind": value["kind"], **value["data"]} for key, value in row.pop("events").items()}
        return row, events

    class ApplicationMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.id = ""
            self.status = "pending"
            self.rating: int | None = None
            self.seen: dict[str, dict[str, Any]] = {}

        @initialize()
        def apply(self) -> None:
            """A new published job of the owner's account and the applicant's application to it."""
            self.start()

        @precondition(lambda self: self.status in FINAL)
        @rule()
        def start_over(self) -> None:
            """A final application stays final: the walk goes on with a new one (one per candidate and job)."""
            self.start()

        def start(self) -> None:
            job = ok(call("jobs.create", employer, title=f"walk {uuid.uuid4().hex[:8]}", company="W", location="X"))
            ok(call("jobs.publish", employer, id=job["id"]))
            made = ok(call("applications.create", candidate, job_id=job["id"]))
            assert made["status"] == "pending"
            self.id, self.status, self.rating = made["id"], "pending", None
            _, self.seen = snapshot(self.id)
            assert [e["kind"] for e in self.seen.values()] == ["application.created"]

        def check(self, response: httpx.Response, outcome: Outcome, name: str, actor: str) -> dict[str, Any] | None:
            """The answer is the predicted one; the result of a success, else None."""
            status, code = outcome
            assert response.status_code == status, (name, actor, self.status, response.text)
            body = response.json()
            if code is not None:
                assert set(body) == {"error"} and body["error"]["code"] == code, body
                return None
            assert set(body) == {"result"}, body
            result: dict[str, Any] = body["result"]
            return result

        def new_events(self) -> list[dict[str, Any]]:
            """The events about the application written since the last step; the stored application must
            hold the model's status and rating."""
            row, now = snapshot(self.id)
            assert (row["status"], row["rating"]) == (self.status, self.rating), (row, self.status, self.rating)
            assert set(self.seen) <= set(now), "an event disappeared"
            fresh = [event for event_id, event in now.items() if event_id not in self.seen]
            self.seen = now
            return fresh

        def expect_change(self, before: str, actor: str, *, reviewed: bool = False) -> None:
            """Exactly the events of one accepted step: `status_changed` iff the status moved, with the right
            old and new status, and `application.reviewed` (with the model's rating) iff it was a review."""
            fresh = self.new_events()
            kinds = sorted(event["kind"] for event in fresh)
            wanted = (["application.reviewed"] if reviewed else []) + (
                ["application.status_changed"] if before != self.status else []
            )
            assert kinds == sorted(wanted), (before, self.status, fresh)
            for event in fresh:
                if event["kind"] == "application.status_changed":
                    assert (event["old_status"], event["new_status"]) == (before, self.status)
                    assert event["updated_by"] == actors[actor].user_id
                else:
                    assert event["rating"] == self.rating and event["reviewed_by"] == actors[actor].user_id
            seen = ok(call("applications.get", candidate, id=self.id))
            assert seen["status"] == self.status and seen["rating"] is None and seen["notes"] is None

        def expect_nothing(self) -> None:
            assert self.new_events() == []

        @rule(actor=EMPLOYER_MOVES, status=st.sampled_from(STATUSES))
        def update_status(self, actor: str, status: str) -> None:
            outcome = expected_update(actor, self.status, status)
            response = call("applications.update_status", actors[actor], id=self.id, status=status)
            result = self.check(response, outcome, "update_status", actor)
            if result is None:
                if outcome[1] == "invalid_transition":
                    assert response.json()["error"]["details"] == {"from": self.status, "to": status}
                self.expect_nothing()
                return
            before, self.status = self.status, status
            assert result["status"] == status and result["rating"] == self.rating
            self.expect_change(before, actor)

        @rule(
            actor=EMPLOYER_MOVES,
            rating=st.sampled_from((None, 1, 2, 3, 4, 5, OMIT)),
        )
        def review(self, actor: str, rating: int | None) -> None:
            outcome = expected_review(actor, self.status)
            params = {} if rating == OMIT else {"rating": rating}
            response = call("applications.review", actors[actor], id=self.id, **params)
            result = self.check(response, outcome, "review", actor)
            if result is None:
                self.expect_nothing()
                return
            if rating != OMIT:
                self.rating = rating
            before = self.status
            if self.status == "pending":
                self.status = "reviewed"
            assert result["status"] == self.status and result["rating"] == self.rating
            self.expect_change(before, actor, reviewed=True)

        @rule(actor=CANDIDATE_MOVES)
        def withdraw(self, actor: str) -> None:
            outcome = expected_withdraw(actor, self.status)
            response = call("applications.withdraw", actors[actor], id=self.id)
            result = self.check(response, outcome, "withdraw", actor)
            if result is None:
                if outcome[1] == "invalid_transition":
                    assert response.json()["error"]["details"] == {"from": self.status, "to": "withdrawn"}
                self.expect_nothing()
                return
            before, self.status = self.status, "withdrawn"
            assert result["status"] == "withdrawn" and result["rating"] is None  # the candidate's view
            self.expect_change(before, actor)

    run_state_machine_as_test(
        ApplicationMachine,
        settings=settings(
            max_examples=15,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
