"""Settings > API keys: the account's keys (name, mode, scopes, created, last used, revoked), a new key shown
once, and revocation after a confirmation. Keys are for employers and admins (docs/decisions.md); a key acts as
the person who created it, within the scopes chosen here. The rules are `rpc.auth.apikeys`', shared with
`bin/admin`."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.responses import Response

from rpc.auth import apikeys
from rpc.core.errors import NotFound
from rpc.panel import reveals
from rpc.panel.handler import Panel, page
from rpc.panel.ids import uuid_or_404
from rpc.web.pages import redirect


@page
async def keys_page(panel: Panel) -> Response:
    """`GET /panel/api-keys`."""
    if panel.user.role not in apikeys.KEY_ROLES:
        return panel.render("panel/api_keys_candidate.html", section="api_keys")
    reveal = await reveals.take(panel, "api_key")
    new_key = None
    if reveal is not None:
        key = await apikeys.find_key(panel.conn, panel.account_id, uuid.UUID(reveal.object_id))
        new_key = {"name": key["name"] if key else "", "value": reveal.secret}
    return await _keys(panel, values=_defaults(panel), new_key=new_key, notice=reveals.shown_already(panel, reveal))


@page
async def create_key(panel: Panel) -> Response:
    """`POST /panel/api-keys` with `name`, `scopes` (repeated), `mode`: the new key, shown once on the page this
    redirects to."""
    if panel.user.role not in apikeys.KEY_ROLES:
        return panel.render("panel/api_keys_candidate.html", 403, section="api_keys")
    every_scope = list(panel.services.vocabulary.scopes)
    name, mode, scopes = panel.field("name"), panel.field("mode"), panel.fields("scopes")
    values = {"name": name, "mode": mode, "scopes": scopes}
    owner = apikeys.Owner(user_id=panel.user.user_id, account_id=panel.account_id, role=panel.user.role)
    try:
        async with panel.conn.transaction():
            key_id, key = await apikeys.create_key(
                panel.conn,
                owner,
                name=name,
                scopes=scopes,
                mode=mode,
                every_scope=every_scope,
                production=panel.services.settings.production,
            )
            await panel.audit("api_key.created", key_id)
            token = await reveals.keep(panel, "api_key", key_id, key)
    except apikeys.InvalidKey as exc:
        return await _keys(panel, values=values, errors=exc.errors, status=400)
    return redirect(f"/panel/api-keys?reveal={token}")


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
    if panel.user.role not in apikeys.KEY_ROLES:
        raise NotFound()
    async with panel.conn.transaction():
        revoked = await apikeys.revoke_key(panel.conn, uuid_or_404(panel.path("id")), panel.account_id)
        if revoked is None:
            raise NotFound()
        await panel.audit("api_key.revoked", revoked["id"])
    return redirect("/panel/api-keys?notice=key_revoked")


async def _key(panel: Panel) -> dict[str, Any]:
    if panel.user.role not in apikeys.KEY_ROLES:
        raise NotFound()
    key = await apikeys.find_key(panel.conn, panel.account_id, uuid_or_404(panel.path("id")))
    if key is None:
        raise NotFound()
    return key


async def _keys(
    panel: Panel,
    *,
    values: dict[str, Any],
    errors: dict[str, str] | None = None,
    status: int = 200,
    new_key: dict[str, Any] | None = None,
    notice: str | None = None,
) -> Response:
    return panel.render(
        "panel/api_keys.html",
        status,
        section="api_keys",
        keys=await apikeys.list_keys(panel.conn, panel.account_id),
        scopes=panel.services.vocabulary.scopes,
        values=values,
        errors=errors or {},
        new_key=new_key,
        production=panel.services.settings.production,
        notice=notice,
    )


def _defaults(panel: Panel) -> dict[str, Any]:
    mode = "live" if panel.services.settings.production else "test"
    return {"name": "", "mode": mode, "scopes": list(panel.services.vocabulary.suggested_key_scopes)}
