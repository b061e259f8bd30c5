"""An external identity provider's JWTs (docs/security.md, docs/operations.md): a real JWKS document served over HTTP
from a
local server (RSA and EC keys, fetches counted), users created on first sight, the role claim, the refusals,
the refetch on an unknown `kid`, and the shared-secret (Supabase-style) mode."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from rpc.auth import external
from rpc.core.errors import InvalidToken
from rpc.settings import Settings, SettingsError
from tests.support import (
    Admin,
    LiveServer,
    User,
    assert_refused,
    bearer,
    eventually,
    forge_hs256,
    me,
    refused,
    segment,
    settings_for,
    unsigned,
)

ISSUER = "https://id.example.test/"
AUDIENCE = "hire-api-test"
ROLE_CLAIM = "https://example.test/role"
SECRET = "shared-secret-of-the-provider-" + "0123456789abcdef" * 3
SECRET_ISSUER = "https://project.supabase.test/auth/v1"
SECRET_AUDIENCE = "authenticated"


# --- the provider: keys, tokens, and a JWKS document on a real HTTP server -------------------------


@dataclass(frozen=True)
class SigningKey:
    kid: str
    alg: str
    private: Any

    @classmethod
    def rsa(cls, kid: str) -> SigningKey:
        return cls(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def ec(cls, kid: str) -> SigningKey:
        return cls(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))

    def jwk(self) -> dict[str, Any]:
        algorithm = RSAAlgorithm if self.alg.startswith("RS") else ECAlgorithm
        document = algorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**document, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        pem: bytes = self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return pem

    def sign(self, claims: dict[str, Any], alg: str | None = None, **header: Any) -> str:
        return jwt.encode(claims, self.private, algorithm=alg or self.alg, headers={"kid": self.kid, **header})


class JwksServer:
    """A JWKS document at `url`, served by `http.server` in a thread; counts the fetches."""

    def __init__(self, *keys: SigningKey) -> None:
        self.keys = [key.jwk() for key in keys]
        self.failing = False
        self.fetches = 0
        self.asked = 0  # requests begun, answered or not
        self.answering = threading.Event()  # cleared: a fetch hangs until it is set again
        self.answering.set()
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with provider._lock:
                    provider.asked += 1
                provider.answering.wait(timeout=30)
                with provider._lock:
                    provider.fetches += 1
                    body = json.dumps({"keys": provider.keys}).encode()
                    status = 500 if provider.failing else 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/.well-known/jwks.json"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def publish(self, key: SigningKey) -> None:
        with self._lock:
            self.keys.append(key.jwk())

    def __enter__(self) -> JwksServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def claims(**changes: Any) -> dict[str, Any]:
    """A valid claim set for the JWKS provider, with a new subject unless given; a `None` removes a claim."""
    sub = changes.get("sub") or f"user-{uuid.uuid4().hex}"
    now = int(time.time())
    values = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600, "email": f"{sub}@idp.test"}
    values.update(changes)
    return {name: value for name, value in values.items() if value is not None}


def profile_of(client: httpx.Client, token: str) -> dict[str, Any]:
    response = me(client, token)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


def external_server(database: str, tmp_path_factory: pytest.TempPathFactory, **env: str) -> LiveServer:
    return LiveServer(settings_for(database, DATA_DIR=str(tmp_path_factory.mktemp("external")), **env))


@pytest.fixture(scope="module")
def rsa_key() -> SigningKey:
    return SigningKey.rsa("rsa-1")


@pytest.fixture(scope="module")
def ec_key() -> SigningKey:
    return SigningKey.ec("ec-1")


@pytest.fixture(scope="module")
def provider(rsa_key: SigningKey, ec_key: SigningKey) -> Iterator[JwksServer]:
    with JwksServer(rsa_key, ec_key) as server:
        yield server


@pytest.fixture(scope="module")
def api(database: str, tmp_path_factory: pytest.TempPathFactory, provider: JwksServer) -> Iterator[httpx.Client]:
    """The service trusting the JWKS provider (default algorithms RS256, ES256) and its role claim."""
    server = external_server(
        database,
        tmp_path_factory,
        AUTH_JWKS_URL=provider.url,
        AUTH_ISSUER=ISSUER,
        AUTH_AUDIENCE=AUDIENCE,
        AUTH_ROLE_CLAIM=ROLE_CLAIM,
    )
    with server, server.client() as http:
        yield http


# --- first sight and identity ----------------------------------------------------------------------


def test_first_sight_creates_a_candidate_with_a_new_account(
    api: httpx.Client, admin: Admin, rsa_key: SigningKey
) -> None:
    sub = f"auth0|{uuid.uuid4().hex}"
    profile = profile_of(api, rsa_key.sign(claims(sub=sub, email="New.Person@IdP.test", name="New Person")))
    assert profile["role"] == "candidate"
    assert profile["email"] == "new.person@idp.test"
    assert profile["display_name"] == "New Person"
    rows = admin.sql(
        "SELECT issuer, subject, password_hash,"
        " (SELECT count(*) FROM users AS o WHERE o.account_id = u.account_id) AS n"
        " FROM users AS u WHERE id = %(id)s",
        {"id": profile["id"]},
    )
    assert rows == [{"issuer": ISSUER, "subject": sub, "password_hash": None, "n": 1}]


def test_an_address_the_provider_verified_is_one_alerts_may_mail(api: httpx.Client, rsa_key: SigningKey) -> None:
    """Job alerts mail only verified addresses; the provider's `email_verified` is that word at first sight."""
    alert = {"q": "python", "frequency": "daily"}
    verified = rsa_key.sign(claims(email_verified=True))
    assert api.post("/v1/alerts.create", json=alert, headers=bearer(verified)).status_code == 200
    unconfirmed = rsa_key.sign(claims(email_verified=False))
    refused(api.post("/v1/alerts.create", json=alert, headers=bearer(unconfirmed)), 403, "forbidden")


