"""A stored file as the API shows it, and the SQL fragment that reads one as JSON beside other rows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from rpc.core.envelope import Struct


class File(Struct, frozen=True, kw_only=True):
    """An uploaded file: its name as sent, ending with the extension of its type (`with_extension`), its type as
    detected from its content, its size and SHA-256."""

    id: str
    filename: str
    content_type: str
    size: int
    sha256: str
    created_at: dt.datetime


COLUMNS = "id::text AS id, filename, content_type, size, sha256, created_at"


def as_json(alias: str) -> str:
    """A File of the table aliased `alias` as a JSON object, for a subquery beside other rows (`nested`)."""
    return (
        f"json_build_object('id', {alias}.id::text, 'filename', {alias}.filename, 'content_type', "
        f"{alias}.content_type, 'size', {alias}.size, 'sha256', {alias}.sha256, 'created_at', {alias}.created_at)"
    )


def nested(value: Any) -> File | None:
    """The File of an `as_json` column (its time as PostgreSQL writes it in JSON), None for none."""
    return None if value is None else msgspec.convert(value, File)


def nested_list(values: list[Any]) -> list[File]:
    """The Files of a JSON array of `as_json` objects."""
    return msgspec.convert(values, list[File])
