"""One-time reveals: post/redirect/get for the forms that make a secret (a new API key, a webhook endpoint and its
signing secret, an OAuth client or its rotated secret).

The form's POST makes the object, keeps its secret here and redirects to the page that shows it, with a random
token in that page's address (`?reveal=…`). That GET takes the row — found by the token's SHA-256 and the
browser session's, deleted in the same statement — so a reload shows the page without the secret and never
makes a second object. The secret is sealed at rest, bound to the session that made it (signing out deletes
it), and forgotten after ten minutes if never shown (`rpc.auth.housekeeping`). The token is no credential: it
opens nothing without the session's cookie, and panel pages send no referrer.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from rpc.core.crypto import Sealer, random_token, token_hash
from rpc.panel.handler import Panel

REVEAL_LIFETIME = dt.timedelta(minutes=10)
_SEAL_PURPOSE = "panel_reveals.secret"

Kind = Literal[
    "api_key",
    "webhook_created",
    "webhook_rotated_now",
    "webhook_rotated_overlap",
    "oauth_client",
    "oauth_secret",
    "checkout",  # the provider's payment page: its address carries the payment's token
]

ALREADY_SHOWN = "That secret was shown once and cannot be shown again: we keep only a fingerprint of it (or seal it)."

_KEEP = """
INSERT INTO panel_reveals (token_hash, session_hash, kind, object_id, secret_sealed, expires_at)
VALUES (%(token_hash)s, %(session_hash)s, %(kind)s, %(object_id)s, %(secret_sealed)s, now() + %(lifetime)s)
"""
_TAKE = """
DELETE FROM panel_reveals
WHERE token_hash = %(token_hash)s AND session_hash = %(session_hash)s AND kind = ANY(%(kinds)s)
  AND (%(object_id)s::text IS NULL OR object_id = %(object_id)s) AND expires_at > now()
RETURNING kind, object_id, secret_sealed
"""


@dataclass(frozen=True, slots=True)
class Reveal:
    """What a form made: the object's id and its secret (None for a public OAuth client, which has none)."""

    kind: Kind
    object_id: str
    secret: str | None


async def keep(panel: Panel, kind: Kind, object_id: str, secret: str | None) -> str:
    """Keep `secret` for the page the form redirects to; the token to put in that page's `?reveal=`."""
    token = random_token()
    sealed = None if secret is None else _sealer(panel).seal(secret.encode(), _SEAL_PURPOSE)
    await panel.conn.execute(
        _KEEP,
        {
            "token_hash": token_hash(token),
            "session_hash": token_hash(panel.user.session),
            "kind": kind,
            "object_id": object_id,
            "secret_sealed": sealed,
            "lifetime": REVEAL_LIFETIME,
        },
    )
    return token


async def take(panel: Panel, *kinds: Kind, object_id: str | None = None) -> Reveal | None:
    """The reveal named by this page's `?reveal=` for this session (one of `kinds`, of the object `object_id` when
    given), once: the row is gone after this call."""
    token = panel.request.query_params.get("reveal", "")
    if not token:
        return None
    cursor = await panel.conn.execute(
        _TAKE,
        {
            "token_hash": token_hash(token),
            "session_hash": token_hash(panel.user.session),
            "kinds": list(kinds),
            "object_id": object_id,
        },
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    sealed = row["secret_sealed"]
    secret = None if sealed is None else _sealer(panel).open(bytes(sealed), _SEAL_PURPOSE).decode()
    return Reveal(kind=row["kind"], object_id=row["object_id"], secret=secret)


def shown_already(panel: Panel, reveal: Reveal | None) -> str | None:
    """The notice of a reloaded reveal page (its secret is gone); else None."""
    asked = bool(panel.request.query_params.get("reveal"))
    return ALREADY_SHOWN if asked and reveal is None else None


def _sealer(panel: Panel) -> Sealer:
    return Sealer(panel.services.settings.secret_key)
