"""What the framework holds about a person, for their export (docs/privacy.md; KVKK art. 11, GDPR arts. 15 and 20).

Read in one place for `profile.export` and the panel's "Download my data" (the business adds its rows:
`rpc.privacy.steps`), and recorded as `profile.exported` in the caller's transaction before it is read, so the
document lists its own export among the audit entries.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rpc.audit import log as audit_log
from rpc.audit.entries import COLUMNS as AUDIT_COLUMNS
from rpc.audit.entries import AuditEntry
from rpc.core.envelope import Struct
from rpc.core.types import Connection
from rpc.files.links import DownloadLinks
from rpc.files.model import COLUMNS as FILE_COLUMNS
from rpc.files.model import File
from rpc.privacy.profile import Profile, read_profile


class ExportedApiKey(Struct, frozen=True, kw_only=True):
    id: str
    name: str
    mode: str
    prefix: str
    scopes: list[str]
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    revoked_at: dt.datetime | None


class ExportedGrant(Struct, frozen=True, kw_only=True):
    id: str
    client_id: str
    client_name: str
    scopes: list[str]
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    expires_at: dt.datetime
    revoked_at: dt.datetime | None


class ExportedSession(Struct, frozen=True, kw_only=True):
    id: str
    kind: str  # "web" (the panel's and consent page's cookie) or "api" (a refresh-token family)
    created_at: dt.datetime
    expires_at: dt.datetime


class ExportedFile(File, frozen=True, kw_only=True):
    """A file the person uploaded, with a link to its bytes (valid as long as `files.get`'s)."""

    download_url: str


class Held(Struct, frozen=True, kw_only=True):
    """What the framework holds about a person; the business adds its rows to make the export's document
    (`rpc.privacy.steps.PrivacySteps.document`)."""

    profile: Profile
    files: list[ExportedFile]
    api_keys: list[ExportedApiKey]
    oauth_grants: list[ExportedGrant]
    sessions: list[ExportedSession]
    audit: list[AuditEntry]


_FILES = f"SELECT {FILE_COLUMNS} FROM files WHERE owner_id = %(id)s ORDER BY created_at DESC, id"
_API_KEYS = """
SELECT id::text AS id, name, mode, prefix, scopes, created_at, last_used_at, revoked_at
FROM api_keys WHERE user_id = %(id)s ORDER BY created_at DESC, id
"""
_GRANTS = """
SELECT g.id::text AS id, g.client_id, c.name AS client_name, g.scopes, g.created_at, g.last_used_at, g.expires_at,
       g.revoked_at
FROM oauth_grants AS g JOIN oauth_clients AS c ON c.id = g.client_id
WHERE g.user_id = %(id)s ORDER BY g.created_at DESC, g.id
"""
_SESSIONS = """
SELECT id::text AS id, 'web' AS kind, created_at, expires_at FROM web_sessions
WHERE user_id = %(id)s AND expires_at > now()
UNION ALL
SELECT family_id::text, 'api', min(created_at), max(expires_at) FROM refresh_tokens
WHERE user_id = %(id)s AND revoked_at IS NULL GROUP BY family_id HAVING max(expires_at) > now()
ORDER BY created_at DESC
"""
# What the person did, and what was done to them (a sign-in, an erasure): both use an index.
_ABOUT = f"""
SELECT {AUDIT_COLUMNS} FROM audit_entries WHERE actor_kind = 'user' AND actor_id = %(id)s
UNION
SELECT {AUDIT_COLUMNS} FROM audit_entries WHERE target_id = %(id)s
ORDER BY at DESC, id DESC
"""


async def held(
    conn: Connection,
    user_id: str,
    *,
    account_id: str,
    actor: audit_log.Actor,
    origin: audit_log.Origin,
    links: DownloadLinks,
) -> Held:
    """Record `profile.exported` and read what the framework holds about the user, in `conn`'s open transaction (the
    entry commits with the export or not at all); `NotFound` when the user is gone."""
    profile = await read_profile(conn, user_id)
    await audit_log.record(
        conn, "profile.exported", account_id=account_id, actor=actor, target_id=user_id, origin=origin
    )

    async def rows(query: str) -> list[dict[str, Any]]:
        return await (await conn.execute(query, {"id": user_id})).fetchall()

    return Held(
        profile=profile,
        files=[ExportedFile(**row, download_url=links.url(row["id"])) for row in await rows(_FILES)],
        api_keys=[ExportedApiKey(**row) for row in await rows(_API_KEYS)],
        oauth_grants=[ExportedGrant(**row) for row in await rows(_GRANTS)],
        sessions=[ExportedSession(**row) for row in await rows(_SESSIONS)],
        audit=[AuditEntry(**row) for row in await rows(_ABOUT)],
    )
