"""What a file is, told by its content alone (never its name or declared type): PDF, DOCX, ODT or UTF-8 text.

The `filetype` library reads the signature; DOCX and ODT are zip archives, and a signature read from the first
entries is no proof, so each is also opened as an archive and must hold its format's marker: `word/document.xml`
beside `[Content_Types].xml` (OOXML), and a `mimetype` entry naming an ODF text document (ODF 1.2 section 3.3).

Telling never inflates more than it needs, whatever an archive declares: at most `ARCHIVE_READ_LIMIT` bytes of
it are read in all (its directory, where each entry costs memory, is read whole), and of `mimetype` only its
first `_MARKER_BYTES`, inflated through `ZipFile.open` (whose `read(n)` inflates about `n` bytes, where
`ZipFile.read` inflates the whole entry before cutting it to its declared size: a zip bomb).
"""

from __future__ import annotations

import codecs
import re
import zipfile
from pathlib import Path
from typing import BinaryIO

import filetype

from rpc.core.multipart import FILENAME_MAX

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT = "application/vnd.oasis.opendocument.text"
TEXT = "text/plain; charset=utf-8"
ACCEPTED = {PDF: "PDF", DOCX: "DOCX (Word)", ODT: "ODT (OpenDocument text)", TEXT: "plain UTF-8 text"}
ACCEPTED_TEXT = ", ".join(ACCEPTED.values())
# The one extension a file of each type is named with: a name that promises another type (`cv.vbs` that is text,
# a PDF named `cv.html`) would have a downloader's system open it as that type.
EXTENSIONS = {PDF: ".pdf", DOCX: ".docx", ODT: ".odt", TEXT: ".txt"}

_CHUNK = 64 * 1024
# What telling a document may read of its archive: the end record (and a comment of up to 64 KiB), the directory
# (a real document's holds a few dozen entries, a few KiB; this bounds it to a few thousand, a few MB of memory),
# and one entry's first bytes.
ARCHIVE_READ_LIMIT = 256 * 1024
_MARKER_BYTES = 64  # more than ODT's marker: a longer one is another type
# Text holds no control characters but tab, line feed, form feed and carriage return.
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def detect(path: Path) -> str | None:
    """The accepted content type of the file at `path`, or None when it is none of them."""
    kind = filetype.guess(str(path))
    mime = kind.mime if kind is not None else None
    if mime == PDF:
        return PDF
    if mime in (DOCX, ODT, "application/zip"):
        return _document(path)
    if mime is None and _is_text(path):
        return TEXT
    return None


def with_extension(filename: str, content_type: str) -> str:
    """The name a file of `content_type` (one of `EXTENSIONS`) is kept and downloaded under: `filename` when it
    already ends with the type's extension (in any case), else with it added (`cv.vbs` → `cv.vbs.txt`, `cv.html` →
    `cv.html.pdf`), the name before it cut so that the whole stays within `FILENAME_MAX`."""
    extension = EXTENSIONS[content_type]
    if filename.lower().endswith(extension):
        return filename
    return filename[: FILENAME_MAX - len(extension)] + extension


def _document(path: Path) -> str | None:
    """DOCX or ODT if the archive opens within its read limit and carries its format's marker."""
    try:
        with path.open("rb") as raw, zipfile.ZipFile(_Limited(raw, ARCHIVE_READ_LIMIT)) as archive:
            names = set(archive.namelist())
            if {"[Content_Types].xml", "word/document.xml"} <= names:
                return DOCX
            if "mimetype" in names:
                return ODT if _marker(archive, "mimetype") == ODT.encode() else None
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError):
        return None
    return None


def _marker(archive: zipfile.ZipFile, name: str) -> bytes:
    """The first bytes of entry `name`, stored or deflated (bzip2 and LZMA inflate a whole block per read, however
    little is asked: such a marker is refused, b"")."""
    entry = archive.getinfo(name)
    if entry.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return b""
    with archive.open(entry) as opened:
        return opened.read(_MARKER_BYTES).strip()


class ArchiveTooLarge(ValueError):
    """Reading the archive went past its read limit: no document of ours needs that much read to be told."""


class _Limited:
    """A seekable binary file that gives at most `most` bytes in all, then raises `ArchiveTooLarge`: the file
    object `ZipFile` reads an archive through, so that nothing the archive declares makes it read (and allocate)
    more."""

    def __init__(self, raw: BinaryIO, most: int) -> None:
        self._raw = raw
        self._left = most

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(self._left + 1 if n < 0 or n > self._left else n)
        self._left -= len(data)
        if self._left < 0:
            raise ArchiveTooLarge(f"telling the type would read more than {ARCHIVE_READ_LIMIT:,} bytes of the archive")
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def seekable(self) -> bool:
        return True


def _is_text(path: Path) -> bool:
    """Valid UTF-8 throughout, without control characters."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            if _CONTROL.search(chunk):
                return False
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                return False
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True
