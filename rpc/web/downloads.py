"""`/files/{id}/download`: the bytes of a file to whoever holds a valid signed link (rpc/files/links.py), with
no credential, and served so that no browser runs or sniffs them: an attachment, under the type detected at
upload, `nosniff`, a sandboxing CSP, never cached. A link an employer asked for records `file.downloaded` in
their account's audit log before the first byte leaves."""

from __future__ import annotations

import typing

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from rpc.audit import log as audit_log
from rpc.core.errors import Forbidden, NotFound
from rpc.core.responses import error_response
from rpc.core.types import Connection
from rpc.files.detect import with_extension
from rpc.files.links import PATH, Downloader, LinkRefused, attachment
from rpc.services import services
from rpc.web.auth_api import client_address

_FILE = "SELECT filename, content_type, size FROM files WHERE id = %(id)s"
_ACTOR_KINDS = typing.get_args(audit_log.ActorKind)


async def download(request: Request) -> Response:
    running = services(request)
    file_id = request.path_params["id"]
    try:
        downloader = running.files.links.check(file_id, request.query_params)
    except LinkRefused:
        return error_response(Forbidden("This download link has expired or was altered: ask files.get for a new one."))
    async with running.pool.connection() as conn, conn.transaction():
        row = await (await conn.execute(_FILE, {"id": file_id})).fetchone()
        if row is None:
            return error_response(NotFound("This file no longer exists."))
        if downloader is not None and request.method == "GET":
            await _audit(conn, file_id, downloader, request)
    headers = {
        # Kept so since upload; files kept before that are named so here.
        "Content-Disposition": attachment(with_extension(row["filename"], row["content_type"])),
        "Content-Length": str(row["size"]),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
        "Cache-Control": "private, no-store",
    }
    if request.method == "HEAD":
        return Response(headers=headers, media_type=row["content_type"])
    return StreamingResponse(running.files.store.read(file_id), headers=headers, media_type=row["content_type"])


async def _audit(conn: Connection, file_id: str, downloader: Downloader, request: Request) -> None:
    kind, _, actor_id = downloader.actor.partition(":")
    if kind not in _ACTOR_KINDS:  # signed by us, so never: but the log takes only its kinds
        raise ValueError(f"unknown actor kind {kind!r}")
    await audit_log.record(
        conn,
        "file.downloaded",
        account_id=downloader.account_id,
        actor=audit_log.Actor(typing.cast(audit_log.ActorKind, kind), actor_id),
        target_id=file_id,
        origin=audit_log.Origin(client_address(request), request.headers.get("user-agent", "")),
    )


routes = [Route(PATH, download, methods=["GET"])]
