"""Applications and the recruiting loop that moves them: the shapes on the wire (an Application, its events, the
procedures' params) and the pipeline's statuses. The procedures are `pipeline` (applying and moving along), and
the loop's own rooms within this one: `interviews`, `scorecards` and `offers` (docs/interviews.md).

    pending → reviewed → interview_scheduled → offered → hired
    any non-final → rejected (the employer) or withdrawn (the candidate)

The employer may skip forward, never go back; `hired`, `rejected` and `withdrawn` are final. Every change
keeps a history row (who, when, from, to) and emits its event in the same transaction (`moves`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from rpc.api import EXAMPLE_ID, NO_NUL, SPACE, FieldError, Id, PageParams, Params, Role, Struct
from rpc.files.model import File

Status = Literal["pending", "reviewed", "interview_scheduled", "offered", "hired", "rejected", "withdrawn"]
PIPELINE: tuple[Status, ...] = ("pending", "reviewed", "interview_scheduled", "offered", "hired")
FINAL: frozenset[Status] = frozenset({"hired", "rejected", "withdrawn"})
EMPLOYERS: tuple[Role, ...] = ("employer", "admin")

CoverLetter = Annotated[str, msgspec.Meta(max_length=20_000, pattern=NO_NUL)]
ResumeUrl = Annotated[str, msgspec.Meta(max_length=2_000, pattern=rf"^https?://[^\x00{SPACE}]+$")]
Notes = Annotated[str, msgspec.Meta(max_length=20_000, pattern=NO_NUL)]
Rating = Annotated[int, msgspec.Meta(ge=1, le=5)]
Attachments = Annotated[
    tuple[Id, ...],
    msgspec.Meta(
        max_length=5,
        description="Up to 5 ids of files you uploaded, each once.",
        extra_json_schema={"uniqueItems": True},
    ),
]


class Candidate(Struct, frozen=True, kw_only=True):
    """Who applied, as their profile reads now: what the job's account needs to reach them (all null but the id
    once the person has erased themselves)."""

    id: str
    display_name: str | None
    email: str | None
    headline: str | None
    location: str | None


class Application(Struct, frozen=True, kw_only=True):
    """An application; `rating` and `notes` are the employer's and always null for the candidate. The job's
    account also reads `candidate`: who applied."""

    id: str
    job_id: str
    candidate_id: str
    candidate: Candidate | msgspec.UnsetType = msgspec.UNSET
    status: Status
    cover_letter: str | None
    resume_url: str | None
    rating: int | None
    notes: str | None
    resume: File | None
    attachments: list[File]
    created_at: dt.datetime
    updated_at: dt.datetime


class ApplicationCreated(Struct, frozen=True, kw_only=True):
    application_id: str
    job_id: str
    candidate_id: str
    status: Status
    candidate: Candidate


class StatusChanged(Struct, frozen=True, kw_only=True):
    application_id: str
    job_id: str
    old_status: Status
    new_status: Status
    updated_by: str


class Reviewed(Struct, frozen=True, kw_only=True):
    application_id: str
    job_id: str
    reviewed_by: str
    rating: int | None


class CreateApplication(Params, frozen=True, kw_only=True):
    job_id: Id
    cover_letter: CoverLetter | None = None
    resume_url: ResumeUrl | None = None
    resume_file_id: Id = None
    attachment_file_ids: Attachments = ()

    def __post_init__(self) -> None:
        # Ids only: a value that is none (null) names no file, and is refused as one (404) when the files are found.
        sent = [str(value) for value in (self.resume_file_id, *self.attachment_file_ids) if value is not None]
        if len(set(sent)) != len(sent):
            raise FieldError("attachment_file_ids", "Send each file once: as the résumé or as one attachment.")

    example: ClassVar[Mapping[str, Any]] = {
        "job_id": EXAMPLE_ID,
        "cover_letter": "I have run Python services in production for six years.",
        "resume_url": "https://example.com/ada-lovelace-cv.pdf",
    }


class ListApplications(PageParams, frozen=True, kw_only=True):
    job_id: Id | None = None
    status: Status | None = None

    example: ClassVar[Mapping[str, Any]] = {"status": "pending", "page": 1, "per_page": 20}


class UpdateStatus(Params, frozen=True, kw_only=True):
    id: Id
    status: Status

    example: ClassVar[Mapping[str, Any]] = {"id": EXAMPLE_ID, "status": "reviewed"}


class Review(Params, frozen=True, kw_only=True):
    id: Id
    rating: Rating | None | msgspec.UnsetType = msgspec.UNSET
    notes: Notes | None | msgspec.UnsetType = msgspec.UNSET

    example: ClassVar[Mapping[str, Any]] = {"id": EXAMPLE_ID, "rating": 4, "notes": "Strong on SQL; ask about on-call."}
