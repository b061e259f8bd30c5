"""An interview on the wire: the parameters of its procedures, what a reader sees, and its events.

Times are RFC 3339 with their offset on the way in and UTC on the way out; `time_zone` is the IANA zone the
interview is held in (what its invitations show the wall time in).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from rpc.api import EXAMPLE_ID, NO_NUL, SPACE, Id, Moment, Params, PlainText, ShortText, Struct

InterviewStatus = Literal["scheduled", "awaiting_feedback", "completed", "cancelled"]
TimeZone = Annotated[
    str, msgspec.Meta(min_length=1, max_length=64, description="An IANA time zone name, e.g. Europe/Istanbul.")
]
InterviewerIds = Annotated[
    tuple[Id, ...],
    msgspec.Meta(
        min_length=1,
        max_length=10,
        description="1 to 10 distinct members (employers or admins) of the job's account.",
        extra_json_schema={"uniqueItems": True},
    ),
]
VideoUrl = Annotated[
    str, msgspec.Meta(max_length=2_000, pattern=rf"^https://[^\x00{SPACE}]+$", description="An https:// link.")
]
Reason = Annotated[str, msgspec.Meta(max_length=2_000, pattern=NO_NUL)]
PerPage = Annotated[int, msgspec.Meta(ge=1, le=100, description="Items per page, 1..100.")]
Cursor = Annotated[str, msgspec.Meta(max_length=400, description="The previous page's next_cursor.")]
Me = Annotated[Id, msgspec.Meta(description="A member's id, or `me` for yourself.")]


class Interviewer(Struct, frozen=True, kw_only=True):
    """Who interviews. The candidate sees names only: whether a scorecard was submitted is the employer's."""

    user_id: str
    display_name: str | None
    scorecard_submitted: bool | msgspec.UnsetType = msgspec.UNSET


class Interview(Struct, frozen=True, kw_only=True):
    """An interview of one application. `status` is as of the moment read: `scheduled` until `ends_at`, then
    `awaiting_feedback` until every interviewer has submitted a scorecard (`completed`); or `cancelled`.
    `sequence` grows with every change that alters what its invitations say."""

    id: str
    application_id: str
    job_id: str
    candidate_id: str
    title: str
    starts_at: dt.datetime
    ends_at: dt.datetime
    time_zone: str
    location: str | None
    video_url: str | None
    status: InterviewStatus
    interviewers: list[Interviewer]
    sequence: int
    created_at: dt.datetime
    updated_at: dt.datetime


class InterviewPage(Struct, frozen=True, kw_only=True):
    """A page of interviews in order of `starts_at`: `total` counts every match, `page` the pages walked with
    cursors (1 for the first), and `next_cursor` is null on the last page."""

    data: list[Interview]
    total: int
    page: int
    per_page: int
    next_cursor: str | None


class InterviewScheduled(Struct, frozen=True, kw_only=True):
    """Data of `interview.scheduled` and `interview.updated`."""

    interview_id: str
    application_id: str
    job_id: str
    starts_at: dt.datetime
    ends_at: dt.datetime
    interviewer_ids: list[str]


class InterviewRescheduled(Struct, frozen=True, kw_only=True):
    interview_id: str
    application_id: str
    job_id: str
    old_starts_at: dt.datetime
    old_ends_at: dt.datetime
    starts_at: dt.datetime
    ends_at: dt.datetime


class InterviewCancelled(Struct, frozen=True, kw_only=True):
    interview_id: str
    application_id: str
    job_id: str


class CreateInterview(Params, frozen=True, kw_only=True):
    application_id: Id
    starts_at: Moment
    ends_at: Moment
    time_zone: TimeZone
    interviewer_ids: InterviewerIds
    title: ShortText | None = None
    location: PlainText | None = None
    video_url: VideoUrl | None = None

    example: ClassVar[Mapping[str, Any]] = {
        "application_id": EXAMPLE_ID,
        "starts_at": "2026-12-08T10:00:00+03:00",
        "ends_at": "2026-12-08T11:00:00+03:00",
        "time_zone": "Europe/Istanbul",
        "interviewer_ids": ["5b2d6a1e-9c3f-4e8a-b7d2-0a1b2c3d4e5f"],
        "title": "Technical interview",
        "video_url": "https://meet.example.com/acme-backend",
    }


class UpdateInterview(Params, frozen=True, kw_only=True):
    id: Id
    starts_at: Moment | msgspec.UnsetType = msgspec.UNSET
    ends_at: Moment | msgspec.UnsetType = msgspec.UNSET
    time_zone: TimeZone | msgspec.UnsetType = msgspec.UNSET
    interviewer_ids: InterviewerIds | msgspec.UnsetType = msgspec.UNSET
    title: ShortText | msgspec.UnsetType = msgspec.UNSET
    location: PlainText | None | msgspec.UnsetType = msgspec.UNSET
    video_url: VideoUrl | None | msgspec.UnsetType = msgspec.UNSET

    example: ClassVar[Mapping[str, Any]] = {
        "id": EXAMPLE_ID,
        "starts_at": "2026-12-08T14:00:00+03:00",
        "ends_at": "2026-12-08T15:00:00+03:00",
    }


class CancelInterview(Params, frozen=True, kw_only=True):
    id: Id
    reason: Reason | None = None

    example: ClassVar[Mapping[str, Any]] = {"id": EXAMPLE_ID, "reason": "The candidate asked to move to next week."}


class ListInterviews(Params, frozen=True, kw_only=True):
    application_id: Id | None = None
    job_id: Id | None = None
    interviewer_id: Me | None = None
    status: InterviewStatus | None = None
    from_: Moment | None = msgspec.field(default=None, name="from")
    to: Moment | None = None
    cursor: Cursor | None = None
    per_page: PerPage = 20

    example: ClassVar[Mapping[str, Any]] = {
        "interviewer_id": "me",
        "from": "2026-12-07T00:00:00Z",
        "to": "2026-12-14T00:00:00Z",
    }


class CalendarUrlParams(Params, frozen=True, kw_only=True):
    rotate: Annotated[
        bool, msgspec.Meta(description="true: a new address (the old one answers 404 at once); needs write scope.")
    ] = False

    example: ClassVar[Mapping[str, Any]] = {"rotate": False}


class CalendarUrl(Struct, frozen=True, kw_only=True):
    """Your private calendar feed: every interview of yours not cancelled, from 30 days back. Anyone who holds
    the address can read it; rotate it if it leaks."""

    url: str
