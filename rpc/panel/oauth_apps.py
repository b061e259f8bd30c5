"""Settings > OAuth apps: the third-party applications an account has registered (register one — its secret
shown once —, rename it, change its scopes and redirect URIs, rotate its secret, delete it), and, for everyone,
Authorized apps: the applications the person has let act for them, each with "revoke access". The rules are
rpc/auth's (oauth_clients.py, oauth.py)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from rpc.auth.oauth_clients import (
    MAX_REDIRECT_URIS,
    Client,
    InvalidClientSpec,
    create_client,
    delete_client,
    find_client,
    list_clients,
    rotate_secret,
    set_redirect_uris,
    update_client,
)
from rpc.auth.oauth_grants import authorized_apps, revoke_access
from rpc.core.errors import NotFound
from rpc.panel import reveals
from rpc.panel.handler import Panel, page
from rpc.web.pages import redirect


def redirect_uri_lines(text: str) -> list[str]:
    """The redirect URIs of the form's text area: one a line, blank lines ignored."""
    return [line.strip() for line in text.splitlines() if line.strip()]


@page
async def apps_page(panel: Panel) -> Response:
    """`GET /panel/oauth-apps`: the account's applications, and the form to register one; with `?reveal=`, once,
    the application just registered and its secret."""
    reveal = await reveals.take(panel, "oauth_client")
    client = None if reveal is None else await find_client(panel.conn, reveal.object_id)
    registered = None if client is None or reveal is None else {"client": client, "secret": reveal.secret}
    notice = reveals.shown_already(panel, reveal)
    return await _apps(panel, values=_defaults(panel), registered=registered, notice=notice)


@page
async def register_app(panel: Panel) -> Response:
    """`POST /panel/oauth-apps` with `name`, `redirect_uris` (one a line), `client_type`, `scopes` (repeated)."""
    every_scope = list(panel.services.vocabulary.scopes)
    name, uris_text, client_type = panel.field("name"), panel.field("redirect_uris"), panel.field("client_type")
    scopes = panel.fields("scopes")
    values = {"name": name, "redirect_uris": uris_text, "client_type": client_type, "scopes": scopes}
    if client_type not in ("confidential", "public"):
        return await _apps(panel, values=values, errors={"client_type": "Choose confidential or public."}, status=400)
    try:
        async with panel.conn.transaction():
            client, secret = await create_client(
                panel.conn,
                account_id=panel.account_id,
                created_by=panel.user.user_id,
                name=name,
                redirect_uris=redirect_uri_lines(uris_text),
                confidential=client_type == "confidential",
                scopes=scopes,
                every_scope=every_scope,
                production=panel.services.settings.production,
            )
            await panel.audit("oauth_client.created", client.id)
            token = await reveals.keep(panel, "oauth_client", client.id, secret)
    except InvalidClientSpec as exc:
        return await _apps(panel, values=values, errors={exc.field: _sentence(str(exc))}, status=400)
    return redirect(f"/panel/oauth-apps?reveal={token}")


@page
async def app_page(panel: Panel) -> Response:
    """`GET /panel/oauth-apps/{client_id}`: the application, its name, scopes and redirect URIs to edit; with
    `?reveal=`, once, its rotated secret."""
    client = await _client(panel)
    reveal = await reveals.take(panel, "oauth_secret", object_id=client.id)
    if reveal is None:
        return _app(panel, client, _values(client), notice=reveals.shown_already(panel, reveal))
    return _app(panel, client, _values(client), new_secret=reveal.secret)


@page
async def save_app(panel: Panel) -> Response:
    """`POST /panel/oauth-apps/{client_id}/edit` with `name` and `scopes` (repeated). Narrowed scopes leave
    every grant at once (see `update_client`)."""
    client = await _client(panel)
    name, scopes = panel.field("name"), panel.fields("scopes")
    try:
        updated = await update_client(
            panel.conn,
            panel.account_id,
            client.id,
            name=name,
            scopes=scopes,
            every_scope=list(panel.services.vocabulary.scopes),
        )
    except InvalidClientSpec as exc:
        values = {**_values(client), "name": name, "scopes": scopes}
        return _app(panel, client, values, {exc.field: _sentence(str(exc))}, 400)
    if updated is None:
        raise NotFound()
    return redirect(f"/panel/oauth-apps/{client.id}?notice=app_saved")


