"""`bin/admin oauth-demo`: a third-party application's side of OAuth 2.0, so that a person can see the whole
authorization-code flow with PKCE from the command line.

It registers (once) a public client of the developer's account whose redirect URI is a loopback address, prints
the authorization URL to open in a browser, catches the code on that loopback address when the browser comes
back, exchanges it at the token endpoint of the running service, and prints the tokens — what a native app
does (RFC 8252).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import sys
import urllib.parse
from collections.abc import Sequence
from typing import Any

import httpx

from rpc.auth.oauth_clients import Client, InvalidClientSpec, create_client, list_clients
from rpc.core.types import Connection
from rpc.settings import Settings

DEMO_NAME = "OAuth demo (bin/admin)"
CALLBACK = "/callback"
_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
    b"Done: the command line has the code. You can close this tab.\n"
)


class DemoError(Exception):
    """The flow could not finish; the message says why."""


async def oauth_demo(
    conn: Connection,
    settings: Settings,
    *,
    account_id: str,
    user_id: str,
    every_scope: Sequence[str],
    scopes: Sequence[str],
    port: int,
    wait: float,
) -> dict[str, Any]:
    """The tokens of one authorization, after the person has signed in and allowed it in a browser."""
    redirect_uri = f"http://127.0.0.1:{port}{CALLBACK}"
    client = await _demo_client(conn, settings, account_id, user_id, every_scope, redirect_uri)
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = secrets.token_urlsafe(16)
    query = urllib.parse.urlencode(
        {
            "client_id": client.id,
            "redirect_uri": redirect_uri,
            "response_type": "code",
            "scope": " ".join(scopes),
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
    )
    sys.stderr.write(
        f"Open this address in a browser, sign in and allow:\n  {settings.public_url}/oauth/authorize?{query}\n"
    )
    sys.stderr.flush()
    code = await _catch_code(port, state, wait)
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(
            f"{settings.public_url}/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "client_id": client.id,
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
            },
        )
    tokens: dict[str, Any] = answer.json()
    if answer.status_code != 200:
        raise DemoError(f"the token endpoint refused the code: {tokens}")
    return {"client_id": client.id, **tokens}


async def _demo_client(
    conn: Connection, settings: Settings, account_id: str, user_id: str, every_scope: Sequence[str], redirect: str
) -> Client:
    """The account's demo client for this redirect URI, registered on first use."""
    for client in await list_clients(conn, account_id):
        if client.name == DEMO_NAME and redirect in client.redirect_uris:
            return client
    try:
        client, _ = await create_client(
            conn,
            account_id=account_id,
            created_by=user_id,
            name=DEMO_NAME,
            redirect_uris=[redirect],
            confidential=False,
            scopes=None,
            every_scope=every_scope,
            production=settings.production,
        )
    except InvalidClientSpec as exc:
        raise DemoError(str(exc)) from exc
    return client


async def _catch_code(port: int, state: str, wait: float) -> str:
    """The code the browser brings to the loopback redirect URI (checked against `state`)."""
    found: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await reader.readline()).decode("latin-1").split(" ")
            target = urllib.parse.urlsplit(request_line[1] if len(request_line) > 1 else "/")
            params = dict(urllib.parse.parse_qsl(target.query))
            writer.write(_ANSWER)
            await writer.drain()
        finally:
            writer.close()
        if target.path != CALLBACK or found.done():
            return
        if params.get("state") != state:
            found.set_exception(DemoError("the redirect came back with another state: not our request"))
        elif "code" in params:
            found.set_result(params["code"])
        else:
            found.set_exception(DemoError(f"the authorization was not given: {params.get('error', 'no code')}"))

    server = await asyncio.start_server(answer, "127.0.0.1", port)
    try:
        async with asyncio.timeout(wait):
            return await found
    except TimeoutError as exc:
        raise DemoError(f"no browser came back to 127.0.0.1:{port} within {wait:g} s") from exc
    finally:
        server.close()
