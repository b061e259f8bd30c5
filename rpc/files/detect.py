"""What a file is, told by its content alone (never its name or declared type): PDF, DOCX, ODT or UTF-8 text.

The `filetype` library reads the signature; DOCX and ODT are zip archives, and a signature read from the first
entries is no proof, so each is also opened as an archive and must hold its format's marker: `word/document.xml`
beside `[Content_Types].xml` (OOXML), and a `mimetype` entry naming an ODF text document (ODF 1.2 §3.3).
"""

from __future__ import annotations

import codecs
import re
import zipfile
from pathlib import Path

import filetype

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT = "application/vnd.oasis.opendocument.text"
TEXT = "text/plain; charset=utf-8"
ACCEPTED = {PDF: "PDF", DOCX: "DOCX (Word)", ODT: "ODT (OpenDocument text)", TEXT: "plain UTF-8 text"}
ACCEPTED_TEXT = ", ".join(ACCEPTED.values())

_CHUNK = 64 * 1024
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


def _document(path: Path) -> str | None:
    """DOCX or ODT if the archive opens and carries its format's marker."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if {"[Content_Types].xml", "word/document.xml"} <= names:
                return DOCX
            if "mimetype" in names and archive.getinfo("mimetype").file_size < 100:
                return ODT if archive.read("mimetype").strip() == ODT.encode() else None
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError):
        return None
    return None


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