@page
async def rotate_app_secret(panel: Panel) -> Response:
    """`POST /panel/oauth-apps/{client_id}/secret`: a new client secret, shown once on the page this redirects
    to; the old one stops working at once, and nobody's authorization ends."""
    client = await _client(panel)
    async with panel.conn.transaction():
        secret = await rotate_secret(panel.conn, panel.account_id, client.id)
        if secret is None:  # a public client has no secret to rotate
            raise NotFound()
        token = await reveals.keep(panel, "oauth_secret", client.id, secret)
    return redirect(f"/panel/oauth-apps/{client.id}?reveal={token}")


@page
async def save_redirect_uris(panel: Panel) -> Response:
    """`POST /panel/oauth-apps/{client_id}/redirect-uris` with `redirect_uris` (one a line)."""
    client = await _client(panel)
    text = panel.field("redirect_uris")
    try:
        updated = await set_redirect_uris(
            panel.conn,
            panel.account_id,
            client.id,
            redirect_uri_lines(text),
            production=panel.services.settings.production,
        )
    except InvalidClientSpec as exc:
        values = {**_values(client), "redirect_uris": text}
        return _app(panel, client, values, {"redirect_uris": _sentence(str(exc))}, 400)
    if updated is None:
        raise NotFound()
    return redirect(f"/panel/oauth-apps/{client.id}?notice=app_updated")


@page
async def confirm_delete(panel: Panel) -> Response:
    """`GET /panel/oauth-apps/{client_id}/delete`: are you sure?"""
    return panel.render("panel/oauth_app_delete.html", section="oauth_apps", client=await _client(panel))


@page
async def delete_app(panel: Panel) -> Response:
    """`POST /panel/oauth-apps/{client_id}/delete`: the client, its grants, codes and tokens are gone."""
    async with panel.conn.transaction():
        if not await delete_client(panel.conn, panel.account_id, panel.path("client_id")):
            raise NotFound()
        await panel.audit("oauth_client.deleted", panel.path("client_id"))
    return redirect("/panel/oauth-apps?notice=app_deleted")


@page
async def authorized_page(panel: Panel) -> Response:
    """`GET /panel/authorized-apps`: the applications this person has authorized."""
    apps = await authorized_apps(panel.conn, panel.user.user_id)
    return panel.render(
        "panel/authorized_apps.html",
        section="authorized_apps",
        apps=apps,
        sentences=panel.web.server.policy.sentences_for(panel.user.role),
    )


@page
async def revoke_app(panel: Panel) -> Response:
    """`POST /panel/authorized-apps/revoke` with `client_id`: every grant of this person to it ends now."""
    client_id = panel.field("client_id")
    if client_id:  # only this person's grants: any other id revokes nothing
        async with panel.conn.transaction():
            if await revoke_access(panel.conn, panel.user.user_id, client_id):
                await panel.audit("oauth_grant.revoked", client_id)
    return redirect("/panel/authorized-apps?notice=access_revoked")


async def _client(panel: Panel) -> Client:
    client = await find_client(panel.conn, panel.path("client_id"))
    if client is None or client.account_id != panel.account_id:
        raise NotFound()
    return client


async def _apps(
    panel: Panel,
    *,
    values: dict[str, Any],
    errors: dict[str, str] | None = None,
    status: int = 200,
    registered: dict[str, Any] | None = None,
    notice: str | None = None,
) -> Response:
    return panel.render(
        "panel/oauth_apps.html",
        status,
        section="oauth_apps",
        clients=await list_clients(panel.conn, panel.account_id),
        scopes=panel.services.vocabulary.scopes,
        values=values,
        errors=errors or {},
        registered=registered,
        max_redirect_uris=MAX_REDIRECT_URIS,
        production=panel.services.settings.production,
        notice=notice,
    )


def _values(client: Client) -> dict[str, Any]:
    return {"name": client.name, "scopes": client.scopes, "redirect_uris": "\n".join(client.redirect_uris)}


def _app(
    panel: Panel,
    client: Client,
    values: dict[str, Any],
    errors: dict[str, str] | None = None,
    status: int = 200,
    *,
    new_secret: str | None = None,
    notice: str | None = None,
) -> Response:
    return panel.render(
        "panel/oauth_app.html",
        status,
        section="oauth_apps",
        client=client,
        values=values,
        errors=errors or {},
        scopes=panel.services.vocabulary.scopes,
        max_redirect_uris=MAX_REDIRECT_URIS,
        production=panel.services.settings.production,
        new_secret=new_secret,
        notice=notice,
    )


def _defaults(panel: Panel) -> dict[str, Any]:
    every_scope = list(panel.services.vocabulary.scopes)
    return {"name": "", "redirect_uris": "", "client_type": "confidential", "scopes": every_scope}


def _sentence(message: str) -> str:
    """rpc/auth's messages start in lower case (they also end up in `bin/admin`'s output)."""
    return message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")
