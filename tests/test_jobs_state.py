"""A rule-based walk over job transitions through HTTP (docs/decisions.md): every answer — 200,
409 invalid_transition, 403 forbidden, 404 not_found — is what a small model of the jobs predicts, and the
public list's exact total follows the published jobs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from tests.support import Admin, Call, User, published_count

# Who acts: two employers of account A, an employer of account B, a platform admin, a candidate.
ACTORS = ("owner", "colleague", "stranger", "operator", "candidate")
CREATORS = ("owner", "colleague", "stranger", "operator")
TRANSITIONS = {"jobs.publish": ("draft", "published"), "jobs.close": ("published", "closed")}


@dataclass
class Model:
    account_id: str
    status: str
    title: str


def expected(actor: User, job: Model, name: str) -> tuple[int, str | None]:
    """The status and error code the contract predicts for `actor` calling `name` on `job`."""
    sees = job.status != "draft" or actor.account_id == job.account_id or actor.role == "admin"
    owns = actor.account_id == job.account_id or actor.role == "admin"
    if name == "jobs.get":
        return (200, None) if sees else (404, "not_found")
    if actor.role == "candidate":
        return 403, "forbidden"
    if not sees:
        return 404, "not_found"
    if not owns:
        return 403, "forbidden"
    if name in TRANSITIONS and job.status != TRANSITIONS[name][0]:
        return 409, "invalid_transition"
    return 200, None


def test_job_transitions_follow_the_model(call: Call, admin: Admin, employer: User, candidate: User) -> None:
    actors: dict[str, User] = {
        "owner": employer,
        "colleague": admin.user("employer", account_id=employer.account_id),
        "stranger": admin.user("employer"),
        "operator": admin.user("admin"),
        "candidate": candidate,
    }

    class JobMachine(RuleBasedStateMachine):
        jobs = Bundle("jobs")

        def __init__(self) -> None:
            super().__init__()
            self.model: dict[str, Model] = {}
            # Whatever exists before this walk (earlier walks leave their jobs behind).
            self.before = published_count(admin)
            self.before_in_a = len(self.account_jobs(employer.account_id))

        @staticmethod
        def account_jobs(account_id: str) -> list[dict[str, Any]]:
            return admin.sql("SELECT id FROM jobs WHERE account_id = %(a)s", {"a": account_id})

        @staticmethod
        def answer(response: httpx.Response, outcome: tuple[int, str | None], job: Model, name: str) -> None:
            """Check `response` against the predicted `outcome`; `job` is the model after the call."""
            status, code = outcome
            assert response.status_code == status, (name, job, response.text)
            body = response.json()
            if code is None:
                assert body["result"]["status"] == job.status
                assert body["result"]["title"] == job.title
            else:
                assert body["error"]["code"] == code, body
            if code == "invalid_transition":
                assert body["error"]["details"] == {"from": job.status, "to": TRANSITIONS[name][1]}

        @initialize(target=jobs)
        def first_job(self) -> str:
            return self.create_job("owner")

        @rule(target=jobs, creator=st.sampled_from(CREATORS))
        def create(self, creator: str) -> str:
            return self.create_job(creator)

        def create_job(self, creator: str) -> str:
            actor = actors[creator]
            title = f"walk {uuid.uuid4().hex[:8]}"
            response = call("jobs.create", actor, title=title, company="Walk", location="Anywhere")
            assert response.status_code == 200, response.text
            job = response.json()["result"]
            assert job["status"] == "draft" and job["title"] == title
            self.model[job["id"]] = Model(account_id=actor.account_id, status="draft", title=title)
            return str(job["id"])

        @rule(job_id=jobs, who=st.sampled_from(ACTORS), name=st.sampled_from(sorted(TRANSITIONS)))
        def transition(self, job_id: str, who: str, name: str) -> None:
            job, actor = self.model[job_id], actors[who]
            outcome = expected(actor, job, name)
            response = call(name, actor, id=job_id)
            if outcome[0] == 200:
                job.status = TRANSITIONS[name][1]
            self.answer(response, outcome, job, name)

        @rule(job_id=jobs, who=st.sampled_from(ACTORS), title=st.sampled_from(["Renamed", "Again", None]))
        def update(self, job_id: str, who: str, title: str | None) -> None:
            job, actor = self.model[job_id], actors[who]
            outcome = expected(actor, job, "jobs.update")
            params = {"title": title} if title is not None else {}
            response = call("jobs.update", actor, id=job_id, **params)
            if outcome[0] == 200 and title is not None:
                job.title = title
            self.answer(response, outcome, job, "jobs.update")

        @rule(job_id=jobs, who=st.sampled_from(ACTORS))
        def get(self, job_id: str, who: str) -> None:
            job, actor = self.model[job_id], actors[who]
            self.answer(call("jobs.get", actor, id=job_id), expected(actor, job, "jobs.get"), job, "jobs.get")

        @invariant()
        def public_total_counts_the_published_jobs(self) -> None:
            response = call("jobs.list", actors["candidate"], per_page=1)
            assert response.status_code == 200, response.text
            published_here = sum(job.status == "published" for job in self.model.values())
            assert response.json()["result"]["total"] == self.before + published_here

        @invariant()
        def mine_counts_every_status_of_the_account(self) -> None:
            response = call("jobs.list", actors["colleague"], mine=True, per_page=1)
            assert response.status_code == 200, response.text
            here = sum(job.account_id == employer.account_id for job in self.model.values())
            assert response.json()["result"]["total"] == self.before_in_a + here

    run_state_machine_as_test(
        JobMachine,
        settings=settings(
            max_examples=25,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    assert published_count(admin) == int(
        admin.sql("SELECT total FROM job_totals WHERE status = 'published'")[0]["total"]
    )
