"""Reading the one file of a `multipart/form-data` call (`@procedure(upload=True)`), streamed to a staging file
on disk while it arrives, its SHA-256 computed on the way: the body is never held in memory.

A body is refused (`413`) as soon as it can be told too large: by its Content-Length before a byte is read,
else the moment the file's bytes pass the limit (or the whole body passes it by more than the part headers
need). A malformed body, a missing `file` part or any second part is `422` on the field `file`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import unicodedata
from collections.abc import Mapping
from typing import IO, Annotated, Any, ClassVar

import msgspec
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from rpc.core.envelope import Params
from rpc.core.errors import InvalidParams, PayloadTooLarge, UnsupportedMediaType

FIELD = "file"
FRAMING = 16 * 1024  # what boundaries and part headers may add to the file's own bytes
FILENAME_MAX = 255
_ESCAPED = (("%22", '"'), ("%0D", "\r"), ("%0A", "\n"))


class Upload(Params, frozen=True, kw_only=True):
    """The file of an upload call, staged on disk for the duration of the call (the dispatcher removes it)."""

    filename: Annotated[str, msgspec.Meta(min_length=1, max_length=FILENAME_MAX)]
    path: str
    size: int
    sha256: str

    # What the dispatcher stages for a one-page résumé (the reference shows the multipart form, not this).
    example: ClassVar[Mapping[str, Any]] = {
        "filename": "resume.pdf",
        "path": "upload-0001",
        "size": 48213,
        "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    }

    def discard(self) -> None:
        """Remove the staged bytes."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def _refused(field_message: str) -> InvalidParams:
    return InvalidParams([{"field": FIELD, "message": field_message}])


class _Part:
    """The callbacks of the streaming parser: headers of each part, the file's bytes to the staging file."""

    def __init__(self, staging: IO[bytes], limit: int) -> None:
        self._staging = staging
        self._limit = limit
        self._header_name = b""
        self._header_value = b""
        self._disposition = b""
        self.parts = 0
        self.filename: str | None = None
        self.size = 0
        self.digest = hashlib.sha256()
        self.done = False

    def on_part_begin(self) -> None:
        self.parts += 1
        if self.parts > 1:
            raise _refused(f"Send exactly one part, named '{FIELD}', with the file.")
        self._disposition = b""

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def on_header_end(self) -> None:
        if self._header_name.strip().lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_name = self._header_value = b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        if options.get(b"name") != FIELD.encode() or b"filename" not in options:
            raise _refused(f"Send the file as the part named '{FIELD}', with its filename.")
        self.filename = clean_filename(options[b"filename"].decode("utf-8", "replace"))

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        self.size += end - start
        if self.size > self._limit:
            raise PayloadTooLarge(f"The file is larger than {self._limit:,} bytes.")
        chunk = data[start:end]
        self.digest.update(chunk)
        self._staging.write(chunk)

    def on_end(self) -> None:
        self.done = True


def clean_filename(sent: str) -> str:
    """The name as the person's device knew it: the three characters browsers escape in it undone (WHATWG's
    multipart/form-data encoding: `"`, CR, LF), its last path segment (some send `C:\\fakepath\\cv.pdf`),
    without control characters, at most 255 characters; `file` when nothing is left."""
    for escaped, character in _ESCAPED:
        sent = sent.replace(escaped, character)
    name = sent.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in unicodedata.normalize("NFC", name) if unicodedata.category(c)[0] != "C").strip()
    return name[:FILENAME_MAX] or "file"


async def read_upload(request: Request, limit: int) -> Upload:
    """The request's one file part, staged; `415` unless the body is multipart/form-data."""
    media_type, options = parse_options_header(request.headers.get("content-type", ""))
    if media_type != b"multipart/form-data" or not options.get(b"boundary"):
        raise UnsupportedMediaType(
            f"Send the file as 'Content-Type: multipart/form-data' with one part named '{FIELD}'."
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit + FRAMING:
        raise PayloadTooLarge(f"The file is larger than {limit:,} bytes.")
    descriptor, name = tempfile.mkstemp(prefix="hire-upload-")
    try:
        with os.fdopen(descriptor, "wb") as staging:
            part = _Part(staging, limit)
            await _parse(request, options[b"boundary"], part, limit + FRAMING)
    except BaseException:
        os.unlink(name)
        raise
    if part.filename is None or not part.done:
        os.unlink(name)
        raise _refused(f"The body holds no complete part named '{FIELD}'.")
    return Upload(filename=part.filename, path=name, size=part.size, sha256=part.digest.hexdigest())


async def _parse(request: Request, boundary: bytes, part: _Part, most: int) -> None:
    callbacks = {
        "on_part_begin": part.on_part_begin,
        "on_header_field": part.on_header_field,
        "on_header_value": part.on_header_value,
        "on_header_end": part.on_header_end,
        "on_headers_finished": part.on_headers_finished,
        "on_part_data": part.on_part_data,
        "on_end": part.on_end,
    }
    parser = MultipartParser(boundary, callbacks)  # type: ignore[arg-type]
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > most:
                raise PayloadTooLarge(f"The body is larger than the file limit allows ({most:,} bytes).")
            parser.write(chunk)
        parser.finalize()
    except MultipartParseError as exc:
        raise _refused(f"The body is not valid multipart/form-data: {exc}.") from exc
