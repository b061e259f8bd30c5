"""A résumé sent from a page's form (the apply page, the candidate's home): the form read by the API's own
multipart reader — the file staged on disk while it arrives, at most FILES_MAX_BYTES, refused early when larger;
the text fields bounded — and the file kept by files.upload's own code (rpc/core/multipart.py,
procedures/files.py), so that a page accepts exactly what the API accepts, told by the content."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from procedures.public_pages.site import message
from rpc.api import InvalidParams, UnsupportedMediaType
from rpc.core.errors import PayloadTooLarge
from rpc.core.multipart import Form, Shape, read_form
from rpc.files.detect import ACCEPTED_TEXT
from rpc.services import services

FIELD = "resume"
CSRF_BYTES = 1024  # a session's CSRF token is 43 characters
# What the file input offers to choose (a hint to the browser's picker only: the server tells by content).
ACCEPT = ",".join(
    (
        ".pdf",
        ".docx",
        ".odt",
        ".txt",
        "application/pdf",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.oasis.opendocument.text",
        "text/plain",
    )
)


def shape(*, required: bool, **fields: int) -> Shape:
    """A page form of the résumé file and `csrf_token`, with `fields` (name → most bytes) beside them."""
    return Shape(file=FIELD, file_required=required, fields={"csrf_token": CSRF_BYTES, **fields})


def limit_of(request: Request) -> int:
    return services(request).settings.files_max_bytes


def resume_input(request: Request) -> Mapping[str, Any]:
    """What the templates' résumé input (`public/resume_input.html`) shows: the types it accepts and the limit."""
    return {"resume_accept": ACCEPT, "resume_types": ACCEPTED_TEXT, "resume_max": _megabytes(limit_of(request))}


async def read(request: Request, form: Shape, back: str, unreadable: str) -> Form | Response:
    """The form, or the page that says why it was not read: `413` for a file past the limit (the rest of the
    body unread), `400` with `unreadable` for any other body."""
    limit = limit_of(request)
    try:
        return await read_form(request, limit, form)
    except PayloadTooLarge:
        text = f"A résumé holds up to {_megabytes(limit)} ({limit:,} bytes). Go back and choose a smaller file."
        return message(413, "The file is too large", text, link=(back, "Back to the form"))
    except (UnsupportedMediaType, InvalidParams):
        return message(400, "Bad request", unreadable)


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.3g} MB"
