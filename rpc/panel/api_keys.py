"""Settings > API keys: the account's keys (name, mode, scopes, created, last used, revoked), a new key shown
once, and revocation after a confirmation. Keys are for employers and admins (CONTRACT.md §14); a key acts as
the person who created it, within the scopes chosen here. Only the key's SHA-256 and its first characters
are stored."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from rpc.auth import apikeys
from rpc.crypto import token_hash
from rpc.errors import NotFound
from rpc.panel.handler import Panel, page
from rpc.panel.ids import uuid_or_404
from rpc.web.pages import redirect

KEY_ROLES = frozenset({"employer", "admin"})
MAX_NAME_LENGTH = 100

_COLUMNS = """
k.id::text AS id, k.name, k.mode, k.prefix, k.scopes, k.created_at, k.last_used_at, k.revoked_at,
u.email AS created_by
"""
_LIST = f"""
SELECT {_COLUMNS} FROM api_keys AS k JOIN users AS u ON u.id = k.user_id
WHERE u.account_id = %(account_id)s
ORDER BY k.revoked_at IS NOT NULL, k.created_at DESC, k.id DESC
"""
_ONE = f"""
SELECT {_COLUMNS} FROM api_keys AS k JOIN users AS u ON u.id = k.user_id
WHERE k.id = %(id)s AND u.account_id = %(account_id)s
"""
_INSERT = """
INSERT INTO api_keys (user_id, name, mode, prefix, key_hash, scopes)
VALUES (%(user_id)s, %(name)s, %(mode)s, %(prefix)s, %(hash)s, %(scopes)s)
RETURNING id::text AS id
"""
_REVOKE = """
UPDATE api_keys AS k SET revoked_at = coalesce(k.revoked_at, now())
FROM users AS u
WHERE k.id = %(id)s AND u.id = k.user_id AND u.account_id = %(account_id)s
RETURNING k.id
"""


@page
async def keys_page(panel: Panel) -> Response:
    """`GET /panel/api-keys`."""
    if panel.user.role not in KEY_ROLES:
        return panel.render("panel/api_keys_candidate.html", section="api_keys")
    return await _keys(panel, values=_defaults(panel))


@page
async def create_key(panel: Panel) -> Response:
    """`POST /panel/api-keys` with `name`, `scopes` (repeated), `mode`: the new key, shown in this answer only."""
    if panel.user.role not in KEY_ROLES:
        return panel.render("panel/api_keys_candidate.html", 403, section="api_keys")
    every_scope = list(panel.services.catalog.scopes)
    name, mode = panel.field("name").strip(), panel.field("mode")
    scopes = [scope for scope in every_scope if scope in set(panel.fields("scopes"))]
    values = {"name": name, "mode": mode, "scopes": scopes}
    errors: dict[str, str] = {}
    if not 1 <= len(name) <= MAX_NAME_LENGTH or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        errors["name"] = f"Give the key a name of 1 to {MAX_NAME_LENGTH} characters, e.g. where it is used."
    if not scopes or set(panel.fields("scopes")) - set(every_scope):
        errors["scopes"] = "Choose at least one scope."
    if mode not in ("live", "test"):
        errors["mode"] = "Choose live or test."
    elif mode == "test" and panel.services.settings.production:
        errors["mode"] = "This is a production deployment: it refuses test keys. Choose live."
    if errors:
        return await _keys(panel, values=values, errors=errors, status=400)
    key = apikeys.generate("live" if mode == "live" else "test")
    await panel.conn.execute(
        _INSERT,
        {
            "user_id": panel.user.user_id,
            "name": name,
            "mode": mode,
            "prefix": key[: apikeys.DISPLAY_PREFIX_LENGTH],
            "hash": token_hash(key),
            "scopes": scopes,
        },
    )
    return await _keys(panel, values=_defaults(panel), new_key={"name": name, "value": key})


@page
async def confirm_revoke(panel: Panel) -> Response:
    """`GET /panel/api-keys/{id}/revoke`: are you sure?"""
    key = await _key(panel)
    if key["revoked_at"] is not None:
        return redirect("/panel/api-keys")
    return panel.render("panel/api_key_revoke.html", section="api_keys", key=key)


@page
async def revoke_key(panel: Panel) -> Response:
    """`POST /panel/api-keys/{id}/revoke`: from now on, calls with the key are `401 invalid_api_key`."""
    if panel.user.role not in KEY_ROLES:
        raise NotFound()
    cursor = await panel.conn.execute(_REVOKE, {"id": uuid_or_404(panel.path("id")), "account_id": panel.account_id})
    if await cursor.fetchone() is None:
        raise NotFound()
    return redirect("/panel/api-keys?notice=key_revoked")


async def _key(panel: Panel) -> dict[str, Any]:
    if panel.user.role not in KEY_ROLES:
        raise NotFound()
    cursor = await panel.conn.execute(_ONE, {"id": uuid_or_404(panel.path("id")), "account_id": panel.account_id})
    row = await cursor.fetchone()
    if row is None:
        raise NotFound()
    return row


async def _keys(
    panel: Panel,
    *,
    values: dict[str, Any],
    errors: dict[str, str] | None = None,
    status: int = 200,
    new_key: dict[str, str] | None = None,
) -> Response:
    cursor = await panel.conn.execute(_LIST, {"account_id": panel.account_id})
    return panel.render(
        "panel/api_keys.html",
        status,
        section="api_keys",
        keys=await cursor.fetchall(),
        scopes=panel.services.catalog.scopes,
        values=values,
        errors=errors or {},
        new_key=new_key,
        production=panel.services.settings.production,
    )


def _defaults(panel: Panel) -> dict[str, Any]:
    mode = "live" if panel.services.settings.production else "test"
    return {"name": "", "mode": mode, "scopes": list(panel.services.catalog.scopes)[:1]}
