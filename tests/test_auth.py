"""Credentials at the `/v1` door (docs/decisions.md, docs/security.md): session JWTs, API keys, scopes against roles,
and what a production deployment adds (HTTPS only, no test keys)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from rpc.auth import apikeys
from rpc.auth.keyring import KeyRing, add_signing_key
from rpc.core.crypto import Sealer
from rpc.settings import Settings
from tests.conftest import Databases
from tests.support import (
    TEST_SECRET_KEY,
    Admin,
    LiveServer,
    User,
    assert_refused,
    bearer,
    error_code,
    forge_hs256,
    segment,
    settings_for,
    unsigned,
)

AUDIENCE = "hire-api"
HTTPS = {"X-Forwarded-Proto": "https"}  # honoured: the loopback address is a trusted proxy
JOB = {"title": "Welder", "company": "Acme", "location": "Izmir"}


@pytest.fixture(scope="module")
def keyring(admin: Admin) -> KeyRing:
    """The service's own signing keys, unsealed from the database as the server does."""
    loaded: KeyRing = admin.run(KeyRing.load, Sealer(TEST_SECRET_KEY))
    return loaded


@pytest.fixture(scope="module")
def jwks(client: httpx.Client) -> dict[str, Any]:
    response = client.get("/.well-known/jwks.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


def claims_for(user: User, settings: Settings, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {"iss": settings.issuer, "aud": AUDIENCE, "sub": user.user_id, "iat": now, "exp": now + 600}
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def get_jobs(client: httpx.Client, headers: dict[str, str]) -> httpx.Response:
    return client.get("/v1/jobs.list", headers=headers)


# --- the credential matrix -------------------------------------------------------------------------


def test_missing_header_is_missing_credentials(client: httpx.Client) -> None:
    response = get_jobs(client, {})
    assert response.status_code == 401
    assert error_code(response) == "missing_credentials"
    assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "authorization",
    [
        "Basic dXNlcjpwYXNz",
        "Token abc.def.ghi",
        "Bearer",
        "Bearer garbage",
        "Bearer abc.def",
        "Bearer a.b.c",
        "Bearer " + segment({"alg": "ES256"}) + "." + segment({"sub": "x"}),
    ],
    ids=["basic", "other-scheme", "bearer-alone", "garbage", "two-segments", "junk-segments", "no-signature"],
)
def test_malformed_credentials_are_invalid_token(client: httpx.Client, authorization: str) -> None:
    assert_refused(get_jobs(client, {"Authorization": authorization}))


@pytest.mark.parametrize("credential", ["garbage", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"])
def test_a_credential_of_no_known_shape_is_told_the_shapes(client: httpx.Client, credential: str) -> None:
    """Another service's key or a bad paste: the answer names the API keys' prefixes and where to get one."""
    response = get_jobs(client, {"Authorization": f"Bearer {credential}"})
    assert_refused(response)
    message = response.json()["error"]["message"]
    assert "service_live_" in message and "service_test_" in message and "bin/admin create-api-key" in message


@pytest.mark.parametrize("scheme", ["Basic", "Token", "JWT"])
def test_a_valid_token_under_another_scheme_is_invalid_token(client: httpx.Client, employer: User, scheme: str) -> None:
    assert_refused(get_jobs(client, {"Authorization": f"{scheme} {employer.token}"}))


def test_a_valid_session_token_is_accepted(client: httpx.Client, employer: User) -> None:
    response = client.get("/v1/profile.me", headers=employer.auth)
    assert response.status_code == 200
    assert response.json()["result"]["id"] == employer.user_id


def test_bearer_scheme_is_case_insensitive(client: httpx.Client, employer: User) -> None:
    assert get_jobs(client, {"Authorization": f"bearer {employer.token}"}).status_code == 200


def test_tampered_payload_is_invalid_token(client: httpx.Client, employer: User, candidate: User) -> None:
    header, payload, signature = employer.token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = candidate.user_id
    assert_refused(get_jobs(client, bearer(f"{header}.{segment(claims)}.{signature}")))


def test_tampered_signature_is_invalid_token(client: httpx.Client, employer: User) -> None:
    head, _, signature = employer.token.rpartition(".")
    flipped = ("A" if signature[5] != "A" else "B").join((signature[:5], signature[6:]))
    assert_refused(get_jobs(client, bearer(f"{head}.{flipped}")))


def test_expired_token_is_token_expired(client: httpx.Client, admin: Admin, employer: User) -> None:
    token = admin.token(employer.email, expires_in=-60)
    assert_refused(get_jobs(client, bearer(token)), "token_expired")


def test_own_signature_with_wrong_issuer(
    client: httpx.Client, keyring: KeyRing, employer: User, settings: Settings
) -> None:
    claims = claims_for(employer, settings, iss="https://elsewhere.example/auth")
    assert_refused(get_jobs(client, bearer(keyring.sign(claims))))


def test_own_signature_with_wrong_audience(
    client: httpx.Client, keyring: KeyRing, employer: User, settings: Settings
) -> None:
    claims = claims_for(employer, settings, aud="another-api")
    assert_refused(get_jobs(client, bearer(keyring.sign(claims))))


@pytest.mark.parametrize("claim", ["exp", "iat", "aud", "iss", "sub"])
def test_own_signature_without_a_required_claim(
    client: httpx.Client, keyring: KeyRing, employer: User, settings: Settings, claim: str
) -> None:
    claims = claims_for(employer, settings)
    del claims[claim]
    assert_refused(get_jobs(client, bearer(keyring.sign(claims))))


def test_own_signature_for_a_user_that_does_not_exist(
    client: httpx.Client, keyring: KeyRing, employer: User, settings: Settings
) -> None:
    claims = claims_for(employer, settings, sub=str(uuid.uuid4()))
    assert_refused(get_jobs(client, bearer(keyring.sign(claims))))


def test_control_own_signature_with_correct_claims_is_accepted(
    client: httpx.Client, keyring: KeyRing, employer: User, settings: Settings
) -> None:
    """The forged-claims tests above differ from this one in a single claim."""
    response = client.get("/v1/profile.me", headers=bearer(keyring.sign(claims_for(employer, settings))))
    assert response.status_code == 200
    assert response.json()["result"]["id"] == employer.user_id


def test_alg_none_is_invalid_token(
    client: httpx.Client, employer: User, settings: Settings, jwks: dict[str, Any]
) -> None:
    kid = jwks["keys"][0]["kid"]
    for alg in ("none", "None", "NONE"):
        token = unsigned({"alg": alg, "typ": "JWT", "kid": kid}, claims_for(employer, settings))
        assert_refused(get_jobs(client, bearer(token)))


@pytest.mark.parametrize("with_kid", [True, False])
def test_hs256_signed_with_the_public_key_is_invalid_token(
    client: httpx.Client, employer: User, settings: Settings, jwks: dict[str, Any], with_kid: bool
) -> None:
    """Key confusion: the published public key, PEM-encoded, used as an HMAC secret."""
    published = jwks["keys"][0]
    pem = jwt.PyJWK.from_dict(published).key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = {"alg": "HS256", "typ": "JWT", **({"kid": published["kid"]} if with_kid else {})}
    assert_refused(get_jobs(client, bearer(forge_hs256(header, claims_for(employer, settings), pem))))


def test_unknown_kid_is_invalid_token(client: httpx.Client, employer: User, settings: Settings) -> None:
    stranger = ec.generate_private_key(ec.SECP256R1())
    token = jwt.encode(claims_for(employer, settings), stranger, algorithm="ES256", headers={"kid": "no-such-key"})
    assert_refused(get_jobs(client, bearer(token)))


def test_known_kid_signed_by_another_key_is_invalid_token(
    client: httpx.Client, employer: User, settings: Settings, jwks: dict[str, Any]
) -> None:
    stranger = ec.generate_private_key(ec.SECP256R1())
    headers = {"kid": jwks["keys"][0]["kid"]}
    token = jwt.encode(claims_for(employer, settings), stranger, algorithm="ES256", headers=headers)
    assert_refused(get_jobs(client, bearer(token)))


def test_oauth_typed_token_is_not_a_session_token(
    client: httpx.Client, keyring: KeyRing, employer: User, settings: Settings
) -> None:
    """Signed by the service itself, every claim right, but typed as an OAuth access token (RFC 9068)."""
    token = keyring.sign(claims_for(employer, settings), typ="at+jwt")
    assert_refused(get_jobs(client, bearer(token)))


# --- API keys --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def key(admin: Admin, employer: User) -> dict[str, str]:
    return admin.api_key(employer, scopes="read:jobs,write:jobs")


def test_api_key_is_accepted(client: httpx.Client, key: dict[str, str]) -> None:
    assert get_jobs(client, bearer(key["key"])).status_code == 200


def test_api_key_acts_as_the_user_who_created_it(client: httpx.Client, key: dict[str, str], employer: User) -> None:
    response = client.post("/v1/jobs.create", json=JOB, headers=bearer(key["key"]))
    assert response.status_code == 200, response.text
    job_id = response.json()["result"]["id"]
    mine = client.get("/v1/jobs.list", params={"mine": "true"}, headers=employer.auth).json()["result"]
    assert job_id in {job["id"] for job in mine["data"]}


def test_revoked_api_key_is_invalid_api_key(client: httpx.Client, admin: Admin, employer: User) -> None:
    created = admin.api_key(employer, scopes="read:jobs")
    assert get_jobs(client, bearer(created["key"])).status_code == 200
    admin.revoke(created["id"])
    assert_refused(get_jobs(client, bearer(created["key"])), "invalid_api_key")


def flip_one(key: str, position: int) -> str:
    replacement = "a" if key[position] != "a" else "b"
    return key[:position] + replacement + key[position + 1 :]


@pytest.mark.parametrize("position", [20, -1])
def test_api_key_with_a_bad_checksum_is_invalid_api_key(
    client: httpx.Client, key: dict[str, str], position: int
) -> None:
    assert_refused(get_jobs(client, bearer(flip_one(key["key"], position))), "invalid_api_key")


def test_bad_checksum_is_refused_without_a_database_lookup(
    client: httpx.Client, database: str, key: dict[str, str]
) -> None:
    """While another transaction holds `api_keys` exclusively, a key lookup must wait; a bad checksum must not."""
    made_up = apikeys.generate("test")  # well-formed, valid checksum, unknown
    with psycopg.connect(database) as conn:
        conn.execute("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        response = client.get("/v1/jobs.list", headers=bearer(flip_one(key["key"], 20)), timeout=5)
        assert_refused(response, "invalid_api_key")
        assert time.monotonic() - started < 2
        with pytest.raises(httpx.ReadTimeout):  # the control: a key that passes the checksum does wait
            client.get("/v1/jobs.list", headers=bearer(made_up), timeout=0.5)
        conn.rollback()


@pytest.mark.parametrize(
    "value",
    [
        apikeys.generate("test"),
        apikeys.generate("live"),
        "service_test_short",
        "service_prod_" + "a" * 38,
        "service_",
    ],
    ids=["made-up-test", "made-up-live", "short", "other-mode", "prefix-only"],
)
def test_made_up_api_key_is_invalid_api_key(client: httpx.Client, value: str) -> None:
    assert_refused(get_jobs(client, bearer(value)), "invalid_api_key")


def last_used_at(admin: Admin, key_id: str) -> dt.datetime | None:
    rows = admin.sql("SELECT last_used_at FROM api_keys WHERE id = %(id)s", {"id": key_id})
    used: dt.datetime | None = rows[0]["last_used_at"]
    return used


def set_last_used(admin: Admin, key_id: str, seconds_ago: int) -> dt.datetime:
    rows = admin.sql(
        "UPDATE api_keys SET last_used_at = now() - make_interval(secs => %(ago)s) WHERE id = %(id)s "
        "RETURNING last_used_at",
        {"id": key_id, "ago": seconds_ago},
    )
    when: dt.datetime = rows[0]["last_used_at"]
    return when


def test_last_used_at_is_set_on_use(client: httpx.Client, admin: Admin, employer: User) -> None:
    created = admin.api_key(employer, scopes="read:jobs")
    assert last_used_at(admin, created["id"]) is None
    second = dt.timedelta(seconds=1)  # the column keeps whole seconds, rounded
    before = dt.datetime.now(dt.UTC)
    assert get_jobs(client, bearer(created["key"])).status_code == 200
    used = last_used_at(admin, created["id"])
    assert used is not None and before - second <= used <= dt.datetime.now(dt.UTC) + second


def test_last_used_at_is_not_rewritten_within_a_minute(client: httpx.Client, admin: Admin, employer: User) -> None:
    created = admin.api_key(employer, scopes="read:jobs")
    recent = set_last_used(admin, created["id"], 30)
    assert get_jobs(client, bearer(created["key"])).status_code == 200
    assert last_used_at(admin, created["id"]) == recent


def test_last_used_at_is_rewritten_after_a_minute(client: httpx.Client, admin: Admin, employer: User) -> None:
    created = admin.api_key(employer, scopes="read:jobs")
    old = set_last_used(admin, created["id"], 90)
    assert get_jobs(client, bearer(created["key"])).status_code == 200
    used = last_used_at(admin, created["id"])
    assert used is not None and used > old + dt.timedelta(seconds=60)


# --- scopes against roles --------------------------------------------------------------------------


def test_candidate_session_may_read_jobs_and_update_profile(client: httpx.Client, candidate: User) -> None:
    assert get_jobs(client, candidate.auth).status_code == 200
    response = client.post("/v1/profile.update", json={"headline": "Welder"}, headers=candidate.auth)
    assert response.status_code == 200
    assert response.json()["result"]["headline"] == "Welder"


def test_candidate_session_may_not_create_jobs(client: httpx.Client, candidate: User) -> None:
    response = client.post("/v1/jobs.create", json=JOB, headers=candidate.auth)
    assert response.status_code == 403
    assert error_code(response) == "forbidden"


def test_employer_session_may_create_jobs(client: httpx.Client, employer: User) -> None:
    response = client.post("/v1/jobs.create", json=JOB, headers=employer.auth)
    assert response.status_code == 200
    assert response.json()["result"]["status"] == "draft"


def test_read_only_key_lacks_write_scope(client: httpx.Client, admin: Admin, employer: User) -> None:
    read_only = admin.api_key(employer, scopes="read:jobs")["key"]
    assert get_jobs(client, bearer(read_only)).status_code == 200
    response = client.post("/v1/jobs.create", json=JOB, headers=bearer(read_only))
    assert response.status_code == 403
    assert error_code(response) == "insufficient_scope"
    assert response.json()["error"]["details"] == {"required": "write:jobs", "granted": ["read:jobs"]}


def test_key_scopes_are_not_a_session_s_every_scope(client: httpx.Client, key: dict[str, str]) -> None:
    response = client.get("/v1/profile.me", headers=bearer(key["key"]))
    assert response.status_code == 403
    assert error_code(response) == "insufficient_scope"
    assert response.json()["error"]["details"] == {"required": "read:profile", "granted": ["read:jobs", "write:jobs"]}


# --- a production deployment -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def production(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = settings_for(database, SERVICE_ENV="production", DATA_DIR=str(tmp_path_factory.mktemp("prod")))
    with LiveServer(settings) as server, server.client() as http:
        yield http


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/jobs.list"), ("GET", "/v1/no.such"), ("GET", "/v2/jobs.list"), ("POST", "/auth/login")],
)
def test_production_refuses_plain_http_first(production: httpx.Client, method: str, path: str) -> None:
    response = production.request(method, path, content=b"not json")
    assert response.status_code == 403
    assert error_code(response) == "https_required"


def test_production_refuses_plain_http_even_with_a_valid_key(
    production: httpx.Client, admin: Admin, employer: User
) -> None:
    live_key = admin.api_key(employer, scopes="read:jobs", mode="live")["key"]
    response = production.get("/v1/jobs.list", headers=bearer(live_key))
    assert response.status_code == 403
    assert error_code(response) == "https_required"


def test_production_over_https_sends_hsts(production: httpx.Client) -> None:
    response = production.get("/v1/jobs.list", headers=HTTPS)
    assert error_code(response) == "missing_credentials"
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")
    assert production.get("/.well-known/jwks.json", headers=HTTPS).headers["Strict-Transport-Security"]


def test_production_refuses_test_keys(production: httpx.Client, key: dict[str, str]) -> None:
    assert key["key"].startswith("service_test_")
    assert_refused(production.get("/v1/jobs.list", headers={**HTTPS, **bearer(key["key"])}), "invalid_api_key")


def test_production_accepts_live_keys(production: httpx.Client, admin: Admin, employer: User) -> None:
    live_key = admin.api_key(employer, scopes="read:jobs", mode="live")["key"]
    response = production.get("/v1/jobs.list", headers={**HTTPS, **bearer(live_key)})
    assert response.status_code == 200
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")


def test_a_remembered_token_still_needs_its_user(client: httpx.Client, admin: Admin) -> None:
    user = admin.user("employer")
    assert client.get("/v1/profile.me", headers=user.auth).status_code == 200  # verified and remembered
    admin.sql("DELETE FROM users WHERE id = %(id)s", {"id": user.user_id})
    response = client.get("/v1/profile.me", headers=user.auth)
    assert response.status_code == 401
    assert error_code(response) == "invalid_token"


# --- signing keys retired in the database (docs/security.md) ---------------------------------------------------


def test_a_retired_signing_key_stops_verifying_without_a_restart(databases: Databases, tmp_path: Path) -> None:
    """Retiring a key (a leak) acts on the very next request, also for tokens the process has seen before; a
    token signed by a key another process added is learnt on sight."""
    url = databases.copy()
    settings = settings_for(url, DATA_DIR=str(tmp_path))
    admin = Admin(url, settings)
    user = admin.user("employer")
    old_kid = admin.sql("SELECT kid FROM signing_keys WHERE retired_at IS NULL")[0]["kid"]
    with LiveServer(settings) as live, live.client() as client:
        assert client.get("/v1/profile.me", headers=user.auth).status_code == 200  # verified and remembered
        new_kid = admin.run(add_signing_key, Sealer(TEST_SECRET_KEY))
        admin.sql("UPDATE signing_keys SET retired_at = now() WHERE kid = %(kid)s", {"kid": old_kid})
        assert_refused(client.get("/v1/profile.me", headers=user.auth))
        fresh = admin.token(user.email)
        assert jwt.get_unverified_header(fresh)["kid"] == new_kid
        assert client.get("/v1/profile.me", headers=bearer(fresh)).status_code == 200
