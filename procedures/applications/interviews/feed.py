"""A person's private calendar feed, `GET /calendar/{token}.ics`: every interview of theirs that is not
cancelled, from 30 days back, for Google Calendar, Outlook or any calendar that subscribes to an address.

The address is its own credential, so it is made to be unguessable and to be withdrawn: the token is the
person's id and their `calendar_epoch`, signed with a key derived from SERVICE_SECRET_KEY (nothing to store, and
the same address every time it is asked for); rotating raises the epoch, and the old address answers `404` at
once. A token is checked in constant time before the database is asked anything.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct
import uuid

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from procedures.applications.interviews import calendar
from procedures.applications.interviews.invitations import (
    BRIEFINGS,
    briefing_of,
    candidate_meeting,
    interviewer_meeting,
)
from rpc.services import services
from rpc.settings import Settings
from rpc.web.state import web

PATH = "/calendar/{token}.ics"
TOKEN_LINKS = (r"/calendar/([^/?]+)\.ics(?:\?.*)?",)  # the address is the credential: redacted in the access log
KEPT_DAYS = 30
MOST_EVENTS = 2_000  # a feed is bounded, whatever a person's history
_KEY_PURPOSE = b"hire calendar feed v1"
_MAC_BYTES = 16

_OWNER = (
    "SELECT id::text AS id, role FROM users WHERE id = %(id)s AND calendar_epoch = %(epoch)s AND deleted_at IS NULL"
)
_THEIRS = f"""
{BRIEFINGS}
WHERE i.cancelled_at IS NULL AND i.ends_at >= now() - make_interval(days => %(days)s)
  AND (i.candidate_id = %(id)s
       OR EXISTS (SELECT FROM interview_interviewers AS o WHERE o.interview_id = i.id AND o.user_id = %(id)s))
ORDER BY i.starts_at, i.id
LIMIT %(most)s
"""
_HEADERS = {
    "Cache-Control": "private, max-age=300",
    "X-Content-Type-Options": "nosniff",
    "Content-Disposition": 'inline; filename="interviews.ics"',
}


def token(settings: Settings, user_id: str, epoch: int) -> str:
    """The feed's token of this person at this epoch."""
    payload = uuid.UUID(user_id).bytes + struct.pack(">I", epoch)
    return base64.urlsafe_b64encode(payload + _mac(settings, payload)).rstrip(b"=").decode()


def url(settings: Settings, user_id: str, epoch: int) -> str:
    return settings.public_url + PATH.format(token=token(settings, user_id, epoch))


def _opened(settings: Settings, text: str) -> tuple[str, int] | None:
    """The person and epoch a token names, if this service signed it."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 16 + 4 + _MAC_BYTES:
        return None
    payload, mac = raw[:20], raw[20:]
    if not hmac.compare_digest(mac, _mac(settings, payload)):
        return None
    return str(uuid.UUID(bytes=payload[:16])), struct.unpack(">I", payload[16:])[0]


def _mac(settings: Settings, payload: bytes) -> bytes:
    key = hmac.new(settings.secret_key.encode(), _KEY_PURPOSE, hashlib.sha256).digest()
    return hmac.new(key, payload, hashlib.sha256).digest()[:_MAC_BYTES]


async def feed(request: Request) -> Response:
    """`GET /calendar/{token}.ics`."""
    settings = services(request).settings
    named = _opened(settings, request.path_params["token"])
    if named is None:
        return _gone()
    user_id, epoch = named
    async with web(request).pool.connection() as conn:
        owner = await (await conn.execute(_OWNER, {"id": user_id, "epoch": epoch})).fetchone()
        if owner is None:
            return _gone()
        values = {"id": user_id, "days": KEPT_DAYS, "most": MOST_EVENTS}
        rows = await (await conn.execute(_THEIRS, values)).fetchall()
    meetings = []
    for row in rows:
        briefing = briefing_of(row)
        as_candidate = briefing.candidate_id == user_id
        meetings.append((candidate_meeting if as_candidate else interviewer_meeting)(settings, briefing))
    body = calendar.feed(meetings, "Interviews")
    return Response(body, media_type="text/calendar; charset=utf-8", headers=_HEADERS)


def _gone() -> Response:
    return Response("No calendar at this address.", status_code=404, media_type="text/plain; charset=utf-8")


routes = [Route(PATH, feed, methods=["GET", "HEAD"])]
