"""Reading form-encoded bodies (`application/x-www-form-urlencoded`), strictly: UTF-8, bounded, every field
possibly repeated so that callers can refuse repeats (RFC 6749 section 3.1: no parameter more than once)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

from starlette.requests import Request

from rpc.core.params import read_body

FORM = "application/x-www-form-urlencoded"
MAX_FORM_BYTES = 64 * 1024
MAX_FIELDS = 100

Fields = Mapping[str, list[str]]


class FormError(ValueError):
    """A body that is not a well-formed, UTF-8, form-encoded body of reasonable size."""


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").partition(";")[0].strip().lower()


async def read_form(request: Request) -> Fields:
    """The fields of a form-encoded body, each with every value sent for it."""
    if media_type(request) != FORM:
        raise FormError(f"Send the form as {FORM}.")
    return parse_form(await read_body(request, MAX_FORM_BYTES))


def parse_form(body: bytes) -> Fields:
    try:
        return urllib.parse.parse_qs(
            body.decode("utf-8"),
            keep_blank_values=True,
            strict_parsing=False,
            max_num_fields=MAX_FIELDS,
            errors="strict",
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormError("The form is not valid UTF-8 form encoding.") from exc


def single(fields: Fields, name: str) -> str | None:
    """The one value of `name`, None when absent; FormError when it was sent more than once."""
    values = fields.get(name, [])
    if len(values) > 1:
        raise FormError(f"{name} was sent more than once.")
    return values[0] if values else None
