"""Every per-person and per-account cap holds when many creations arrive at once (docs/security.md): each is
counted under a row lock, in a statement after the lock's, so that creations take turns and each sees the ones it
waited for."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from rpc.auth.apikeys import MAX_ACTIVE_KEYS
from rpc.auth.oauth_clients import MAX_CLIENTS
from rpc.ops import admin as ops
from tests.support import Admin, LiveServer, User

RACERS = 40


def race(count: int, one: Callable[[int], Awaitable[Any]]) -> list[BaseException | Any]:
    """`count` calls of `one` at once, each on a connection of its own; their results or errors."""

    async def everyone() -> list[BaseException | Any]:
        return await asyncio.gather(*(one(n) for n in range(count)), return_exceptions=True)

    return asyncio.run(everyone())


def test_forty_alerts_at_once_make_twenty(live: LiveServer, admin: Admin) -> None:
    person = admin.user("candidate")

    async def create(n: int) -> int:
        async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
            body = {"q": f"word{n}", "frequency": "daily"}
            return (await http.post("/v1/alerts.create", json=body, headers=person.auth)).status_code

    statuses = race(RACERS, create)
    assert sorted(statuses) == [200] * 20 + [409] * 20, statuses
    assert admin.sql("SELECT count(*) AS n FROM job_alerts WHERE user_id = %(u)s", {"u": person.user_id})[0]["n"] == 20


def _made(admin: Admin, owner: User, create: Callable[[Any, int], Awaitable[Any]], racers: int) -> int:
    async def one(n: int) -> None:
        async with await ops.connect(admin.database_url) as conn:
            await create(conn, n)

    return sum(outcome is None for outcome in race(racers, one))


def test_api_keys_at_once_stop_at_the_cap(admin: Admin) -> None:
    owner = admin.user("employer")
    for _ in range(MAX_ACTIVE_KEYS - 2):
        admin.api_key(owner)

    async def create(conn: Any, n: int) -> None:
        await ops.create_api_key(
            conn, admin.settings, admin.vocabulary, email=owner.email, name=f"k{n}", scopes=["read:jobs"], mode="test"
        )

    assert _made(admin, owner, create, 8) == 2
    rows = admin.sql("SELECT 1 FROM api_keys WHERE user_id = %(u)s AND revoked_at IS NULL", {"u": owner.user_id})
    assert len(rows) == MAX_ACTIVE_KEYS


def test_oauth_clients_at_once_stop_at_the_cap(admin: Admin) -> None:
    owner = admin.user("employer")

    async def create(conn: Any, n: int) -> None:
        await ops.create_oauth_client(
            conn,
            admin.settings,
            admin.vocabulary,
            email=owner.email,
            name=f"app {n}",
            redirect_uris=["https://app.example/cb"],
            public=True,
        )

    assert _made(admin, owner, create, MAX_CLIENTS + 8) == MAX_CLIENTS
    assert (
        len(admin.sql("SELECT 1 FROM oauth_clients WHERE account_id = %(a)s", {"a": owner.account_id})) == MAX_CLIENTS
    )
