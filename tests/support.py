"""Test plumbing: a live server on a loopback port, the operator's commands as plain functions, and the small
helpers the test modules share (response checks, bearer headers, hand-made JWTs)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from procedures.vocabulary import VOCABULARY
from rpc.app import create_app
from rpc.audit import log as audit_log
from rpc.ops import admin as ops
from rpc.outbox.emit import Emitter, build_emitter
from rpc.outbox.endpoints import Webhooks
from rpc.settings import Settings

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent

TEST_SECRET_KEY = "test-secret-key-0123456789abcdefghijklmnop"
ERROR_KEYS = {"code", "message", "details"}
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

Call = Callable[..., httpx.Response]


def eventually(condition: Callable[[], T], what: str | Callable[[], str], timeout: float = 20.0) -> T:
    """The first truthy answer of `condition`, asked again and again (every 20 ms) until one comes: a wait for
    something to happen, never a clock. After `timeout` seconds without one, an AssertionError saying `what`
    was awaited (a callable: worded then, with what was seen)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = condition()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"{what() if callable(what) else what}: not within {timeout:g} s")
        time.sleep(0.02)


def serving(url: str, process: subprocess.Popen[str] | None = None) -> Callable[[], bool]:
    """A condition for `eventually`: `url` answers 200 (and `process`, if given, has not exited meanwhile)."""

    def answering() -> bool:
        if process is not None:
            assert process.poll() is None, process.stderr.read() if process.stderr else "the process exited"
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    return answering


@dataclass(frozen=True)
class Route:
    """How the service reaches a database of the tests' own primary under `TEST_TOPOLOGY=pooler` (conftest's
    `server_url`): through PgBouncer in transaction mode, with a streaming replica beside it for reads, and the
    primary itself as the direct connection."""

    primary_port: int
    pooler_port: int
    replica_port: int

    def settings(self, database_url: str) -> dict[str, str]:
        if int(conninfo_to_dict(database_url).get("port") or 5432) != self.primary_port:
            return {}
        return {
            "DATABASE_URL": make_conninfo(database_url, port=str(self.pooler_port)),
            "DATABASE_DIRECT_URL": database_url,
            "DATABASE_REPLICA_URLS": make_conninfo(database_url, port=str(self.replica_port)),
            "DATABASE_POOLER": "transaction",
        }


ROUTES: list[Route] = []  # the session's route under TEST_TOPOLOGY=pooler, set once by conftest's `server_url`


def database_env(settings: Settings) -> dict[str, str]:
    """The variables that say how `settings` reach the database, for a `bin/` process of the same service: through
    a transaction pooler, one without DATABASE_POOLER would take the migrations' lock in one server session and
    give it back in another, and every later start would wait for it for ever."""
    assert settings.database_url is not None
    return {
        "DATABASE_URL": settings.database_url,
        "DATABASE_POOLER": settings.database_pooler,
        "DATABASE_DIRECT_URL": settings.database_direct_url or "",
        "DATABASE_REPLICA_URLS": ",".join(settings.database_replica_urls),
    }


