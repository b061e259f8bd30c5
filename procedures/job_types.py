"""A job as lists show it, and the values of its kinds and states: shared by the jobs' procedures and by the
search over them (which imports these, never `procedures.jobs`, so the two rooms depend one way)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from rpc.core.envelope import Struct

EmploymentType = Literal["full_time", "part_time", "contract", "internship", "temporary"]
JobStatus = Literal["draft", "published", "closed"]


class JobSummary(Struct, frozen=True, kw_only=True):
    """A job as it appears in lists."""

    id: str
    title: str
    company: str
    location: str
    status: JobStatus
    created_at: dt.datetime
