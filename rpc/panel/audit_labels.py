"""What the audit log page shows for the ids and user agents of its entries: each id as what it names in the
account — a person's e-mail, a key's name, an endpoint's URL, an invitee's e-mail, an application's name, the
account's name — and each user agent as the browser or program it names (the full string stays in a title)."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterable

from rpc.core.types import Connection

# One row per id of the page that names something of this account; what was deleted (or erased) has none left.
_LABELS = """
SELECT u.id::text AS id, u.email AS label FROM users AS u
WHERE u.account_id = %(account_id)s AND u.id = ANY(%(uuids)s::uuid[]) AND u.email IS NOT NULL
UNION ALL
SELECT k.id::text, 'key “' || k.name || '”' FROM api_keys AS k JOIN users AS u ON u.id = k.user_id
WHERE u.account_id = %(account_id)s AND k.id = ANY(%(uuids)s::uuid[])
UNION ALL
SELECT e.id::text, e.url FROM webhook_endpoints AS e
WHERE e.account_id = %(account_id)s AND e.id = ANY(%(uuids)s::uuid[])
UNION ALL
SELECT i.id::text, 'invitation of ' || i.email FROM invitations AS i
WHERE i.account_id = %(account_id)s AND i.id = ANY(%(uuids)s::uuid[])
UNION ALL
SELECT c.id, 'app “' || c.name || '”' FROM oauth_clients AS c
WHERE c.account_id = %(account_id)s AND c.id = ANY(%(texts)s::text[])
UNION ALL
SELECT a.id::text, 'account “' || a.name || '”' FROM accounts AS a
WHERE a.id = %(account_id)s AND a.id = ANY(%(uuids)s::uuid[])
"""
MAX_AGENT = 40  # characters of a user agent shown when no browser or program is recognised
# Browsers by the token that names them, most specific first (Edge and Opera also say Chrome; Chrome says Safari).
_BROWSERS = (
    ("Edge", re.compile(r"\bEdg[A-Za-z]*/(\d+)")),
    ("Opera", re.compile(r"\bOPR/(\d+)")),
    ("Firefox", re.compile(r"\bFirefox/(\d+)")),
    ("Chrome", re.compile(r"\bChrom(?:e|ium)/(\d+)")),
    ("Safari", re.compile(r"\bVersion/(\d+)[.\d]* (?:Mobile/\S+ )?Safari/")),
)
_SYSTEMS = (
    ("Android", "Android"),
    ("iPhone", "iOS"),
    ("iPad", "iPadOS"),
    ("Windows", "Windows"),
    ("Mac OS X", "macOS"),
    ("Linux", "Linux"),
)
_PRODUCT = re.compile(r"^[\w.+-]+(?:/[\w.+-]+)?")


async def labels(conn: Connection, account_id: str, ids: Iterable[str | None]) -> dict[str, str]:
    """What each of `ids` names in the account, for those that name something still there."""
    texts = sorted({value for value in ids if value})
    if not texts:
        return {}
    uuids = []
    for value in texts:
        with contextlib.suppress(ValueError):
            uuids.append(str(uuid.UUID(value)))
    cursor = await conn.execute(_LABELS, {"account_id": account_id, "uuids": uuids, "texts": texts})
    return {row["id"]: row["label"] for row in await cursor.fetchall()}


def short_agent(agent: str | None) -> str:
    """`Chrome 120 on Linux`, `curl/8.5.0`: the browser (and system) or the program a user agent names."""
    if not agent:
        return "—"
    for name, pattern in _BROWSERS:
        match = pattern.search(agent)
        if match:
            system = next((shown for token, shown in _SYSTEMS if token in agent), None)
            return f"{name} {match.group(1)}" + (f" on {system}" if system else "")
    product = _PRODUCT.match(agent)
    shown = product.group(0) if product else agent
    return shown if len(shown) <= MAX_AGENT else shown[: MAX_AGENT - 1] + "…"