def admin_command(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """`bin/admin *args` run as its own process against the database of `settings`."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "TEST_DATABASE_URL")},
        **database_env(settings),
        "DATA_DIR": str(settings.data_dir),
        "SERVICE_SECRET_KEY": settings.secret_key,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "bin" / "admin"), *args], env=env, capture_output=True, text=True, timeout=120
    )


def settings_for(database_url: str, **env: str) -> Settings:
    base = {
        "DATABASE_URL": database_url,
        "SERVICE_ENV": "test",
        "SERVICE_SECRET_KEY": TEST_SECRET_KEY,
        "SIGNIN_LIMIT_PER_ADDRESS": "100000/minute",
    }
    for route in ROUTES:
        base.update(route.settings(database_url))
    if env.get("SERVICE_ENV") == "production":  # production needs a mail server (nothing listens on this one)
        base["SMTP_URL"] = "smtp://127.0.0.1:9"  # and an https address
        base["PUBLIC_URL"] = "https://hire.example"
    return Settings.from_env({**base, **env})


def emitter_for(settings: Settings) -> Emitter:
    """An emitter of the business's event kinds, as a process builds it."""
    return build_emitter(settings, VOCABULARY.event_kinds)


def free_port() -> int:
    """A loopback port nobody listens on (for servers started as processes)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LiveServer:
    """The real app under uvicorn on 127.0.0.1:<free port>, in a thread of the test process (without `deliver`,
    no webhook worker in it: nothing it runs writes on its own)."""

    def __init__(self, settings: Settings, *, deliver: bool = True) -> None:
        self.settings = settings
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(settings, deliver=deliver),
            log_level="warning",
            lifespan="on",
            proxy_headers=True,
            forwarded_allow_ips="127.0.0.1",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self._thread.start()
        started = eventually(
            lambda: self._server.started or not self._thread.is_alive(), "the test server's start", timeout=30
        )
        if not self._server.started or not started:
            raise RuntimeError("the test server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._socket.close()

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)


@dataclass(frozen=True)
class User:
    user_id: str
    account_id: str
    email: str
    password: str
    role: str
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return bearer(self.token)


class Admin:
    """`bin/admin`'s operations against one database, callable from synchronous tests."""

    def __init__(self, database_url: str, settings: Settings) -> None:
        self.database_url = database_url
        self.settings = settings
        self.vocabulary = VOCABULARY
        self.webhooks = Webhooks(settings, emitter_for(settings))  # defers on the operation's own connection

    def run(self, op: Any, *args: Any, **kwargs: Any) -> Any:
        async def go() -> Any:
            async with await ops.connect(self.database_url) as conn:
                return await op(conn, *args, **kwargs)

        return _run(go())

    def user(
        self, role: str = "employer", account_id: str | None = None, email: str | None = None, plan: str = "enterprise"
    ) -> User:
        """A user with a session token, in a new account (on `plan`: the largest budget by default, so that
        only the rate-limit tests meet the limits) or in `account_id`."""
        email = email or f"{role}-{uuid.uuid4().hex[:10]}@example.test"
        password = f"pw-{uuid.uuid4().hex}"
        ids = self.run(ops.create_user, email=email, password=password, role=role, account_id=account_id)
        user = User(ids["user_id"], ids["account_id"], email, password, role, self.token(email))
        if account_id is None:
            self.set_plan(user, plan)
        return user

    def token(self, email: str, expires_in: int = 3600) -> str:
        return self.run(ops.mint_token, self.settings, email=email, expires_in=expires_in)["access_token"]

    def api_key(self, user: User, scopes: str = "read:jobs,write:jobs", mode: str = "test") -> dict[str, str]:
        return self.run(
            ops.create_api_key,
            self.settings,
            self.vocabulary,
            email=user.email,
            name="test key",
            scopes=scopes.split(","),
            mode=mode,
        )

    def webhook(self, user: User, url: str, events: list[str]) -> dict[str, str]:
        """`bin/admin create-webhook`: `{"id", "secret"}` of a new endpoint of the user's account."""
        return self.run(ops.create_webhook, self.webhooks, email=user.email, url=url, events=events)

    def set_plan(self, user: User, plan: str) -> None:
        self.run(ops.set_plan, self.vocabulary, email=user.email, plan=plan)

    def revoke(self, key_id: str) -> None:
        self.run(ops.revoke_api_key, key_id=key_id)

    def sql(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        async def go() -> list[dict[str, Any]]:
            async with await ops.connect(self.database_url) as conn:
                cursor = await conn.execute(query, params)  # type: ignore[arg-type]
                return await cursor.fetchall() if cursor.description else []

        return _run(go())

    def audit_trail(self, target_id: str) -> list[tuple[str, str, str | None]]:
        """The audit log's entries about `target_id`, oldest first, as `(action, actor_kind, actor_id)`; the chain
        is verified first."""
        assert self.run(audit_log.verify)["ok"] is True
        rows = self.sql(
            "SELECT action, actor_kind, actor_id FROM audit_entries WHERE target_id = %(t)s::text ORDER BY id",
            {"t": target_id},
        )
        return [(row["action"], row["actor_kind"], row["actor_id"]) for row in rows]

    def plan_changes(self, account_id: str) -> list[tuple[str, str | None]]:
        """Who changed the account's plan (`actor_kind`, `actor_id`), oldest first, by the audit log."""
        return [(kind, actor) for action, kind, actor in self.audit_trail(account_id) if action == "plan.changed"]


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


# --- shared helpers of the test modules -----------------------------------------------------------------------


def bearer(token: str) -> dict[str, str]:
    """An `Authorization: Bearer <token>` header."""
    return {"Authorization": f"Bearer {token}"}


def ok(response: httpx.Response) -> Any:
    """The `result` of a 200 response whose body is exactly `{"result": ...}`."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"result"}, body
    return body["result"]


def refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The `error` object of a response with this status, a body of only `error`, and this error code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    error: dict[str, Any] = body["error"]
    return error


def error_code(response: httpx.Response) -> str:
    """The error code of a body that is exactly `{"error": {"code", "message", "details"}}`."""
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS, body
    code: str = body["error"]["code"]
    return code


def assert_refused(response: httpx.Response, code: str = "invalid_token") -> None:
    """401 with the code, and a challenge that says a token was sent and refused (RFC 6750)."""
    assert response.status_code == 401, response.text
    assert error_code(response) == code
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge


def metric(client: httpx.Client, name: str, **labels: str) -> float:
    """A sample of the server's `/metrics` (0 when it has none yet)."""
    text = client.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def me(client: httpx.Client, token: str) -> httpx.Response:
    """`GET /v1/profile.me` with a bearer token."""
    return client.get("/v1/profile.me", headers=bearer(token))


def published_count(admin: Admin, account_id: str | None = None) -> int:
    """How many jobs the database holds as published, of one account or of all."""
    query = "SELECT count(*) AS n FROM jobs WHERE status = 'published'"
    if account_id is None:
        return int(admin.sql(query)[0]["n"])
    return int(admin.sql(query + " AND account_id = %(a)s", {"a": account_id})[0]["n"])


def b64url(data: bytes) -> str:
    """Unpadded base64url, as in a JWT."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(value: dict[str, Any]) -> str:
    """One JWT segment: a JSON object, base64url-encoded."""
    return b64url(json.dumps(value).encode())


def unsigned(header: dict[str, Any], claims: dict[str, Any]) -> str:
    """A JWT with an empty signature."""
    return f"{segment(header)}.{segment(claims)}."


def forge_hs256(header: dict[str, Any], claims: dict[str, Any], secret: bytes) -> str:
    """An HMAC-signed JWT built by hand: PyJWT refuses to use a PEM public key as an HMAC secret."""
    signing_input = f"{segment(header)}.{segment(claims)}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


def follow_link(http: httpx.Client, link: str) -> httpx.Response:
    """Open a mailed token link as a browser does: the first answer is a `303` to the page's address without the
    token (handed over in a cookie, so that no log keeps it), followed with the client's cookies, as is any
    redirect after it (a verification that goes on to choosing a password)."""
    answer = http.get(link)
    assert answer.status_code == 303, f"{answer.status_code} {answer.text[:500]}"
    assert "token" not in answer.headers["Location"], answer.headers["Location"]
    for _ in range(3):
        if answer.status_code != 303:
            break
        answer = http.get(answer.headers["Location"])
    return answer
