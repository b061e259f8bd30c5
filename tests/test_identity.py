"""The built-in identity provider (docs/security.md, docs/decisions.md): `/auth/login`, `/auth/refresh`, the JWKS
document, refresh-token rotation with reuse detection, and the sign-in throttle."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from rpc.auth.passwords import Passwords
from rpc.core.errors import RateLimited
from rpc.limits.throttle import address_key
from rpc.settings import Settings
from tests.support import Admin, LiveServer, User, error_code, me, settings_for

AUDIENCE = "hire-api"
TOKEN_KEYS = {"access_token", "refresh_token", "token_type", "expires_in"}


def login(client: httpx.Client, email: str, password: str, **headers: str) -> httpx.Response:
    return client.post("/auth/login", json={"email": email, "password": password}, headers=headers)


def refresh(client: httpx.Client, token: str, **headers: str) -> httpx.Response:
    return client.post("/auth/refresh", json={"refresh_token": token}, headers=headers)


def signed_in(client: httpx.Client, user: User) -> dict[str, Any]:
    response = login(client, user.email, user.password)
    assert response.status_code == 200, response.text
    pair: dict[str, Any] = response.json()
    return pair


@pytest.fixture(scope="module")
def settings(database: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """This module's server lets one e-mail sign in often; the throttle has its own server below."""
    return settings_for(database, DATA_DIR=str(tmp_path_factory.mktemp("data")), SIGNIN_LIMIT_PER_EMAIL="1000/minute")


@pytest.fixture(scope="module")
def first_sign_in(client: httpx.Client, employer: User) -> httpx.Response:
    """One sign-in whose answer several tests read (each sign-in costs an Argon2 verification)."""
    return login(client, employer.email, employer.password)


def assert_no_store(response: httpx.Response) -> None:
    assert response.headers["Cache-Control"] == "no-store"


# --- sign-in ---------------------------------------------------------------------------------------


def test_login_answers_a_token_pair(first_sign_in: httpx.Response) -> None:
    response = first_sign_in
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    assert_no_store(response)
    body = response.json()
    assert set(body) == TOKEN_KEYS
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["access_token"] and body["refresh_token"] and body["access_token"] != body["refresh_token"]


def test_login_access_token_works(client: httpx.Client, first_sign_in: httpx.Response, employer: User) -> None:
    response = me(client, first_sign_in.json()["access_token"])
    assert response.status_code == 200
    assert response.json()["result"]["id"] == employer.user_id


def test_login_access_token_is_es256_with_a_kid(first_sign_in: httpx.Response) -> None:
    header = jwt.get_unverified_header(first_sign_in.json()["access_token"])
    assert header["alg"] == "ES256"
    assert isinstance(header["kid"], str) and header["kid"]
    assert header.get("typ") != "at+jwt"


def test_login_access_token_verifies_against_the_published_jwks(
    client: httpx.Client, first_sign_in: httpx.Response, employer: User, settings: Settings
) -> None:
    token = first_sign_in.json()["access_token"]
    jwks = client.get("/.well-known/jwks.json")
    assert jwks.status_code == 200
    keys = jwt.PyJWKSet.from_dict(jwks.json())
    signing_key = keys[jwt.get_unverified_header(token)["kid"]]
    claims = jwt.decode(
        token,
        signing_key,
        algorithms=["ES256"],
        audience=AUDIENCE,
        issuer=f"{settings.public_url}/auth",
        options={"require": ["exp", "iat", "sub"]},
    )
    assert claims["sub"] == employer.user_id
    assert claims["exp"] - claims["iat"] == 3600
    assert abs(claims["iat"] - time.time()) < 60


def test_jwks_publishes_public_keys_only(client: httpx.Client) -> None:
    keys = client.get("/.well-known/jwks.json").json()["keys"]
    assert keys
    for key in keys:
        assert key["kty"] == "EC" and key["crv"] == "P-256" and key["kid"]
        assert "d" not in key


def test_login_email_is_case_insensitive(client: httpx.Client, employer: User) -> None:
    response = login(client, f"  {employer.email.upper()} ", employer.password)
    assert response.status_code == 200


def test_wrong_password_is_invalid_credentials(client: httpx.Client, employer: User) -> None:
    response = login(client, employer.email, employer.password + "x")
    assert response.status_code == 401
    assert error_code(response) == "invalid_credentials"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert_no_store(response)


def test_unknown_email_answers_like_a_wrong_password(client: httpx.Client, employer: User) -> None:
    unknown = login(client, "nobody-at-all@example.test", employer.password)
    wrong = login(client, employer.email, "wrong password")
    assert unknown.status_code == wrong.status_code == 401
    assert unknown.json() == wrong.json()
    assert error_code(unknown) == "invalid_credentials"


