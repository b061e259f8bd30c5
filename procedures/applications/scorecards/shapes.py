"""A scorecard on the wire: what an interviewer submits, what a reader sees of it (all of it, or, under the
no-peeking rule, only that it exists), and its event."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from procedures.jobs.shapes import AttributeName
from rpc.api import EXAMPLE_ID, NO_NUL, FieldError, Id, PageParams, Params, Struct

Recommendation = Literal["strong_no", "no", "yes", "strong_yes"]
RECOMMENDATION = "`strong_no`, `no`, `yes` or `strong_yes`: would you hire this person?"
Note = Annotated[str, msgspec.Meta(max_length=2_000, pattern=NO_NUL)]
Notes = Annotated[str, msgspec.Meta(max_length=20_000, pattern=NO_NUL)]


class Rating(Params, frozen=True, kw_only=True):
    """One of the job's scorecard attributes, rated 1 (weak) to 4 (strong)."""

    attribute: AttributeName
    rating: Annotated[int, msgspec.Meta(ge=1, le=4, description="1 (weak) to 4 (strong).")]
    note: Note | None = None


class Scorecard(Struct, frozen=True, kw_only=True):
    """An interviewer's feedback on one interview. A reader held to the no-peeking rule sees only `id`,
    `interview_id`, `interviewer_id` and `submitted_at`: that it was submitted, not what it says."""

    id: str
    interview_id: str
    application_id: str | msgspec.UnsetType = msgspec.UNSET
    interviewer_id: str
    recommendation: Recommendation | msgspec.UnsetType = msgspec.UNSET
    ratings: list[Rating] | msgspec.UnsetType = msgspec.UNSET
    notes: str | None | msgspec.UnsetType = msgspec.UNSET
    submitted_at: dt.datetime


class ScorecardSubmitted(Struct, frozen=True, kw_only=True):
    """Data of `scorecard.submitted`: who submitted on which interview, never what they recommend (every member
    reads the account's events)."""

    scorecard_id: str
    interview_id: str
    application_id: str
    job_id: str
    interviewer_id: str


class SubmitScorecard(Params, frozen=True, kw_only=True):
    interview_id: Id
    recommendation: Annotated[Recommendation, msgspec.Meta(description=RECOMMENDATION)]
    ratings: Annotated[
        tuple[Rating, ...],
        msgspec.Meta(max_length=20, description="Each attribute rated once.", extra_json_schema={"uniqueItems": True}),
    ] = ()
    notes: Notes | None = None

    example: ClassVar[Mapping[str, Any]] = {
        "interview_id": EXAMPLE_ID,
        "recommendation": "yes",
        "ratings": [{"attribute": "SQL", "rating": 4, "note": "Wrote the window query unprompted."}],
        "notes": "Clear thinker; would like a second opinion on system design.",
    }

    def __post_init__(self) -> None:
        named = [rating.attribute for rating in self.ratings]
        if len(set(named)) != len(named):
            raise FieldError("ratings", "Rate each attribute once.")


class ListScorecards(PageParams, frozen=True, kw_only=True):
    application_id: Id | None = None
    interview_id: Id | None = None

    example: ClassVar[Mapping[str, Any]] = {"application_id": EXAMPLE_ID}

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.application_id is None) == (self.interview_id is None):
            raise FieldError("application_id", "Give one of application_id and interview_id.")