def test_subject_of_255_characters_is_accepted(api: httpx.Client, rsa_key: SigningKey) -> None:
    """OpenID Connect's limit for `sub`; one more is refused (see the refusals below)."""
    profile_of(api, rsa_key.sign(claims(sub="s" * 254 + uuid.uuid4().hex[:1])))


def test_es256_tokens_are_accepted(api: httpx.Client, ec_key: SigningKey) -> None:
    assert profile_of(api, ec_key.sign(claims()))["role"] == "candidate"


def test_same_issuer_and_subject_is_the_same_user(api: httpx.Client, rsa_key: SigningKey, ec_key: SigningKey) -> None:
    sub = f"user-{uuid.uuid4().hex}"
    first = profile_of(api, rsa_key.sign(claims(sub=sub)))
    again = profile_of(api, ec_key.sign(claims(sub=sub, jti="another", email="changed@idp.test")))
    other = profile_of(api, rsa_key.sign(claims()))
    assert again["id"] == first["id"] and again["account_id"] == first["account_id"]
    assert other["id"] != first["id"] and other["account_id"] != first["account_id"]


def test_concurrent_first_sight_creates_one_user(api: httpx.Client, admin: Admin, rsa_key: SigningKey) -> None:
    sub = f"user-{uuid.uuid4().hex}"
    token = rsa_key.sign(claims(sub=sub))
    results: list[httpx.Response] = []

    def call() -> None:
        results.append(me(api, token))

    threads = [threading.Thread(target=call) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in results] == [200] * 6
    assert len({r.json()["result"]["id"] for r in results}) == 1
    rows = admin.sql("SELECT count(*) AS n FROM accounts WHERE name = %(name)s", {"name": f"{sub}@idp.test"})
    assert rows[0]["n"] == 1


def test_role_claim_employer_creates_an_employer(api: httpx.Client, rsa_key: SigningKey) -> None:
    token = rsa_key.sign(claims(**{ROLE_CLAIM: "employer"}))
    assert profile_of(api, token)["role"] == "employer"
    job = {"title": "Welder", "company": "Acme", "location": "Izmir"}
    response = api.post("/v1/jobs.create", json=job, headers=bearer(token))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("value", ["admin", "superuser", "Employer", ["employer"], 1])
def test_role_claim_grants_nothing_else(api: httpx.Client, rsa_key: SigningKey, value: Any) -> None:
    assert profile_of(api, rsa_key.sign(claims(**{ROLE_CLAIM: value})))["role"] == "candidate"


def test_only_the_configured_claim_decides_the_role(api: httpx.Client, rsa_key: SigningKey) -> None:
    token = rsa_key.sign(claims(role="employer", user_metadata={"role": "employer"}))
    assert profile_of(api, token)["role"] == "candidate"


