"""An alert's parameters and its shape, the settings of the alert mail, and the one-click unsubscribe token."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from procedures.jobs.search.request import Query, Search, SearchJobs, Types
from procedures.jobs.shapes import EmploymentType
from rpc.api import Params, PlainText, Struct
from rpc.core.crypto import token_hash

Frequency = Literal["instant", "daily"]
MAX_ALERTS = 20  # per person


class CreateAlert(Params, frozen=True, kw_only=True):
    q: Query | None = None
    location: PlainText | None = None
    company: PlainText | None = None
    employment_type: Types | None = None
    frequency: Annotated[
        Frequency,
        msgspec.Meta(description="`instant`: within a minute of publishing; `daily`: one digest a day."),
    ]

    example: ClassVar[Mapping[str, Any]] = {
        "q": "python develo",
        "location": "Berlin",
        "employment_type": ["full_time", "contract"],
        "frequency": "instant",
    }


class Alert(Struct, frozen=True, kw_only=True):
    """A saved search: the jobs `jobs.search` would find with these parameters are mailed as they are published."""

    id: str
    q: str | None
    location: str | None
    company: str | None
    employment_type: list[EmploymentType] | None
    frequency: Frequency
    created_at: dt.datetime


COLUMNS = "id::text AS id, q, location, company, employment_type, frequency, created_at"


def search_of(row: Any, secret_key: str) -> Search:
    """The alert's parameters resolved exactly as `jobs.search` resolves a call with them."""
    return Search.of(
        SearchJobs(
            q=row["q"], location=row["location"], company=row["company"], employment_type=row["employment_type"]
        ),
        secret_key,
    )


class AlertSettings(msgspec.Struct, frozen=True, kw_only=True):
    """`ALERT_*`: how long an instant alert gathers the jobs of its first match before mailing them, and how far
    apart a daily alert's digests are (tests shrink both)."""

    instant_seconds: Annotated[float, msgspec.Meta(ge=0, le=60)] = 30.0
    digest_seconds: Annotated[float, msgspec.Meta(gt=0)] = 86_400.0


def unsubscribe_token(secret_key: str, alert_id: str) -> str:
    """The alert's one-click unsubscribe token: an HMAC of its id under the service's key, so that every mail can
    carry it while the database keeps only its hash (`unsubscribe_hash`)."""
    key = hashlib.sha256(b"hire alert unsubscribe v1\x00" + secret_key.encode()).digest()
    digest = hmac.new(key, uuid.UUID(alert_id).bytes, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def unsubscribe_hash(secret_key: str, alert_id: str) -> bytes:
    return token_hash(unsubscribe_token(secret_key, alert_id))
