"""Per-account request budgets (docs/decisions.md): which calls count, the headers, shared counters."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from limits import RateLimitItemPerDay, RateLimitItemPerMinute
from limits.storage import storage_from_string

from tests.conftest import Databases
from tests.support import (
    TEST_SECRET_KEY,
    Admin,
    LiveServer,
    User,
    bearer,
    error_code,
    eventually,
    free_port,
    serving,
    settings_for,
)

ROOT = Path(__file__).resolve().parent.parent
HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")


def quota(response: httpx.Response) -> tuple[int, int, int]:
    limit, remaining, reset = (int(response.headers[name]) for name in HEADERS)
    return limit, remaining, reset


@pytest.fixture
def free(admin: Admin) -> User:
    """A fresh account on the free plan: 60 calls a minute, 1,000 a day."""
    return admin.user("employer", plan="free")


def test_every_counted_call_reports_the_tighter_window(client: httpx.Client, free: User) -> None:
    started = time.time()
    for expected_remaining in (59, 58, 57):
        limit, remaining, reset = quota(client.get("/v1/jobs.list", headers=free.auth))
        assert (limit, remaining) == (60, expected_remaining)
        assert started + 59 <= reset <= time.time() + 61  # the minute window began at the first call


def test_the_61st_call_in_a_minute_is_429_with_retry_after(client: httpx.Client, free: User) -> None:
    for _ in range(60):
        assert client.get("/v1/jobs.list", headers=free.auth).status_code == 200
    refused = client.get("/v1/jobs.list", headers=free.auth)
    assert refused.status_code == 429
    assert error_code(refused) == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert quota(refused)[:2] == (60, 0)
    error = refused.json()["error"]
    details = error["details"]
    assert details["window"] == "minute" and details["limit"] == 60 and details["plan"] == "free"
    assert details["upgrade_to"] == "pro" and details["retry_after"] == int(refused.headers["Retry-After"])
    reset = dt.datetime.fromisoformat(details["reset_at"]).timestamp()
    assert reset == quota(refused)[2], "the reset the headers name"
    assert error["message"].startswith("The account's free plan allows 60 calls a minute, and they are used up;")
    assert details["reset_at"] in error["message"] and "The pro plan allows 300 a minute" in error["message"]


def test_development_raises_the_free_plans_budget_only(database: str, admin: Admin, tmp_path: Path) -> None:
    """On a local install (SERVICE_ENV=development) the free plan allows ten times more; the others, and every
    plan outside development, stay as sold."""
    free, pro = admin.user("employer", plan="free"), admin.user("employer", plan="pro")
    developing = settings_for(database, SERVICE_ENV="development", DATA_DIR=str(tmp_path))
    with LiveServer(developing) as live, live.client() as client:
        assert quota(client.get("/v1/jobs.list", headers=free.auth))[:2] == (600, 599)
        assert quota(client.get("/v1/jobs.list", headers=pro.auth))[:2] == (300, 299)


def test_a_plan_change_takes_effect_on_the_next_request(client: httpx.Client, free: User, admin: Admin) -> None:
    for _ in range(61):
        client.get("/v1/jobs.list", headers=free.auth)
    assert client.get("/v1/jobs.list", headers=free.auth).status_code == 429
    admin.set_plan(free, "pro")
    limit, remaining, _ = quota(client.get("/v1/jobs.list", headers=free.auth))
    assert (limit, remaining) == (300, 299), "the new plan's windows start fresh"


def test_keys_and_tokens_of_one_account_share_the_budget(client: httpx.Client, free: User, admin: Admin) -> None:
    first = admin.api_key(free, scopes="read:jobs")["key"]
    second = admin.api_key(free, scopes="read:jobs")["key"]
    remaining = [quota(client.get("/v1/jobs.list", headers=bearer(key)))[1] for key in (first, second, free.token)]
    assert remaining == [59, 58, 57]


def test_another_account_is_unaffected(client: httpx.Client, free: User, admin: Admin) -> None:
    for _ in range(61):
        client.get("/v1/jobs.list", headers=free.auth)
    other = admin.user("employer", plan="free")
    response = client.get("/v1/jobs.list", headers=other.auth)
    assert response.status_code == 200
    assert quota(response)[1] == 59


@pytest.mark.parametrize(
    ("method", "path", "who", "status"),
    [
        ("GET", "/v1/jobs.nope", "user", 404),
        ("GET", "/v1/jobs.create", "user", 405),
        ("GET", "/v1/jobs.list", "nobody", 401),
        ("POST", "/v1/jobs.create", "reader", 403),
    ],
)
def test_calls_refused_before_the_limit_step_are_neither_counted_nor_labelled(
    client: httpx.Client, free: User, admin: Admin, method: str, path: str, who: str, status: int
) -> None:
    reader = admin.api_key(free, scopes="read:jobs")["key"]
    headers = {"user": free.auth, "nobody": {}, "reader": bearer(reader)}[who]
    response = client.request(method, path, headers=headers, json={} if method == "POST" else None)
    assert response.status_code == status
    assert not any(name in response.headers for name in HEADERS)
    assert quota(client.get("/v1/jobs.list", headers=free.auth))[1] == 59, "nothing was counted before"


def test_calls_refused_after_the_limit_step_are_counted_and_labelled(client: httpx.Client, free: User) -> None:
    invalid = client.post("/v1/jobs.create", json={"title": ""}, headers=free.auth)
    assert invalid.status_code == 422
    assert quota(invalid)[1] == 59
    missing = client.post("/v1/jobs.get", json={"id": "nope"}, headers=free.auth)
    assert missing.status_code == 404
    assert quota(missing)[1] == 58


@pytest.fixture(scope="module")
def redis_server(
    databases: Databases, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, Admin]]:
    url = databases.copy()
    settings = settings_for(url, RATE_LIMIT_STORAGE=redis_url, DATA_DIR=str(tmp_path_factory.mktemp("redis")))
    with LiveServer(settings) as live:
        yield live, Admin(url, settings)


def test_the_day_window_is_reported_when_it_is_tighter(redis_server: tuple[LiveServer, Admin], redis_url: str) -> None:
    live, admin = redis_server
    user = admin.user("employer", plan="free")
    day = RateLimitItemPerDay(1000)

    async def spend_most_of_the_day() -> None:
        storage = storage_from_string(f"async+{redis_url}")
        await storage.incr(day.key_for(user.account_id), day.get_expiry(), amount=990)

    asyncio.run(spend_most_of_the_day())
    with live.client() as client:
        limit, remaining, reset = quota(client.get("/v1/jobs.list", headers=user.auth))
        assert (limit, remaining) == (1000, 9)
        assert reset > time.time() + 23 * 3600
        for _ in range(9):
            client.get("/v1/jobs.list", headers=user.auth)
        refused = client.get("/v1/jobs.list", headers=user.auth)
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) > 23 * 3600
        details = refused.json()["error"]["details"]
        assert (details["window"], details["limit"], details["upgrade_to"]) == ("day", 1000, "pro")
        assert "allows 1,000 calls a day" in refused.json()["error"]["message"]
    assert asyncio.run(_minute_left(redis_url, user.account_id)) == 50, "the refused call gave its minute back"


async def _minute_left(redis_url: str, account_id: str) -> int:
    minute = RateLimitItemPerMinute(60)
    storage = storage_from_string(f"async+{redis_url}")
    return 60 - await storage.get(minute.key_for(account_id))


def test_redis_down_fails_open_for_accounts_and_closed_for_sign_in(databases: Databases, tmp_path: Path) -> None:
    """An outage of the counters is no outage of the API, and no open door for password guessing."""
    url = databases.copy()
    settings = settings_for(url, RATE_LIMIT_STORAGE="redis://127.0.0.1:1/0", DATA_DIR=str(tmp_path))
    admin = Admin(url, settings)
    user = admin.user("employer", plan="free")
    with LiveServer(settings) as live, live.client() as client:
        for _ in range(65):
            response = client.get("/v1/jobs.list", headers=user.auth)
            assert response.status_code == 200
            assert "X-RateLimit-Limit" not in response.headers
        signin = client.post("/auth/login", json={"email": user.email, "password": user.password})
        assert (signin.status_code, error_code(signin)) == (429, "rate_limited")
        assert int(signin.headers["Retry-After"]) >= 1
        token = client.post("/oauth/token", data={"grant_type": "refresh_token", "client_id": "x"})
        assert (token.status_code, token.json()["error"]) == (429, "rate_limited")


def _serve(port: int, database_url: str, data_dir: Path, redis_url: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SERVICE_SECRET_KEY": TEST_SECRET_KEY,
        "RATE_LIMIT_STORAGE": redis_url,
        "DATA_DIR": str(data_dir),
        # One service behind two ports (as behind a proxy): the issuer of the tests' tokens, and the plans as sold.
        "PUBLIC_URL": settings_for(database_url).public_url,
        "SERVICE_ENV": "test",
    }
    command = [sys.executable, str(ROOT / "bin" / "serve"), "--port", str(port), "--no-worker"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_two_server_processes_share_one_budget(databases: Databases, redis_url: str, tmp_path: Path) -> None:
    url = databases.copy()
    admin = Admin(url, settings_for(url))
    user = admin.user("employer", plan="free")
    ports = [free_port(), free_port()]
    processes = [_serve(port, url, tmp_path, redis_url) for port in ports]
    try:
        for port in ports:
            _wait_healthy(port)
        answers = [
            httpx.get(f"http://127.0.0.1:{ports[i % 2]}/v1/jobs.list", headers=user.auth).status_code for i in range(64)
        ]
        assert answers.count(200) == 60
        assert answers[60:] == [429] * 4
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=30)


def _wait_healthy(port: int) -> None:
    eventually(serving(f"http://127.0.0.1:{port}/healthz"), f"bin/serve on port {port} healthy", timeout=30)