@pytest.mark.parametrize(
    ("body", "missing"), [({"email": "a@example.test"}, "password"), ({"password": "secret"}, "email")]
)
def test_login_with_a_missing_field_is_invalid_params(client: httpx.Client, body: dict[str, str], missing: str) -> None:
    response = client.post("/auth/login", json=body)
    assert response.status_code == 422
    assert error_code(response) == "invalid_params"
    assert missing in {error["field"] for error in response.json()["error"]["details"]["errors"]}


def test_login_with_a_wrongly_typed_field_is_invalid_params(client: httpx.Client) -> None:
    response = client.post("/auth/login", json={"email": ["a@example.test"], "password": 1})
    assert response.status_code == 422
    assert error_code(response) == "invalid_params"


@pytest.mark.parametrize(
    ("content", "content_type", "status", "code"),
    [
        (b"email=a&password=b", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        (b"not json", "text/plain", 415, "unsupported_media_type"),
        (b"not json", "application/json", 400, "invalid_json"),
        (b'["a@example.test", "secret"]', "application/json", 400, "invalid_json"),
        (b"", "application/json", 400, "invalid_json"),
    ],
    ids=["form", "text", "broken-json", "json-array", "empty"],
)
def test_login_without_a_json_object(
    client: httpx.Client, content: bytes, content_type: str, status: int, code: str
) -> None:
    response = client.post("/auth/login", content=content, headers={"Content-Type": content_type})
    assert response.status_code == status
    assert error_code(response) == code


def test_login_is_post_only(client: httpx.Client) -> None:
    assert client.get("/auth/login").status_code == 405


# --- refresh ---------------------------------------------------------------------------------------


def test_refresh_rotates_both_tokens(client: httpx.Client, employer: User) -> None:
    first = signed_in(client, employer)
    response = refresh(client, first["refresh_token"])
    assert response.status_code == 200
    assert_no_store(response)
    second = response.json()
    assert set(second) == TOKEN_KEYS and second["token_type"] == "Bearer" and second["expires_in"] == 3600
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]
    assert me(client, second["access_token"]).json()["result"]["id"] == employer.user_id


def test_rotated_refresh_token_works_once(client: httpx.Client, employer: User) -> None:
    first = signed_in(client, employer)
    second = refresh(client, first["refresh_token"]).json()
    assert refresh(client, second["refresh_token"]).status_code == 200
    again = refresh(client, second["refresh_token"])
    assert again.status_code == 401
    assert error_code(again) == "invalid_token"


def test_reuse_revokes_the_whole_family(client: httpx.Client, employer: User) -> None:
    first = signed_in(client, employer)
    second = refresh(client, first["refresh_token"]).json()
    third = refresh(client, second["refresh_token"]).json()

    reused = refresh(client, first["refresh_token"])  # a thief replays the first one
    assert reused.status_code == 401
    assert error_code(reused) == "invalid_token"
    assert 'error="invalid_token"' in reused.headers["WWW-Authenticate"]
    assert_no_store(reused)

    newest = refresh(client, third["refresh_token"])  # the newest token of that sign-in is gone too
    assert newest.status_code == 401
    assert error_code(newest) == "invalid_token"


def test_reuse_leaves_other_sign_ins_alone(client: httpx.Client, employer: User) -> None:
    stolen = signed_in(client, employer)
    other = signed_in(client, employer)
    refresh(client, stolen["refresh_token"])
    assert refresh(client, stolen["refresh_token"]).status_code == 401
    assert refresh(client, other["refresh_token"]).status_code == 200


@pytest.mark.parametrize("token", ["garbage", "", "x" * 500])
def test_unknown_refresh_token_is_invalid_token(client: httpx.Client, token: str) -> None:
    response = refresh(client, token)
    assert response.status_code == 401
    assert error_code(response) == "invalid_token"
    assert_no_store(response)