@pytest.mark.parametrize("typ", ["at+jwt", "application/at+jwt", "AT+JWT"])
def test_a_providers_own_access_tokens_are_verified_as_its_tokens(
    api: httpx.Client, rsa_key: SigningKey, typ: str
) -> None:
    """Okta and Keycloak type their access tokens `at+jwt` (RFC 9068): they are the provider's, checked as such,
    not mistaken for this service's OAuth tokens."""
    subject = f"okta-{uuid.uuid4().hex}"
    assert profile_of(api, rsa_key.sign(claims(sub=subject), typ=typ))["role"] == "candidate"
    forged = SigningKey.rsa(rsa_key.kid).sign(claims(sub=subject), typ=typ)
    assert_refused(me(api, forged))


def test_builtin_session_tokens_still_work(api: httpx.Client, employer: User) -> None:
    assert profile_of(api, employer.token)["id"] == employer.user_id


# --- refusals --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"iss": "https://evil.example.test/"},
        {"iss": ISSUER.rstrip("/")},
        {"aud": "another-api"},
        {"aud": None},
        {"sub": None},
        {"sub": "", "email": None},
        {"sub": "s" * 256},
        {"exp": None},
        {"nbf": int(time.time()) + 3600},
    ],
    ids=[
        "wrong-issuer",
        "issuer-without-slash",
        "wrong-audience",
        "no-audience",
        "no-sub",
        "empty-sub",
        "long-sub",
        "no-exp",
        "nbf",
    ],
)
def test_bad_claims_are_invalid_token(api: httpx.Client, rsa_key: SigningKey, changes: dict[str, Any]) -> None:
    assert_refused(me(api, rsa_key.sign(claims(**changes))))


def test_expired_token_is_token_expired(api: httpx.Client, rsa_key: SigningKey) -> None:
    now = int(time.time())
    assert_refused(me(api, rsa_key.sign(claims(iat=now - 900, exp=now - 120))), "token_expired")


def test_tampered_payload_is_invalid_token(api: httpx.Client, rsa_key: SigningKey) -> None:
    header, _, signature = rsa_key.sign(claims()).split(".")
    assert_refused(me(api, f"{header}.{segment(claims(sub='someone-else'))}.{signature}"))


def test_another_key_under_a_known_kid_is_invalid_token(api: httpx.Client) -> None:
    impostor = SigningKey.ec("ec-1")
    assert_refused(me(api, impostor.sign(claims())))


@pytest.mark.parametrize(("alg", "kid"), [("ES256", "rsa-1"), ("RS256", "ec-1")])
def test_algorithm_of_another_key_type_is_invalid_token(
    api: httpx.Client, rsa_key: SigningKey, ec_key: SigningKey, alg: str, kid: str
) -> None:
    """A header naming one key but the algorithm of the other kind: refused, not an internal error."""
    signer = ec_key if alg == "ES256" else rsa_key
    assert_refused(me(api, signer.sign(claims(), kid=kid)))


@pytest.mark.parametrize("with_kid", [True, False])
def test_hs256_signed_with_the_public_key_is_invalid_token(
    api: httpx.Client, rsa_key: SigningKey, with_kid: bool
) -> None:
    header = {"alg": "HS256", "typ": "JWT", **({"kid": rsa_key.kid} if with_kid else {})}
    assert_refused(me(api, forge_hs256(header, claims(), rsa_key.public_pem())))


@pytest.mark.parametrize("alg", ["none", "None"])
def test_alg_none_is_invalid_token(api: httpx.Client, rsa_key: SigningKey, alg: str) -> None:
    assert_refused(me(api, unsigned({"alg": alg, "typ": "JWT", "kid": rsa_key.kid}, claims())))


def test_algorithm_outside_the_configured_ones_is_invalid_token(api: httpx.Client, rsa_key: SigningKey) -> None:
    assert_refused(me(api, rsa_key.sign(claims(), alg="RS512")))


def test_token_without_kid_is_invalid_token(api: httpx.Client, rsa_key: SigningKey) -> None:
    token = jwt.encode(claims(), rsa_key.private, algorithm="RS256")
    assert_refused(me(api, token))


# --- fetching the key set --------------------------------------------------------------------------


@pytest.fixture
def fresh(
    database: str, tmp_path_factory: pytest.TempPathFactory, rsa_key: SigningKey
) -> Iterator[tuple[JwksServer, httpx.Client]]:
    """A provider and a server that has not fetched its keys yet."""
    with JwksServer(rsa_key) as keys:
        server = external_server(database, tmp_path_factory, AUTH_JWKS_URL=keys.url, AUTH_ISSUER=ISSUER)
        with server, server.client() as http:
            yield keys, http


