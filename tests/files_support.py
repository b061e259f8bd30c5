"""Tiny real documents of each accepted type (and near misses), and helpers to upload them and run the sweep."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import socket
import zipfile
from typing import Any

import httpx

from procedures.files import FILE_HOLDERS
from rpc.core.types import Connection
from rpc.files.store import Store
from rpc.files.sweep import sweep, sweep_strays
from rpc.ops import admin as ops
from tests.support import User

PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT_TYPE = "application/vnd.oasis.opendocument.text"


def archive(entries: list[tuple[str, bytes]]) -> bytes:
    """A zip of `entries` in order (the first stored, as ODF wants its `mimetype`)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as made:
        for index, (name, data) in enumerate(entries):
            made.writestr(name, data, compress_type=zipfile.ZIP_STORED if index == 0 else zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


DOCX = archive(
    [
        ("[Content_Types].xml", b"<Types xmlns='http://schemas.openxmlformats.org/package/2006/content-types'/>"),
        ("_rels/.rels", b"<Relationships/>"),
        ("word/document.xml", b"<w:document xmlns:w='urn:w'><w:body/></w:document>"),
    ]
)
ODT = archive([("mimetype", ODT_TYPE.encode()), ("content.xml", b"<office:document-content/>")])
XLSX = archive([("[Content_Types].xml", b"<Types/>"), ("xl/workbook.xml", b"<workbook/>")])
ODS = archive([("mimetype", b"application/vnd.oasis.opendocument.spreadsheet"), ("content.xml", b"<c/>")])
ZIP = archive([("notes.txt", b"just a zip")])
TEXT = "Ayşe Yılmaz — backend engineer\n\tPython, PostgreSQL\n".encode()


def one_page_pdf(text: str) -> bytes:
    """A real one-page PDF showing `text` (ASCII, no parentheses or backslashes), its cross-reference table
    pointing at each object's offset, as a PDF reader wants it."""
    content = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<</Type/Catalog/Pages 2 0 R>>",
        b"<</Type/Pages/Kids[3 0 R]/Count 1>>",
        b"<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]/Contents 4 0 R/Resources<</Font<</F1 5 0 R>>>>>>",
        b"<</Length %d>>stream\n%s\nendstream" % (len(content), content),
        b"<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>",
    ]
    document = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(document))
        document += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    table = len(document)
    document += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    document += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return document + b"trailer\n<</Size %d/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, table)


def raw_request(port: int, head: bytes, body_parts: list[bytes]) -> bytes:
    """Send `head` and `body_parts` on a socket to the loopback `port`, then read the answer's head without
    sending anything more (to see a refusal come before the body was all sent)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head)
        for part in body_parts:
            conn.sendall(part)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def upload(
    client: httpx.Client,
    who: User | dict[str, str],
    data: bytes,
    filename: str = "cv.pdf",
    content_type: str = "application/pdf",
) -> httpx.Response:
    headers = who.auth if isinstance(who, User) else who
    return client.post("/v1/files.upload", files={"file": (filename, data, content_type)}, headers=headers)


def run_sweep(database_url: str, store: Store, *, now: dt.datetime | None = None, strays: bool = False) -> Any:
    """One run of the files sweep (or of the strays' sweep) in a transaction of its own, as a worker runs it."""

    async def go() -> Any:
        async with await ops.connect(database_url) as conn, conn.transaction():
            return await _one(conn, store, now, strays)

    return asyncio.run(go())


async def _one(conn: Connection, store: Store, now: dt.datetime | None, strays: bool) -> Any:
    return await sweep_strays(conn, store, now=now) if strays else await sweep(conn, store, FILE_HOLDERS, now=now)


async def keys(store: Store) -> set[str]:
    return {key async for key, _ in store.listing()}


def stored(store: Store) -> set[str]:
    """Every key the store holds."""
    return asyncio.run(keys(store))
