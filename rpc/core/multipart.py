"""Reading a `multipart/form-data` body — the one file of an upload call (`@procedure(upload=True)`), or a
page's form with a file beside a few small text fields — the file streamed to a staging file on disk while it
arrives, its SHA-256 computed on the way: the body is never held in memory, only the bounded text fields.

A body is refused (`413`) as soon as it can be told too large: by its Content-Length before a byte is read,
else the moment the file's bytes pass the limit (or a text field its bound, or the whole body the limit by more
than the part headers and the text fields need). A malformed body, a missing `file` part, a part the form does
not name or any part sent twice is `422` (on the field `file` unless a text field is the one at fault); so is a
boundary RFC 2046 does not allow (1 to 70 of its characters, not ending in a space), on `Content-Type`, before a
byte of the body is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Annotated, Any, ClassVar

import msgspec
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from rpc.core.envelope import Params
from rpc.core.errors import InvalidParams, PayloadTooLarge, UnsupportedMediaType

FIELD = "file"
FRAMING = 16 * 1024  # what boundaries and part headers may add to the file's own bytes
FILENAME_MAX = 255
_ESCAPED = (("%22", '"'), ("%0D", "\r"), ("%0A", "\n"))
# RFC 2046 section 5.1.1: 1 to 70 `bchars`, the last not a space.
_BOUNDARY = re.compile(rb"[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]")


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


@dataclass(frozen=True, slots=True)
class Shape:
    """What one multipart body may hold: the file, as the part named `file` (required, or optional: what a
    browser sends for an empty file input, a part with an empty filename and no bytes, is then no file), and
    small text fields, each at most once and within its bytes. The text fields' bounds bound the whole body, and
    their names the count of parts."""

    file: str = FIELD
    file_required: bool = True
    fields: Mapping[str, int] = field(default_factory=dict)

    @property
    def framing(self) -> int:
        """What the body may hold besides the file's own bytes."""
        return FRAMING + sum(self.fields.values())

    def refused(self, field_message: str, name: str | None = None) -> InvalidParams:
        return InvalidParams([{"field": name or self.file, "message": field_message}])

    def expected(self) -> str:
        """How to send the body, for the messages that refuse one."""
        if not self.fields:
            return f"Send the file as the part named '{self.file}', with its filename."
        names = ", ".join(f"'{name}'" for name in self.fields)
        return f"Send the file as the part named '{self.file}', with its filename, and the fields {names} once each."


UPLOAD = Shape()  # files.upload: one part, the file


@dataclass(frozen=True, slots=True)
class Form:
    """A multipart body read: its text fields by name, and its file staged on disk (the caller removes it)."""

    fields: Mapping[str, str]
    file: Upload | None


class _Parts:
    """The callbacks of the streaming parser: headers of each part, the file's bytes to the staging file, the
    text fields' bytes to memory (each within its bound)."""

    def __init__(self, staging: IO[bytes], limit: int, shape: Shape) -> None:
        self._staging = staging
        self._limit = limit
        self._shape = shape
        self._header_name = b""
        self._header_value = b""
        self._disposition = b""
        self._text: str | None = None  # the name of the text field being read, None while in the file
        self._buffer = bytearray()
        self.parts = 0
        self.filename: str | None = None
        self.named = False  # whether the file part came with a filename (an empty file input sends none)
        self.fields: dict[str, str] = {}
        self.size = 0
        self.digest = hashlib.sha256()
        self.done = False

    def on_part_begin(self) -> None:
        self.parts += 1
        if self.parts > 1 + len(self._shape.fields):
            if not self._shape.fields:
                raise self._shape.refused(f"Send exactly one part, named '{self._shape.file}', with the file.")
            raise self._shape.refused(self._shape.expected())
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
        name = options.get(b"name", b"").decode("utf-8", "replace")
        if name == self._shape.file and b"filename" in options and self.filename is None:
            sent = options[b"filename"].decode("utf-8", "replace")
            self.named = bool(sent)
            self.filename = clean_filename(sent)
            self._text = None
        elif name in self._shape.fields and b"filename" not in options and name not in self.fields:
            self._text = name
            self._buffer.clear()
        else:
            raise self._shape.refused(self._shape.expected())

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._text is not None:
            self._buffer += data[start:end]
            if len(self._buffer) > self._shape.fields[self._text]:
                raise PayloadTooLarge(f"The field '{self._text}' is larger than the form allows.")
            return
        self.size += end - start
        if self.size > self._limit:
            raise PayloadTooLarge(f"The file is larger than {self._limit:,} bytes.")
        chunk = data[start:end]
        self.digest.update(chunk)
        self._staging.write(chunk)

    def on_part_end(self) -> None:
        if self._text is not None:
            try:
                self.fields[self._text] = self._buffer.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self._shape.refused("The field is not valid UTF-8.", self._text) from exc
            self._text = None

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
    form = await read_form(request, limit, UPLOAD)
    assert form.file is not None  # UPLOAD requires it
    return form.file


async def read_form(request: Request, limit: int, shape: Shape) -> Form:
    """The request's text fields and its file (staged, at most `limit` bytes), as `shape` allows; `415` unless
    the body is multipart/form-data."""
    media_type, options = parse_options_header(request.headers.get("content-type", ""))
    if media_type != b"multipart/form-data" or not options.get(b"boundary"):
        raise UnsupportedMediaType(
            f"Send the file as 'Content-Type: multipart/form-data' with one part named '{shape.file}'."
        )
    boundary = options[b"boundary"]
    if not _BOUNDARY.fullmatch(boundary):
        raise InvalidParams(
            [
                {
                    "field": "Content-Type",
                    "message": "The multipart boundary must be 1 to 70 letters, digits or '()+_,-./:=? (RFC 2046), "
                    "not ending in a space.",
                }
            ]
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit + shape.framing:
        raise PayloadTooLarge(f"The file is larger than {limit:,} bytes.")
    descriptor, name = tempfile.mkstemp(prefix="hire-upload-")
    try:
        with os.fdopen(descriptor, "wb") as staging:
            parts = _Parts(staging, limit, shape)
            await _parse(request, boundary, parts, limit + shape.framing, shape)
    except BaseException:
        os.unlink(name)
        raise
    if not parts.done or (parts.filename is None and shape.file_required):
        os.unlink(name)
        raise shape.refused(f"The body holds no complete part named '{shape.file}'.")
    if parts.filename is None or (not shape.file_required and not parts.named and parts.size == 0):
        os.unlink(name)  # no file, or a browser's empty file input
        return Form(parts.fields, None)
    upload = Upload(filename=parts.filename, path=name, size=parts.size, sha256=parts.digest.hexdigest())
    return Form(parts.fields, upload)


async def _parse(request: Request, boundary: bytes, parts: _Parts, most: int, shape: Shape) -> None:
    callbacks = {
        "on_part_begin": parts.on_part_begin,
        "on_header_field": parts.on_header_field,
        "on_header_value": parts.on_header_value,
        "on_header_end": parts.on_header_end,
        "on_headers_finished": parts.on_headers_finished,
        "on_part_data": parts.on_part_data,
        "on_part_end": parts.on_part_end,
        "on_end": parts.on_end,
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
    except FormParserError as exc:  # the parser's every refusal of a body
        raise shape.refused(f"The body is not valid multipart/form-data: {exc}.") from exc