def test_keys_are_fetched_once_and_cached(fresh: tuple[JwksServer, httpx.Client], rsa_key: SigningKey) -> None:
    keys, api = fresh
    assert keys.fetches == 0
    for _ in range(3):
        profile_of(api, rsa_key.sign(claims(aud=None)))
    assert keys.fetches == 1


def test_unknown_kids_do_not_refetch_within_the_interval(
    fresh: tuple[JwksServer, httpx.Client], rsa_key: SigningKey
) -> None:
    keys, api = fresh
    assert_refused(me(api, SigningKey.ec("ghost-1").sign(claims(aud=None))))
    assert keys.fetches == 1
    assert_refused(me(api, SigningKey.ec("ghost-2").sign(claims(aud=None))))
    profile_of(api, rsa_key.sign(claims(aud=None)))
    assert keys.fetches == 1


def test_a_hanging_provider_holds_no_connection(
    database: str, tmp_path_factory: pytest.TempPathFactory, rsa_key: SigningKey, employer: User
) -> None:
    """Tokens naming keys not yet fetched wait for the provider's JWKS before their request takes a database
    connection: with the provider hanging, they hold none of the pool's two, and other callers are served."""
    with JwksServer(rsa_key) as keys:
        server = external_server(
            database, tmp_path_factory, AUTH_JWKS_URL=keys.url, AUTH_ISSUER=ISSUER, DB_POOL_MAX="2", DB_POOL_TIMEOUT="2"
        )

        def status_of(token: str) -> int:
            with server.client() as client:
                return me(client, token).status_code

        with server, server.client() as api:
            keys.answering.clear()
            with concurrent.futures.ThreadPoolExecutor(2) as waiting:
                unknown = [waiting.submit(status_of, SigningKey.ec(f"new-{n}").sign(claims())) for n in range(2)]
                try:
                    eventually(lambda: keys.asked == 1, "the provider asked for its keys")
                    for _ in range(3):
                        assert me(api, employer.token).status_code == 200, "a caller waited for a connection"
                finally:
                    keys.answering.set()
                assert [call.result() for call in unknown] == [401, 401]
            assert keys.fetches == 1


