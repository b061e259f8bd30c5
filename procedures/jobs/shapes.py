"""The jobs' shapes: their states, the Structs a job is read and written as, the columns they are read from, and
the params of the jobs' procedures (`reads.py`, `writes.py`). The search (`search/`) and other rooms use them too."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from rpc.api import EXAMPLE_ID, SPACE, FieldError, Id, LongText, PageParams, Params, PlainText, Role, ShortText, Struct

EmploymentType = Literal["full_time", "part_time", "contract", "internship", "temporary"]
# What interviewers rate on a job's scorecards (docs/interviews.md): a name of 1 to 80 characters on one line.
_LINE = r"\x00-\x1f\x7f"
AttributeName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=80, pattern=rf"^[^{_LINE}]*[^{_LINE}{SPACE}][^{_LINE}]*$")
]
ScorecardAttributes = Annotated[
    tuple[AttributeName, ...],
    msgspec.Meta(
        max_length=20,
        description="What interviewers rate on this job's scorecards: up to 20 names, distinct whatever the case.",
        extra_json_schema={"uniqueItems": True},
    ),
]
JobStatus = Literal["draft", "published", "closed"]
EMPLOYERS: tuple[Role, ...] = ("employer", "admin")


class JobSummary(Struct, frozen=True, kw_only=True):
    """A job as it appears in lists."""

    id: str
    title: str
    company: str
    location: str
    status: JobStatus
    created_at: dt.datetime


class Job(JobSummary, frozen=True, kw_only=True):
    """A job in full."""

    description: str | None
    employment_type: EmploymentType | None
    updated_at: dt.datetime
    published_at: dt.datetime | None
    closed_at: dt.datetime | None
    scorecard_attributes: list[str]


class JobEvent(Struct, frozen=True, kw_only=True):
    """Data of `job.published`, `job.closed` and `job.updated`."""

    job_id: str
    title: str
    status: JobStatus


class ListJobs(PageParams, frozen=True, kw_only=True):
    q: PlainText | None = None
    location: PlainText | None = None
    company: PlainText | None = None
    employment_type: EmploymentType | None = None
    mine: bool = False

    example: ClassVar[Mapping[str, Any]] = {"q": "engineer", "location": "Berlin", "page": 1, "per_page": 20}


class CreateJob(Params, frozen=True, kw_only=True):
    title: ShortText
    company: ShortText
    location: ShortText
    description: LongText | None = None
    employment_type: EmploymentType | None = None
    scorecard_attributes: ScorecardAttributes = ()

    example: ClassVar[Mapping[str, Any]] = {
        "title": "Backend engineer",
        "company": "Acme GmbH",
        "location": "Berlin",
        "description": "Python, PostgreSQL and a taste for well-kept APIs.",
        "employment_type": "full_time",
        "scorecard_attributes": ["SQL", "System design", "Communication"],
    }

    def __post_init__(self) -> None:
        distinct_attributes(self.scorecard_attributes)


class UpdateJob(Params, frozen=True, kw_only=True):
    id: Id
    title: ShortText | msgspec.UnsetType = msgspec.UNSET
    company: ShortText | msgspec.UnsetType = msgspec.UNSET
    location: ShortText | msgspec.UnsetType = msgspec.UNSET
    description: LongText | None | msgspec.UnsetType = msgspec.UNSET
    employment_type: EmploymentType | None | msgspec.UnsetType = msgspec.UNSET
    scorecard_attributes: ScorecardAttributes | msgspec.UnsetType = msgspec.UNSET

    example: ClassVar[Mapping[str, Any]] = {"id": EXAMPLE_ID, "title": "Senior backend engineer"}

    def __post_init__(self) -> None:
        if self.scorecard_attributes is not msgspec.UNSET:
            distinct_attributes(self.scorecard_attributes)


# The columns a `JobSummary` and a `Job` are read from.
SUMMARY_COLUMNS = "id::text AS id, title, company, location, status, created_at"
JOB_COLUMNS = (
    f"{SUMMARY_COLUMNS}, description, employment_type, updated_at, published_at, closed_at, scorecard_attributes"
)


def distinct_attributes(names: tuple[str, ...]) -> None:
    """Scorecard attributes are told apart by name, whatever the case: `SQL` and `sql` are one attribute."""
    seen: set[str] = set()
    for name in names:
        if name.casefold() in seen:
            raise FieldError("scorecard_attributes", f"{name!r} is there twice; name each attribute once.")
        seen.add(name.casefold())