def stored(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def test_expired_refresh_token_is_invalid_token(client: httpx.Client, admin: Admin, employer: User) -> None:
    pair = signed_in(client, employer)
    expired = admin.sql(
        "UPDATE refresh_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = %(hash)s RETURNING id",
        {"hash": stored(pair["refresh_token"])},
    )
    assert len(expired) == 1
    response = refresh(client, pair["refresh_token"])
    assert response.status_code == 401
    assert error_code(response) == "invalid_token"


def test_access_token_is_not_a_refresh_token(client: httpx.Client, employer: User) -> None:
    response = refresh(client, signed_in(client, employer)["access_token"])
    assert response.status_code == 401
    assert error_code(response) == "invalid_token"


def test_refresh_without_the_field_is_invalid_params(client: httpx.Client) -> None:
    response = client.post("/auth/refresh", json={"token": "x"})
    assert response.status_code == 422
    assert error_code(response) == "invalid_params"


def test_refresh_tokens_are_stored_as_hashes(client: httpx.Client, admin: Admin, employer: User) -> None:
    token = signed_in(client, employer)["refresh_token"]
    assert len(admin.sql("SELECT 1 FROM refresh_tokens WHERE token_hash = %(hash)s", {"hash": stored(token)})) == 1
    rows = admin.sql(
        "SELECT count(*) AS n FROM refresh_tokens WHERE position(convert_to(%(t)s, 'UTF8') IN token_hash) > 0",
        {"t": token},
    )
    assert rows[0]["n"] == 0


# --- throttling ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def throttled(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A second server on the same database with small sign-in budgets (its counters are its own)."""
    settings = settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("throttled")),
        SIGNIN_LIMIT_PER_EMAIL="3/minute",
        SIGNIN_LIMIT_PER_ADDRESS="3/minute",
    )
    with LiveServer(settings) as server, server.client() as http:
        yield http


def from_address(address: str) -> dict[str, str]:
    """The loopback address is a trusted proxy, so X-Forwarded-For sets the client address."""
    return {"X-Forwarded-For": address}


def assert_rate_limited(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert error_code(response) == "rate_limited"
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert_no_store(response)


def test_fourth_sign_in_for_one_email_is_rate_limited(throttled: httpx.Client, candidate: User, employer: User) -> None:
    """However the e-mail is spelled and from wherever: even the right password is refused; others go on."""
    spellings = [candidate.email, f" {candidate.email.upper()} ", candidate.email.title()]
    for n, spelling in enumerate(spellings):
        assert login(throttled, spelling, "wrong", **from_address(f"198.51.100.{n}")).status_code == 401
    assert_rate_limited(login(throttled, candidate.email, candidate.password, **from_address("198.51.100.9")))
    assert login(throttled, employer.email, employer.password, **from_address("198.51.100.0")).status_code == 200


def test_fourth_sign_in_from_one_address_is_rate_limited(throttled: httpx.Client, employer: User) -> None:
    address = from_address("203.0.113.7")
    for n in range(3):
        assert login(throttled, f"unknown-{n}@example.test", "wrong", **address).status_code == 401
    assert_rate_limited(login(throttled, employer.email, employer.password, **address))
    assert login(throttled, employer.email, employer.password, **from_address("203.0.113.8")).status_code == 200


def test_refresh_counts_against_the_address(throttled: httpx.Client) -> None:
    address = from_address("203.0.113.9")
    for _ in range(3):
        assert refresh(throttled, "garbage", **address).status_code == 401
    assert_rate_limited(refresh(throttled, "garbage", **address))
    assert refresh(throttled, "garbage", **from_address("203.0.113.10")).status_code == 401


def test_an_ipv6_client_is_counted_by_its_64_network(throttled: httpx.Client, employer: User) -> None:
    """Hopping between the addresses of one /64 allocation does not buy more guesses."""
    for n in range(3):
        response = login(throttled, f"v6-{n}@example.test", "wrong", **from_address(f"2001:db8:7:7::{n + 1}"))
        assert response.status_code == 401
    assert_rate_limited(login(throttled, employer.email, employer.password, **from_address("2001:db8:7:7:ffff::9")))
    assert login(throttled, employer.email, employer.password, **from_address("2001:db8:7:8::1")).status_code == 200


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("::ffff:198.51.100.7", "198.51.100.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("unknown", "unknown"),
    ],
)
def test_addresses_are_counted_by_their_key(address: str, key: str) -> None:
    assert address_key(address) == key


def test_a_flood_of_sign_ins_cannot_hash_without_bound() -> None:
    """Argon2 holds 64 MiB per hash: beyond the running ones and a bounded queue, attempts are refused."""

    async def flood() -> None:
        passwords = Passwords(concurrency=1, max_waiting=1)
        stored = await passwords.hash("correct horse battery")
        first = asyncio.create_task(passwords.verify(stored, "guess"))
        second = asyncio.create_task(passwords.verify(stored, "guess"))
        while passwords.waiting < 1:  # noqa: ASYNC110 - until `second` queues behind `first`
            await asyncio.sleep(0)
        with pytest.raises(RateLimited):
            await passwords.verify(stored, "guess")
        assert await first is False and await second is False
        assert await passwords.verify(stored, "correct horse battery")

    asyncio.run(flood())
