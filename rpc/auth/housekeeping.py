"""Credentials that can no longer be used, deleted on a schedule by one of the workers.

Without it every sign-in and every token refresh would leave a row behind for good. A row goes only once
nothing can use it: an expired refresh token is refused before its reuse is even checked, and an expired web
session is refused at sight. (Used OAuth codes are kept a day past their expiry to catch a replay, and
deleted as new codes are issued: `rpc.auth.oauth`.)
"""

from __future__ import annotations

import logging

from rpc.core.periodic import EventSink, Periodic
from rpc.core.types import Connection

log = logging.getLogger(__name__)

SCHEDULE = "17 * * * *"  # hourly, off the hour
_FORGET_EXPIRED = (
    "DELETE FROM web_sessions WHERE expires_at < now()",
    "DELETE FROM refresh_tokens WHERE expires_at < now()",
    "DELETE FROM oauth_refresh_tokens WHERE expires_at < now()",
    "DELETE FROM email_links WHERE expires_at < now()",
    "DELETE FROM panel_reveals WHERE expires_at < now()",  # secrets the panel made and nobody came to see
)


async def forget_expired(conn: Connection) -> int:
    """Delete the expired sessions, refresh tokens and mailed links (each table in its own statement); how many
    went."""
    gone = 0
    for statement in _FORGET_EXPIRED:
        cursor = await conn.execute(statement)
        gone += max(cursor.rowcount, 0)
    return gone


async def _forget_on_schedule(conn: Connection, emitter: EventSink) -> None:
    log.info("forgot %d expired sessions, refresh tokens and mailed links", await forget_expired(conn))


PERIODIC = Periodic(cron=SCHEDULE, run=_forget_on_schedule)