class Clock:
    """Monotonic seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def verified(provider: external.ExternalProvider, token: str) -> dict[str, Any]:
    """As a request has it checked: its keys prepared before it takes a connection, then verified on it."""
    header = jwt.get_unverified_header(token)
    await provider.prepare(header)
    return await provider.verify(token, header)


async def refused_by(provider: external.ExternalProvider, token: str) -> None:
    with pytest.raises(InvalidToken):
        await verified(provider, token)


def keyed_settings(keys: JwksServer) -> Settings:
    env = {"SERVICE_SECRET_KEY": "k" * 40, "AUTH_JWKS_URL": keys.url, "AUTH_ISSUER": ISSUER, "AUTH_AUDIENCE": AUDIENCE}
    return Settings.from_env(env)


def test_unknown_kid_refetches_once_and_finds_a_rotated_key(rsa_key: SigningKey) -> None:
    """The provider publishes a new key after our first fetch; once the interval has passed, its first token
    makes one refetch, and a second unknown kid right after makes none."""

    async def scenario(keys: JwksServer, clock: Clock) -> None:
        async with httpx.AsyncClient() as http:
            provider = external.ExternalProvider(keyed_settings(keys), http, clock)
            await verified(provider, rsa_key.sign(claims()))
            assert keys.fetches == 1
            rotated = SigningKey.ec("ec-2")
            keys.publish(rotated)
            await refused_by(provider, rotated.sign(claims()))
            assert keys.fetches == 1, "within the interval: no refetch"
            clock.now += external.REFETCH_INTERVAL_SECONDS
            await verified(provider, rotated.sign(claims()))
            assert keys.fetches == 2
            await refused_by(provider, SigningKey.ec("ghost-1").sign(claims()))
            await refused_by(provider, SigningKey.ec("ghost-2").sign(claims()))
            assert keys.fetches == 2

    with JwksServer(rsa_key) as keys:
        asyncio.run(scenario(keys, Clock()))


def test_a_failing_refetch_keeps_the_known_keys(rsa_key: SigningKey) -> None:
    async def scenario(keys: JwksServer, clock: Clock) -> None:
        async with httpx.AsyncClient() as http:
            provider = external.ExternalProvider(keyed_settings(keys), http, clock)
            await verified(provider, rsa_key.sign(claims()))
            keys.failing = True
            clock.now += external.REFETCH_INTERVAL_SECONDS
            await refused_by(provider, SigningKey.ec("ghost").sign(claims()))
            assert keys.fetches == 2
            await verified(provider, rsa_key.sign(claims()))

    with JwksServer(rsa_key) as keys:
        asyncio.run(scenario(keys, Clock()))


# --- shared-secret mode ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secret_api(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    server = external_server(
        database,
        tmp_path_factory,
        AUTH_JWT_SECRET=SECRET,
        AUTH_ISSUER=SECRET_ISSUER,
        AUTH_AUDIENCE=SECRET_AUDIENCE,
    )
    with server, server.client() as http:
        yield http


def secret_claims(**changes: Any) -> dict[str, Any]:
    return claims(**{"sub": str(uuid.uuid4()), "iss": SECRET_ISSUER, "aud": SECRET_AUDIENCE, **changes})


def test_shared_secret_hs256_token_works(secret_api: httpx.Client) -> None:
    token = jwt.encode(secret_claims(role="authenticated"), SECRET, algorithm="HS256")
    profile = profile_of(secret_api, token)
    assert profile["role"] == "candidate"
    assert profile_of(secret_api, token)["id"] == profile["id"]


def test_shared_secret_wrong_secret_is_invalid_token(secret_api: httpx.Client) -> None:
    token = jwt.encode(secret_claims(), SECRET + "x", algorithm="HS256")
    assert_refused(me(secret_api, token))


def test_shared_secret_refuses_rs256(secret_api: httpx.Client, rsa_key: SigningKey) -> None:
    assert_refused(me(secret_api, rsa_key.sign(secret_claims())))


def test_shared_secret_refuses_other_hmac_algorithms(secret_api: httpx.Client) -> None:
    assert_refused(me(secret_api, jwt.encode(secret_claims(), SECRET, algorithm="HS512")))


def test_shared_secret_refuses_alg_none(secret_api: httpx.Client) -> None:
    assert_refused(me(secret_api, unsigned({"alg": "none", "typ": "JWT"}, secret_claims())))


def test_shared_secret_checks_issuer_and_audience(secret_api: httpx.Client) -> None:
    assert_refused(me(secret_api, jwt.encode(secret_claims(iss=ISSUER), SECRET, algorithm="HS256")))
    assert_refused(me(secret_api, jwt.encode(secret_claims(aud="anon"), SECRET, algorithm="HS256")))


def test_shared_secret_expired_is_token_expired(secret_api: httpx.Client) -> None:
    now = int(time.time())
    token = jwt.encode(secret_claims(iat=now - 900, exp=now - 120), SECRET, algorithm="HS256")
    assert_refused(me(secret_api, token), "token_expired")


# --- the audience is required in production (docs/security.md) ------------------------------------------------


@pytest.mark.parametrize("provider", [{"AUTH_JWKS_URL": "https://id.example.test/jwks"}, {"AUTH_JWT_SECRET": SECRET}])
def test_production_refuses_to_start_without_an_audience(provider: dict[str, str]) -> None:
    """Tokens minted for another API of the same tenant would pass (RFC 8725 section 3.9)."""
    env = {
        "SERVICE_ENV": "production", "SERVICE_SECRET_KEY": "k" * 40, "AUTH_ISSUER": ISSUER,
        "SMTP_URL": "smtp://mail.example.test", "PUBLIC_URL": "https://hire.example", **provider,
    }  # fmt: skip
    with pytest.raises(SettingsError, match="AUTH_AUDIENCE"):
        Settings.from_env(env)
    Settings.from_env({**env, "AUTH_AUDIENCE": AUDIENCE})


def test_without_an_audience_other_environments_warn_at_start(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.from_env({"SERVICE_SECRET_KEY": "k" * 40, "AUTH_ISSUER": ISSUER, "AUTH_JWT_SECRET": SECRET})
    with caplog.at_level(logging.WARNING, logger="rpc.auth.external"):
        external.ExternalProvider(settings, httpx.AsyncClient())
    assert "AUTH_AUDIENCE is not set" in caplog.text
