"""Files: résumés and attachments (docs/files.md). Uploaded as multipart/form-data, accepted by their content
alone; their bytes kept in the file store before their row commits; read back through short-lived signed
links, by the person who uploaded them and by the employers of the jobs they were sent to."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from rpc.api import Context, Id, IdParams, InvalidParams, NotFound, UnsupportedMediaType, Upload, parse_id, procedure
from rpc.files.detect import ACCEPTED_TEXT, detect, with_extension
from rpc.files.links import Downloader
from rpc.files.model import COLUMNS, File
from rpc.files.service import Files

_INSERT = f"""
INSERT INTO files (id, owner_id, filename, content_type, size, sha256)
VALUES (%(id)s, %(owner_id)s, %(filename)s, %(content_type)s, %(size)s, %(sha256)s)
RETURNING {COLUMNS}
"""
# The uploader's own, or — for an employer or admin — one held by an application to their account's jobs.
_VISIBLE = f"""
SELECT {COLUMNS}, owner_id = %(user_id)s AS own FROM files AS f
WHERE f.id = %(id)s
  AND (f.owner_id = %(user_id)s
       OR (%(employs)s AND EXISTS (
           SELECT FROM application_files AS af
           JOIN applications AS a ON a.id = af.application_id
           JOIN jobs AS j ON j.id = a.job_id
           WHERE af.file_id = f.id AND j.account_id = %(account_id)s)))
"""
# The applications a File was sent with keep it from the files sweep (`Business.file_holders`).
FILE_HOLDERS = ("SELECT FROM application_files AS af WHERE af.file_id = f.id",)
_OWNED = f"SELECT {COLUMNS} FROM files WHERE id = ANY(%(ids)s) AND owner_id = %(user_id)s FOR KEY SHARE"
_OWN = f"SELECT {COLUMNS} FROM files WHERE id = %(id)s AND owner_id = %(user_id)s"


class FileDownload(File, frozen=True, kw_only=True):
    """A File and a link to its bytes, valid for ten minutes, that works without credentials."""

    download_url: str


def files_of(ctx: Context) -> Files:
    if ctx.files is None:
        raise RuntimeError("the dispatcher hands every call the file store")
    return ctx.files


@procedure("files.upload", scope=("write:applications", "write:profile"), write=True, calls_out=True, upload=True)
async def upload(ctx: Context, params: Upload) -> File:
    """Upload a file (multipart/form-data, one part `file`): PDF, DOCX, ODT or plain UTF-8 text, told by its
    content, at most FILES_MAX_BYTES (10 MiB); it is named with its type's extension (`cv.vbs` that is text is kept
    as `cv.vbs.txt`). Refer to it from `applications.create` or `profile.update` within 24 hours, or it is
    deleted."""
    return await save_upload(ctx, params)


async def save_upload(ctx: Context, params: Upload) -> File:
    """The staged file kept as the caller's File, told by its content (`422` empty, `415` of no accepted type):
    its bytes in the store first, then its row in `ctx.transaction()` — a File never lacks its bytes — recorded
    as the call's progress, so that a retry with the call's Idempotency-Key after a failure answers that File
    instead of keeping a second. A page that takes a file in a form of its own (the apply page, the candidate's
    home) calls it too."""
    if ctx.resumed is not None:  # an earlier run of this call kept the File, then failed before answering
        return await _kept_before(ctx, ctx.resumed["file_id"])
    staged = Path(params.path)
    if params.size == 0:
        raise InvalidParams([{"field": "file", "message": "The file is empty."}])
    content_type = await asyncio.to_thread(detect, staged)
    if content_type is None:
        raise UnsupportedMediaType(
            f"This file is none of the accepted types ({ACCEPTED_TEXT}); the type is told by the content, "
            "whatever the name or declared type says."
        )
    file_id = str(uuid.uuid4())
    await files_of(ctx).store.put(file_id, staged)  # the bytes first: a File never lacks them
    values = {
        "id": file_id,
        "owner_id": ctx.principal.user_id,
        "filename": with_extension(params.filename, content_type),  # a name that promises no other type
        "content_type": content_type,
        "size": params.size,
        "sha256": params.sha256,
    }
    async with ctx.transaction() as conn:
        row = await (await conn.execute(_INSERT, values)).fetchone()
        await ctx.record_progress(conn, {"file_id": file_id})
    return File(**row)  # type: ignore[arg-type]


async def _kept_before(ctx: Context, file_id: str) -> File:
    async with ctx.transaction() as conn:
        row = await (await conn.execute(_OWN, {"id": file_id, "user_id": ctx.principal.user_id})).fetchone()
    if row is None:
        raise NotFound("The file this call kept is gone; upload it again with a new Idempotency-Key.")
    return File(**row)


@procedure("files.get", scope=("read:applications", "read:profile"))
async def get(ctx: Context, params: IdParams) -> FileDownload:
    """A file you uploaded (with either scope), or one sent with an application to your account's jobs (with
    `read:applications`), with a `download_url` valid for ten minutes (it needs no credentials: share it with
    care)."""
    principal = ctx.principal
    values = {
        "id": parse_id(params.id),
        "user_id": principal.user_id,
        "account_id": principal.account_id,
        # An applicant's file is part of their application: `read:profile` is about one's own.
        "employs": principal.role in ("employer", "admin") and principal.has_scope("read:applications"),
    }
    row = await (await ctx.conn.execute(_VISIBLE, values)).fetchone()
    if row is None:
        raise NotFound("No such file.")
    own = row.pop("own")
    actor = ctx.actor
    downloader = None if own else Downloader(account_id=principal.account_id, actor=f"{actor.kind}:{actor.id}")
    return FileDownload(**row, download_url=files_of(ctx).links.url(row["id"], downloader))


async def owned(ctx: Context, ids: list[Id]) -> dict[str, File]:
    """The caller's own files among `ids`, by id, locked against the sweep until the call commits; `404` naming
    the first id that is not one of them."""
    wanted = [parse_id(value) for value in ids]
    rows = await (await ctx.conn.execute(_OWNED, {"ids": wanted, "user_id": ctx.principal.user_id})).fetchall()
    found = {row["id"]: File(**row) for row in rows}
    for file_id in wanted:
        if str(file_id) not in found:
            raise NotFound(f"No such file: {file_id}. Upload it first with files.upload.")
    return found
