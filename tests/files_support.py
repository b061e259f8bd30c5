"""Tiny real documents of each accepted type (and near misses), and helpers to upload them and run the sweep."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import zipfile
from typing import Any

import httpx

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
    return await sweep_strays(conn, store, now=now) if strays else await sweep(conn, store, now=now)


async def keys(store: Store) -> set[str]:
    return {key async for key, _ in store.listing()}


def stored(store: Store) -> set[str]:
    """Every key the store holds."""
    return asyncio.run(keys(store))
