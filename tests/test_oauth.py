"""The OAuth 2.0 authorization server (docs/oauth.md, docs/decisions.md; RFC 6749, 7636, 7009, 8414, 9068, 9700), driven
like a third-party application and a person with a browser would: authorize, sign in, consent, exchange,
refresh, revoke — every redirect looked at, every form read from the page."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from procedures.vocabulary import VOCABULARY
from rpc.auth.oauth_clients import InvalidClientSpec, check_redirect_uri, redirect_matches
from rpc.auth.oauth_grants import authorized_apps, revoke_access
from rpc.ops import admin as ops
from tests.browser import Browser, form, location, query, text
from tests.support import TEST_SECRET_KEY, Admin, LiveServer, User, bearer, me, refused, settings_for

REDIRECT = "https://client.example/callback"
EVERY_SCOPE = (
    "read:jobs",
    "write:jobs",
    "read:applications",
    "write:applications",
    "read:profile",
    "write:profile",
    "read:billing",
    "write:billing",
    "read:audit",
    "read:events",
)
TOKEN_KEYS = {"access_token", "token_type", "expires_in", "refresh_token", "scope"}
ROLE_SCOPES = {"candidate": VOCABULARY.oauth_role_scopes["candidate"], "employer": frozenset(EVERY_SCOPE)}


@pytest.fixture(scope="module")
def settings(database: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The people of this module sign in on the web once per browser; the throttle has its own test."""
    return settings_for(database, DATA_DIR=str(tmp_path_factory.mktemp("data")), SIGNIN_LIMIT_PER_EMAIL="100000/minute")


# --- applications, people, browsers -------------------------------------------------------------------------


@dataclass(frozen=True)
class App:
    client_id: str
    secret: str | None
    redirect_uri: str = REDIRECT

    def auth(self) -> dict[str, str]:
        """Client authentication in the body: client_id, and the secret if it has one."""
        return {"client_id": self.client_id, **({"client_secret": self.secret} if self.secret else {})}

    def basic(self) -> httpx.BasicAuth:
        assert self.secret is not None
        return httpx.BasicAuth(self.client_id, self.secret)


def register(
    admin: Admin, owner: User, *, public: bool, redirect: str = REDIRECT, scopes: list[str] | None = None
) -> App:
    created = admin.run(
        ops.create_oauth_client,
        admin.settings,
        admin.vocabulary,
        email=owner.email,
        name=f"Test app {secrets.token_hex(3)}",
        redirect_uris=[redirect],
        public=public,
        scopes=scopes,
    )
    assert set(created) == {"client_id", "client_secret"}
    assert (created["client_secret"] is None) == public
    return App(created["client_id"], created["client_secret"], redirect)


@pytest.fixture(scope="module")
def developer(admin: Admin) -> User:
    """The owner of the third-party applications (an employer of another account)."""
    return admin.user("employer")


@pytest.fixture(scope="module")
def public_app(admin: Admin, developer: User) -> App:
    return register(admin, developer, public=True)


@pytest.fixture(scope="module")
def confidential_app(admin: Admin, developer: User) -> App:
    return register(admin, developer, public=False)


def signed_in(live: LiveServer, user: User) -> Browser:
    browser = Browser(live.url)
    assert location(browser.sign_in(user)) == "/web"
    return browser


@pytest.fixture(scope="module")
def candidate_browser(live: LiveServer, candidate: User) -> Iterator[Browser]:
    browser = signed_in(live, candidate)
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def employer_browser(live: LiveServer, employer: User) -> Iterator[Browser]:
    browser = signed_in(live, employer)
    yield browser
    browser.close()


@pytest.fixture
def anonymous(live: LiveServer) -> Iterator[Browser]:
    browser = Browser(live.url)
    yield browser
    browser.close()


# --- the flow, step by step ---------------------------------------------------------------------------------


def pkce() -> tuple[str, str]:
    """A code verifier and its S256 challenge (RFC 7636 sections 4.1 and 4.2)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorize_params(app: App, scope: str, challenge: str | None, **changes: str | None) -> dict[str, str]:
    params: dict[str, str | None] = {
        "client_id": app.client_id,
        "redirect_uri": app.redirect_uri,
        "response_type": "code",
        "scope": scope,
        "state": "st-" + secrets.token_hex(4),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **changes,
    }
    return {name: value for name, value in params.items() if value is not None}


def consent_page(browser: Browser, params: dict[str, str]) -> httpx.Response:
    page = browser.get("/oauth/authorize", params=params)
    assert page.status_code == 200, (page.status_code, page.headers.get("Location"), page.text[:1000])
    return page


def decide(browser: Browser, page: httpx.Response, decision: str = "approve") -> dict[str, str]:
    """Press a consent button; the parameters of the redirect back to the client."""
    answer = browser.submit(page, "/oauth/authorize", button=("decision", decision))
    target = location(answer)
    assert target.startswith(REDIRECT + "?") or "?" in target, target
    return query(target)


def authorize(browser: Browser, app: App, scope: str) -> tuple[str, str]:
    """Consent to `app` asking for `scope`: its code and the verifier to redeem it."""
    verifier, challenge = pkce()
    params = authorize_params(app, scope, challenge)
    back = decide(browser, consent_page(browser, params))
    assert back["state"] == params["state"]
    return back["code"], verifier


def token(client: httpx.Client, data: dict[str, str], **kwargs: Any) -> httpx.Response:
    """POST /oauth/token, form-encoded (RFC 6749 section 4.1.3)."""
    response = client.post("/oauth/token", data=data, **kwargs)
    assert response.headers["Cache-Control"] == "no-store", "every token response, success or error"
    return response


def exchange(client: httpx.Client, app: App, code: str, verifier: str, **kwargs: Any) -> httpx.Response:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": app.redirect_uri,
        "code_verifier": verifier,
    }
    return token(client, {**data, **app.auth()}, **kwargs)


def refresh(client: httpx.Client, app: App, refresh_token: str, **extra: str) -> httpx.Response:
    return token(client, {"grant_type": "refresh_token", "refresh_token": refresh_token, **app.auth(), **extra})


def tokens(client: httpx.Client, browser: Browser, app: App, scope: str) -> dict[str, Any]:
    code, verifier = authorize(browser, app, scope)
    response = exchange(client, app, code, verifier)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def oauth_error(response: httpx.Response, error: str, status: int = 400) -> dict[str, Any]:
    """An RFC 6749 section 5.2 error body."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] == error and isinstance(body["error_description"], str), body
    assert set(body) == {"error", "error_description"}
    return body


def stored(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


# --- the whole flow -----------------------------------------------------------------------------------------


def test_public_client_with_pkce(
    client: httpx.Client, anonymous: Browser, public_app: App, candidate: User, settings: Any
) -> None:
    """Sign-in on the way, consent, code, exchange without a secret, a working call, and a scope not granted."""
    verifier, challenge = pkce()
    params = authorize_params(public_app, "read:profile read:jobs write:jobs", challenge)

    to_signin = location(anonymous.get("/oauth/authorize", params=params))
    assert to_signin.startswith("/web/signin?next=")
    back_to_authorize = urllib.parse.parse_qs(urllib.parse.urlsplit(to_signin).query)["next"][0]
    assert back_to_authorize.startswith("/oauth/authorize?")
    signin_page = anonymous.get(to_signin)
    answer = anonymous.submit(
        signin_page, "/web/signin", fill={"email": candidate.email, "password": candidate.password}
    )
    assert location(answer) == back_to_authorize

    page = anonymous.follow(answer)
    assert page.status_code == 200
    shown = text(page)
    assert "Test app" in shown
    assert "read:profile" in shown and "See your profile: name, e-mail, role and account." in shown
    assert "read:jobs" in shown and "See published job postings." in shown, "a candidate's read:jobs"
    assert "drafts" not in shown, "a candidate has none: an employer's sentence would mislead"
    assert "which your role cannot grant" in shown, "write:jobs is not a candidate's to give"
    consent = form(page, "/oauth/authorize")
    assert consent.value("csrf_token")
    assert {("decision", "approve"), ("decision", "deny")} <= set(consent.buttons)
    assert page.headers["X-Frame-Options"] == "DENY"

    back = decide(anonymous, page)
    assert set(back) == {"code", "state", "iss"}
    assert back["state"] == params["state"] and back["iss"] == settings.public_url

    response = exchange(client, public_app, back["code"], verifier)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == TOKEN_KEYS
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["scope"] == "read:jobs read:profile"

    profile = me(client, body["access_token"])
    assert profile.status_code == 200, profile.text
    assert profile.json()["result"]["id"] == candidate.user_id
    assert client.get("/v1/jobs.list", headers=bearer(body["access_token"])).status_code == 200
    error = refused(
        client.get("/v1/applications.list", headers=bearer(body["access_token"])), 403, "insufficient_scope"
    )
    assert error["details"] == {"required": "read:applications", "granted": ["read:jobs", "read:profile"]}


def test_confidential_client_with_a_secret(
    client: httpx.Client, employer_browser: Browser, confidential_app: App, employer: User
) -> None:
    """The exchange as a JSON body with client_secret; the refresh with HTTP Basic."""
    code, verifier = authorize(employer_browser, confidential_app, "read:profile write:profile")
    response = client.post(
        "/oauth/token",
        json={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "client_id": confidential_app.client_id,
            "client_secret": confidential_app.secret,
        },
    )
    assert response.status_code == 200, response.text
    assert response.headers["Cache-Control"] == "no-store"
    body = response.json()
    assert body["scope"] == "read:profile write:profile"
    assert me(client, body["access_token"]).json()["result"]["id"] == employer.user_id
    update = client.post("/v1/profile.update", json={"headline": "Hiring"}, headers=bearer(body["access_token"]))
    assert update.status_code == 200, update.text
    refused(client.get("/v1/jobs.list", headers=bearer(body["access_token"])), 403, "insufficient_scope")

    data = {"grant_type": "refresh_token", "refresh_token": body["refresh_token"]}
    rotated = token(client, data, auth=confidential_app.basic())
    assert rotated.status_code == 200, rotated.text
    assert me(client, rotated.json()["access_token"]).status_code == 200


def test_access_token_is_an_rfc_9068_jwt(
    client: httpx.Client, candidate_browser: Browser, public_app: App, candidate: User, settings: Any
) -> None:
    body = tokens(client, candidate_browser, public_app, "read:profile")
    header = jwt.get_unverified_header(body["access_token"])
    assert header["typ"] == "at+jwt" and header["alg"] == "ES256" and header["kid"]
    jwks = client.get("/.well-known/jwks.json").json()
    key = next(k for k in jwks["keys"] if k["kid"] == header["kid"])
    claims = jwt.decode(
        body["access_token"],
        jwt.PyJWK.from_dict(key).key,
        algorithms=["ES256"],
        audience=f"{settings.public_url}/v1",
        issuer=settings.public_url,
    )
    assert claims["sub"] == candidate.user_id
    assert claims["client_id"] == public_app.client_id
    assert claims["scope"] == "read:profile"
    assert claims["exp"] - claims["iat"] == 3600
    assert claims["jti"] and claims["gid"]


def test_oauth_access_token_is_not_a_refresh_token_or_session(
    client: httpx.Client, candidate_browser: Browser, public_app: App
) -> None:
    body = tokens(client, candidate_browser, public_app, "read:profile")
    oauth_error(refresh(client, public_app, body["access_token"]), "invalid_grant")
    assert client.post("/auth/refresh", json={"refresh_token": body["refresh_token"]}).status_code == 401


# --- the authorization endpoint's refusals --------------------------------------------------------------------


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https://evil.example/callback",
        REDIRECT + "/",
        REDIRECT + "x",
        REDIRECT + "?next=1",
        REDIRECT.upper(),
        "https://client.example/",
        "https://client.example.evil.example/callback",
        "",
    ],
)
def test_unregistered_redirect_uri_is_an_error_page(
    candidate_browser: Browser, public_app: App, redirect_uri: str
) -> None:
    """Exact matching only; and the error is shown, never sent anywhere."""
    params = authorize_params(public_app, "read:profile", pkce()[1], redirect_uri=redirect_uri)
    page = candidate_browser.get("/oauth/authorize", params=params)
    assert page.status_code == 400
    assert "Location" not in page.headers
    assert page.headers["content-type"].startswith("text/html")
    assert "Invalid redirect URI" in text(page)


@pytest.mark.parametrize("client_id", ["app_unknown", "", None])
def test_unknown_client_is_an_error_page(anonymous: Browser, public_app: App, client_id: str | None) -> None:
    params = authorize_params(public_app, "read:profile", pkce()[1], client_id=client_id)
    page = anonymous.get("/oauth/authorize", params=params)
    assert page.status_code == 400 and "Location" not in page.headers
    assert "Unknown application" in text(page)


def test_missing_redirect_uri_is_an_error_page(anonymous: Browser, public_app: App) -> None:
    params = authorize_params(public_app, "read:profile", pkce()[1])
    params.pop("redirect_uri")
    page = anonymous.get("/oauth/authorize", params=params)
    assert page.status_code == 400 and "Location" not in page.headers


def redirected_error(browser: Browser, params: dict[str, str]) -> dict[str, str]:
    back = query(location(browser.get("/oauth/authorize", params=params)))
    assert "code" not in back
    return back


@pytest.mark.parametrize(
    ("challenge", "method"),
    [(None, None), ("present", None), ("present", "plain"), ("present", "s256"), ("tooshort", "S256")],
    ids=["no-challenge", "method-missing-means-plain", "plain", "lower-case-s256", "malformed-challenge"],
)
def test_pkce_is_s256_only_and_required(
    candidate_browser: Browser, public_app: App, confidential_app: App, challenge: str | None, method: str | None
) -> None:
    """Refused before any consent, for public and confidential clients alike, with the state kept."""
    for app in (public_app, confidential_app):
        value = pkce()[1] if challenge == "present" else challenge
        params = authorize_params(app, "read:profile", value, code_challenge_method=method)
        back = redirected_error(candidate_browser, params)
        assert back["error"] == "invalid_request", back
        assert back["state"] == params["state"]
        assert "error_description" in back


def test_plain_challenge_cannot_be_smuggled_as_s256(
    client: httpx.Client, candidate_browser: Browser, public_app: App
) -> None:
    """A verifier sent as its own challenge (what `plain` would mean) does not redeem an S256 code."""
    verifier = secrets.token_urlsafe(32)[:43]
    params = authorize_params(public_app, "read:profile", verifier)
    code = decide(candidate_browser, consent_page(candidate_browser, params))["code"]
    oauth_error(exchange(client, public_app, code, verifier), "invalid_grant")


def test_only_response_type_code(candidate_browser: Browser, public_app: App) -> None:
    for response_type, error in [("token", "unsupported_response_type"), (None, "invalid_request")]:
        params = authorize_params(public_app, "read:profile", pkce()[1], response_type=response_type)
        back = redirected_error(candidate_browser, params)
        assert back["error"] == error and back["state"] == params["state"]


@pytest.mark.parametrize("scope", ["read:everything", "read:profile admin", "", "read:profile  read:jobs"])
def test_unknown_scopes_are_invalid_scope(candidate_browser: Browser, public_app: App, scope: str) -> None:
    back = redirected_error(candidate_browser, authorize_params(public_app, scope, pkce()[1]))
    assert back["error"] == "invalid_scope"


def test_scopes_the_client_may_not_ask_for_are_invalid_scope(
    admin: Admin, developer: User, candidate_browser: Browser
) -> None:
    limited = register(admin, developer, public=True, scopes=["read:jobs"])
    back = redirected_error(candidate_browser, authorize_params(limited, "read:jobs read:profile", pkce()[1]))
    assert back["error"] == "invalid_scope"
    consent_page(candidate_browser, authorize_params(limited, "read:jobs", pkce()[1]))


def test_nothing_the_role_may_grant_is_invalid_scope(candidate_browser: Browser, public_app: App) -> None:
    back = redirected_error(candidate_browser, authorize_params(public_app, "write:jobs write:billing", pkce()[1]))
    assert back["error"] == "invalid_scope"


def test_repeated_parameters_are_invalid_request(candidate_browser: Browser, public_app: App) -> None:
    params = [*authorize_params(public_app, "read:profile", pkce()[1]).items(), ("scope", "read:jobs")]
    back = query(location(candidate_browser.get("/oauth/authorize?" + urllib.parse.urlencode(params))))
    assert back["error"] == "invalid_request"


@pytest.mark.parametrize(
    ("scope", "changes"),
    [
        ("read:profile", {"response_type": "token"}),
        ("read:profile", {"response_type": None}),
        ("read:everything", {}),
        ("read:profile", {"code_challenge_method": "plain"}),
        ("read:profile", {"code_challenge": None}),
    ],
)
def test_before_sign_in_no_error_is_sent_to_the_client(
    anonymous: Browser, public_app: App, scope: str, changes: dict[str, str | None]
) -> None:
    """No open redirector (RFC 9700 section 4.11.2): a link to a registered client with a broken request must not
    bounce a visitor who has not signed in on to that client's address."""
    params = authorize_params(public_app, scope, pkce()[1], **changes)
    page = anonymous.get("/oauth/authorize", params=params)
    assert page.status_code == 400 and "Location" not in page.headers
    assert page.headers["content-type"].startswith("text/html")


def test_state_round_trips_exactly(candidate_browser: Browser, public_app: App) -> None:
    odd = "a b&c=d/é?#%"
    back = decide(
        candidate_browser,
        consent_page(candidate_browser, authorize_params(public_app, "read:jobs", pkce()[1], state=odd)),
    )
    assert back["state"] == odd


def test_registered_query_is_kept(
    admin: Admin, developer: User, client: httpx.Client, candidate_browser: Browser
) -> None:
    app = register(admin, developer, public=True, redirect="https://client.example/cb?tenant=7")
    code, verifier = authorize(candidate_browser, app, "read:profile")
    assert exchange(client, app, code, verifier).status_code == 200


def test_loopback_redirect_accepts_any_port(
    admin: Admin, developer: User, client: httpx.Client, candidate_browser: Browser
) -> None:
    """RFC 8252 section 7.3: a native app's loopback redirect URI may use whatever port it got."""
    registered = register(admin, developer, public=True, redirect="http://127.0.0.1/callback")
    app = App(registered.client_id, None, "http://127.0.0.1:53124/callback")
    verifier, challenge = pkce()
    answer = candidate_browser.submit(
        consent_page(candidate_browser, authorize_params(app, "read:profile", challenge)),
        "/oauth/authorize",
        button=("decision", "approve"),
    )
    assert location(answer).startswith("http://127.0.0.1:53124/callback?code=")
    code = query(location(answer))["code"]
    assert exchange(client, app, code, verifier).status_code == 200
    other_path = App(registered.client_id, None, "http://127.0.0.1:53124/other")
    page = candidate_browser.get("/oauth/authorize", params=authorize_params(other_path, "read:profile", challenge))
    assert page.status_code == 400 and "Location" not in page.headers


def test_consent_without_csrf_token_is_refused(candidate_browser: Browser, public_app: App, admin: Admin) -> None:
    page = consent_page(candidate_browser, authorize_params(public_app, "read:profile", pkce()[1]))
    before = admin.sql("SELECT count(*) AS n FROM oauth_codes")[0]["n"]
    missing = candidate_browser.submit(page, "/oauth/authorize", button=("decision", "approve"), drop=["csrf_token"])
    forged = candidate_browser.submit(
        page, "/oauth/authorize", button=("decision", "approve"), fill={"csrf_token": "x"}
    )
    for answer in (missing, forged):
        assert answer.status_code == 403
        assert "Location" not in answer.headers
    assert admin.sql("SELECT count(*) AS n FROM oauth_codes")[0]["n"] == before, "no code issued"


def test_consent_form_cannot_be_replayed_by_another_person(
    live: LiveServer, candidate_browser: Browser, employer_browser: Browser, public_app: App
) -> None:
    """The CSRF token is the session's own: the candidate's form posted from the employer's browser fails."""
    page = consent_page(candidate_browser, authorize_params(public_app, "read:profile", pkce()[1]))
    forged = form(page, "/oauth/authorize").value("csrf_token")
    other = consent_page(employer_browser, authorize_params(public_app, "read:profile", pkce()[1]))
    answer = employer_browser.submit(
        other, "/oauth/authorize", fill={"csrf_token": forged}, button=("decision", "approve")
    )
    assert answer.status_code == 403


def test_deny_sends_access_denied(candidate_browser: Browser, public_app: App, admin: Admin) -> None:
    params = authorize_params(public_app, "read:profile", pkce()[1])
    back = decide(candidate_browser, consent_page(candidate_browser, params), "deny")
    assert back["error"] == "access_denied" and back["state"] == params["state"]
    assert "code" not in back


def test_tampered_consent_form_is_validated_again(
    client: httpx.Client, candidate_browser: Browser, public_app: App
) -> None:
    """The consent form's hidden fields are checked again when it comes back, with the role's limits."""
    verifier, challenge = pkce()
    page = consent_page(candidate_browser, authorize_params(public_app, "read:profile", challenge))
    tampered = candidate_browser.submit(
        page, "/oauth/authorize", fill={"redirect_uri": "https://evil.example/callback"}, button=("decision", "approve")
    )
    assert tampered.status_code == 400 and "Location" not in tampered.headers
    widened = candidate_browser.submit(
        page, "/oauth/authorize", fill={"scope": "read:profile write:jobs"}, button=("decision", "approve")
    )
    body = exchange(client, public_app, query(location(widened))["code"], verifier).json()
    assert body["scope"] == "read:profile"


# --- the token endpoint: codes --------------------------------------------------------------------------------


def test_wrong_verifier_is_invalid_grant_and_burns_the_code(
    client: httpx.Client, candidate_browser: Browser, public_app: App
) -> None:
    code, verifier = authorize(candidate_browser, public_app, "read:profile")
    oauth_error(exchange(client, public_app, code, pkce()[0]), "invalid_grant")
    oauth_error(exchange(client, public_app, code, verifier), "invalid_grant")


def test_missing_verifier_is_invalid_grant(
    client: httpx.Client, employer_browser: Browser, confidential_app: App
) -> None:
    """A secret does not replace PKCE: the confidential client must send its verifier too."""
    code, _ = authorize(employer_browser, confidential_app, "read:profile")
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, **confidential_app.auth()}
    oauth_error(token(client, data), "invalid_grant")


def test_expired_code_is_invalid_grant(
    client: httpx.Client, candidate_browser: Browser, public_app: App, admin: Admin
) -> None:
    code, verifier = authorize(candidate_browser, public_app, "read:profile")
    expired = admin.sql(
        "UPDATE oauth_codes SET expires_at = now() - interval '1 second' WHERE code_hash = %(h)s RETURNING id",
        {"h": stored(code)},
    )
    assert len(expired) == 1
    oauth_error(exchange(client, public_app, code, verifier), "invalid_grant")


def test_code_lives_ten_minutes_and_is_stored_hashed(candidate_browser: Browser, public_app: App, admin: Admin) -> None:
    code, _ = authorize(candidate_browser, public_app, "read:profile")
    rows = admin.sql(
        "SELECT extract(epoch FROM expires_at - created_at) AS life, redirect_uri, scopes FROM oauth_codes"
        " WHERE code_hash = %(h)s",
        {"h": stored(code)},
    )
    assert (
        rows
        and rows[0]["life"] == 600
        and rows[0]["redirect_uri"] == REDIRECT
        and rows[0]["scopes"] == ["read:profile"]
    )


def test_reused_code_is_refused_and_revokes_what_it_issued(
    client: httpx.Client, candidate_browser: Browser, public_app: App
) -> None:
    code, verifier = authorize(candidate_browser, public_app, "read:profile")
    first = exchange(client, public_app, code, verifier).json()
    assert me(client, first["access_token"]).status_code == 200

    oauth_error(exchange(client, public_app, code, verifier), "invalid_grant")

    response = me(client, first["access_token"])  # the very next request
    refused(response, 401, "invalid_token")
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
    oauth_error(refresh(client, public_app, first["refresh_token"]), "invalid_grant")


def test_code_of_another_client_is_invalid_grant(
    client: httpx.Client, candidate_browser: Browser, public_app: App, confidential_app: App
) -> None:
    code, verifier = authorize(candidate_browser, public_app, "read:profile")
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
    oauth_error(token(client, {**data, **confidential_app.auth()}), "invalid_grant")
    oauth_error(exchange(client, public_app, code, verifier), "invalid_grant")  # a stolen code is burnt


def test_redirect_uri_must_match_the_authorization_request(
    admin: Admin, developer: User, client: httpx.Client, candidate_browser: Browser
) -> None:
    app = register(admin, developer, public=True)
    code, verifier = authorize(candidate_browser, app, "read:profile")
    data = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier, "client_id": app.client_id}
    oauth_error(token(client, {**data, "redirect_uri": REDIRECT + "/other"}), "invalid_grant")
    oauth_error(token(client, data), "invalid_request")


def test_unknown_code_is_invalid_grant(client: httpx.Client, public_app: App) -> None:
    oauth_error(exchange(client, public_app, "no-such-code", pkce()[0]), "invalid_grant")


# --- the token endpoint: client authentication and request errors ----------------------------------------------


@pytest.mark.parametrize("how", ["wrong-secret", "no-secret", "unknown-client", "basic-wrong", "public-with-secret"])
def test_failed_client_authentication_is_invalid_client(
    client: httpx.Client, confidential_app: App, public_app: App, how: str
) -> None:
    data = {"grant_type": "refresh_token", "refresh_token": "whatever"}
    kwargs: dict[str, Any] = {}
    if how == "wrong-secret":
        data.update(client_id=confidential_app.client_id, client_secret="hsec_wrong")
    elif how == "no-secret":
        data.update(client_id=confidential_app.client_id)
    elif how == "unknown-client":
        data.update(client_id="app_nobody", client_secret="x")
    elif how == "basic-wrong":
        kwargs["auth"] = httpx.BasicAuth(confidential_app.client_id, "hsec_wrong")
    else:
        data.update(client_id=public_app.client_id, client_secret="invented")
    response = token(client, data, **kwargs)
    oauth_error(response, "invalid_client", 401)
    assert response.headers["WWW-Authenticate"].startswith("Basic ")


def test_basic_credentials_are_form_decoded(
    client: httpx.Client, employer_browser: Browser, confidential_app: App
) -> None:
    """RFC 6749 section 2.3.1: id and secret are form-encoded before Basic; ours only use safe characters, but a
    client that encodes them anyway is understood."""
    assert confidential_app.secret is not None
    code, verifier = authorize(employer_browser, confidential_app, "read:profile")
    encoded = httpx.BasicAuth(
        urllib.parse.quote_plus(confidential_app.client_id), urllib.parse.quote_plus(confidential_app.secret)
    )
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
    assert token(client, data, auth=encoded).status_code == 200


def test_two_client_authentication_methods_are_invalid_request(client: httpx.Client, confidential_app: App) -> None:
    assert confidential_app.secret is not None
    data = {"grant_type": "refresh_token", "refresh_token": "x", "client_secret": confidential_app.secret}
    oauth_error(token(client, data, auth=confidential_app.basic()), "invalid_request")


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({}, "invalid_request"),
        ({"grant_type": "password", "username": "a", "password": "b"}, "unsupported_grant_type"),
        ({"grant_type": "client_credentials"}, "unsupported_grant_type"),
        ({"grant_type": "authorization_code"}, "invalid_request"),
        ({"grant_type": "refresh_token"}, "invalid_request"),
    ],
)
def test_request_errors(client: httpx.Client, public_app: App, data: dict[str, str], error: str) -> None:
    oauth_error(token(client, {**data, "client_id": public_app.client_id}), error)


def test_repeated_token_parameter_is_invalid_request(client: httpx.Client, public_app: App) -> None:
    body = f"grant_type=refresh_token&refresh_token=a&refresh_token=b&client_id={public_app.client_id}"
    response = client.post("/oauth/token", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.headers["Cache-Control"] == "no-store"
    oauth_error(response, "invalid_request")


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"grant_type=refresh_token", "text/plain"),
        (b"[1, 2]", "application/json"),
        (b"{", "application/json"),
        (b'{"grant_type": 1}', "application/json"),
        (b'{"grant_type": "\xce"}', "application/json"),
        (b"grant_type=\xce", "application/x-www-form-urlencoded"),
    ],
)
def test_unreadable_bodies_are_invalid_request(client: httpx.Client, content: bytes, content_type: str) -> None:
    response = client.post("/oauth/token", content=content, headers={"Content-Type": content_type})
    assert response.headers["Cache-Control"] == "no-store"
    oauth_error(response, "invalid_request")


@pytest.mark.parametrize("path", ["/oauth/token", "/oauth/revoke"])
def test_token_endpoints_are_post_only(client: httpx.Client, path: str) -> None:
    response = client.get(path)
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Allow"] == "POST"
    oauth_error(response, "invalid_request", 405)


# --- refresh tokens -----------------------------------------------------------------------------------------


def test_refresh_rotates(client: httpx.Client, candidate_browser: Browser, public_app: App) -> None:
    first = tokens(client, candidate_browser, public_app, "read:profile read:jobs")
    second = refresh(client, public_app, first["refresh_token"]).json()
    assert set(second) == TOKEN_KEYS and second["scope"] == "read:jobs read:profile"
    assert second["refresh_token"] != first["refresh_token"]
    assert me(client, second["access_token"]).status_code == 200
    oauth_error(refresh(client, public_app, first["refresh_token"]), "invalid_grant")


def test_refresh_reuse_revokes_the_family(client: httpx.Client, candidate_browser: Browser, public_app: App) -> None:
    first = tokens(client, candidate_browser, public_app, "read:profile")
    second = refresh(client, public_app, first["refresh_token"]).json()
    third = refresh(client, public_app, second["refresh_token"]).json()
    assert me(client, third["access_token"]).status_code == 200

    oauth_error(refresh(client, public_app, first["refresh_token"]), "invalid_grant")  # a thief replays it

    refused(me(client, third["access_token"]), 401, "invalid_token")
    refused(me(client, first["access_token"]), 401, "invalid_token")
    oauth_error(refresh(client, public_app, third["refresh_token"]), "invalid_grant")


def test_refresh_reuse_leaves_other_authorizations_alone(
    client: httpx.Client, candidate_browser: Browser, public_app: App
) -> None:
    stolen = tokens(client, candidate_browser, public_app, "read:profile")
    other = tokens(client, candidate_browser, public_app, "read:profile")
    refresh(client, public_app, stolen["refresh_token"])
    oauth_error(refresh(client, public_app, stolen["refresh_token"]), "invalid_grant")
    assert me(client, other["access_token"]).status_code == 200
    assert refresh(client, public_app, other["refresh_token"]).status_code == 200


def test_refresh_cannot_widen_the_scopes(client: httpx.Client, candidate_browser: Browser, public_app: App) -> None:
    first = tokens(client, candidate_browser, public_app, "read:profile")
    oauth_error(refresh(client, public_app, first["refresh_token"], scope="read:profile read:jobs"), "invalid_scope")
    oauth_error(refresh(client, public_app, first["refresh_token"], scope=""), "invalid_scope")
    again = refresh(client, public_app, first["refresh_token"])
    assert again.status_code == 200, "a refused widening does not use the refresh token up"
    assert again.json()["scope"] == "read:profile"


def test_refresh_may_narrow_the_access_token(client: httpx.Client, candidate_browser: Browser, public_app: App) -> None:
    first = tokens(client, candidate_browser, public_app, "read:profile read:jobs")
    narrow = refresh(client, public_app, first["refresh_token"], scope="read:profile").json()
    assert narrow["scope"] == "read:profile"
    assert me(client, narrow["access_token"]).status_code == 200
    refused(client.get("/v1/jobs.list", headers=bearer(narrow["access_token"])), 403, "insufficient_scope")
    full = refresh(client, public_app, narrow["refresh_token"]).json()
    assert full["scope"] == "read:jobs read:profile", "the refresh token keeps the grant's scopes (RFC 6749 section 6)"


def test_refresh_token_of_another_client_is_invalid_grant(
    client: httpx.Client, candidate_browser: Browser, public_app: App, confidential_app: App
) -> None:
    first = tokens(client, candidate_browser, public_app, "read:profile")
    oauth_error(refresh(client, confidential_app, first["refresh_token"]), "invalid_grant")
    assert refresh(client, public_app, first["refresh_token"]).status_code == 200


def test_expired_refresh_token_is_invalid_grant(
    client: httpx.Client, candidate_browser: Browser, public_app: App, admin: Admin
) -> None:
    first = tokens(client, candidate_browser, public_app, "read:profile")
    admin.sql(
        "UPDATE oauth_refresh_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = %(h)s",
        {"h": stored(first["refresh_token"])},
    )
    oauth_error(refresh(client, public_app, first["refresh_token"]), "invalid_grant")


# --- roles ----------------------------------------------------------------------------------------------------


def test_role_still_decides_what_a_granted_scope_does(
    client: httpx.Client, candidate_browser: Browser, public_app: App
) -> None:
    """write:applications is the candidate's to grant, but the employer's pipeline moves stay forbidden."""
    body = tokens(client, candidate_browser, public_app, "write:applications")
    response = client.post(
        "/v1/applications.update_status",
        json={"id": "00000000-0000-0000-0000-000000000000", "status": "reviewed"},
        headers=bearer(body["access_token"]),
    )
    refused(response, 403, "forbidden")


# --- revocation (RFC 7009) ---------------------------------------------------------------------------------------


def revoke(client: httpx.Client, data: dict[str, str], **kwargs: Any) -> httpx.Response:
    response = client.post("/oauth/revoke", data=data, **kwargs)
    assert response.headers["Cache-Control"] == "no-store"
    return response


def test_revoking_a_refresh_token_revokes_its_grant(
    client: httpx.Client, employer_browser: Browser, confidential_app: App
) -> None:
    body = tokens(client, employer_browser, confidential_app, "read:profile")
    answer = revoke(
        client, {"token": body["refresh_token"], "token_type_hint": "refresh_token"}, auth=confidential_app.basic()
    )
    assert answer.status_code == 200
    refused(me(client, body["access_token"]), 401, "invalid_token")
    oauth_error(refresh(client, confidential_app, body["refresh_token"]), "invalid_grant")


def test_revoking_an_access_token_revokes_its_grant(
    client: httpx.Client, candidate_browser: Browser, public_app: App
) -> None:
    body = tokens(client, candidate_browser, public_app, "read:profile")
    assert revoke(client, {"token": body["access_token"], "client_id": public_app.client_id}).status_code == 200
    refused(me(client, body["access_token"]), 401, "invalid_token")
    oauth_error(refresh(client, public_app, body["refresh_token"]), "invalid_grant")


def test_revoking_unknown_or_foreign_tokens_answers_200_and_changes_nothing(
    client: httpx.Client, candidate_browser: Browser, public_app: App, confidential_app: App
) -> None:
    body = tokens(client, candidate_browser, public_app, "read:profile")
    for value in ("garbage", body["refresh_token"], body["access_token"]):
        assert revoke(client, {"token": value, **confidential_app.auth()}).status_code == 200
    assert me(client, body["access_token"]).status_code == 200, "another client cannot revoke this one's tokens"
    assert refresh(client, public_app, body["refresh_token"]).status_code == 200


def test_revocation_needs_client_authentication(client: httpx.Client, confidential_app: App) -> None:
    response = revoke(client, {"token": "x", "client_id": confidential_app.client_id, "client_secret": "hsec_wrong"})
    oauth_error(response, "invalid_client", 401)
    assert response.headers["WWW-Authenticate"].startswith("Basic ")
    oauth_error(revoke(client, {"token": "x"}), "invalid_client", 401)
    oauth_error(revoke(client, {**confidential_app.auth()}), "invalid_request")


# --- authorized applications -------------------------------------------------------------------------------------


def test_authorized_apps_and_revoke_access(
    client: httpx.Client, live: LiveServer, admin: Admin, developer: User
) -> None:
    person = admin.user("candidate")
    browser = signed_in(live, person)
    try:
        app = register(admin, developer, public=True)
        first = tokens(client, browser, app, "read:profile")
        second = tokens(client, browser, app, "read:jobs")
        listed = admin.run(authorized_apps, person.user_id)
        assert [(a.client_id, a.scopes) for a in listed] == [(app.client_id, ["read:jobs", "read:profile"])]

        page = browser.get("/web/apps")
        assert page.status_code == 200
        name = listed[0].name
        assert name in text(page)
        answer = browser.submit(page, "/web/apps/revoke")
        assert location(answer) == "/web/apps"
        assert name not in text(browser.get("/web/apps"))
        for issued in (first, second):
            refused(me(client, issued["access_token"]), 401, "invalid_token")
            oauth_error(refresh(client, app, issued["refresh_token"]), "invalid_grant")
        assert admin.run(authorized_apps, person.user_id) == []
        assert admin.run(revoke_access, person.user_id, app.client_id) == 0
        approved = ("oauth_grant.approved", "user", person.user_id)
        assert admin.audit_trail(app.client_id) == [
            ("oauth_client.created", "operator", None),  # `register` is bin/admin create-oauth-client
            approved,
            approved,
            ("oauth_grant.revoked", "user", person.user_id),
        ]
    finally:
        browser.close()


def test_revoke_access_needs_the_csrf_token(
    client: httpx.Client, live: LiveServer, admin: Admin, developer: User
) -> None:
    person = admin.user("candidate")
    browser = signed_in(live, person)
    try:
        app = register(admin, developer, public=True)
        issued = tokens(client, browser, app, "read:profile")
        page = browser.get("/web/apps")
        assert browser.submit(page, "/web/apps/revoke", drop=["csrf_token"]).status_code == 403
        assert me(client, issued["access_token"]).status_code == 200
    finally:
        browser.close()


def test_deleting_a_client_stops_its_tokens(
    client: httpx.Client, admin: Admin, developer: User, candidate_browser: Browser
) -> None:
    app = register(admin, developer, public=True)
    issued = tokens(client, candidate_browser, app, "read:profile")
    admin.sql("DELETE FROM oauth_clients WHERE id = %(id)s", {"id": app.client_id})
    refused(me(client, issued["access_token"]), 401, "invalid_token")


# --- metadata (RFC 8414) --------------------------------------------------------------------------------------------


def test_metadata(client: httpx.Client, settings: Any) -> None:
    response = client.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    document = response.json()
    issuer = settings.public_url
    assert document["issuer"] == issuer
    assert document["authorization_endpoint"] == f"{issuer}/oauth/authorize"
    assert document["token_endpoint"] == f"{issuer}/oauth/token"
    assert document["revocation_endpoint"] == f"{issuer}/oauth/revoke"
    assert document["jwks_uri"] == f"{issuer}/.well-known/jwks.json"
    assert document["response_types_supported"] == ["code"]
    assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert set(document["token_endpoint_auth_methods_supported"]) == {
        "client_secret_basic",
        "client_secret_post",
        "none",
    }
    assert document["scopes_supported"] == list(EVERY_SCOPE)
    assert document["authorization_response_iss_parameter_supported"] is True
    assert "Authorization" not in response.request.headers, "public, without credentials"


# --- the operator command ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "redirect",
    [
        "javascript:alert(1)",
        "https://client.example/cb#frag",
        "not a uri",
        "myapp:/cb",
        "https://user@client.example/cb",
    ],
)
def test_create_oauth_client_refuses_bad_redirect_uris(admin: Admin, developer: User, redirect: str) -> None:
    with pytest.raises(ops.AdminError, match="--redirect-uri"):
        register(admin, developer, public=True, redirect=redirect)


@pytest.mark.parametrize(
    ("uri", "production", "accepted"),
    [
        ("https://client.example/cb", True, True),
        ("http://client.example/cb", True, False),
        ("http://client.example/cb", False, True),
        ("http://127.0.0.1/cb", True, True),
        ("http://[::1]:8080/cb", True, True),
        ("http://localhost/cb", True, False),  # RFC 8252 section 8.3: the IP, not a name that may resolve elsewhere
        ("com.example.app:/oauth2redirect", True, True),
        ("myapp:/cb", True, False),
        ("data:text/html,x", False, False),
        ("https://client.example/cb#x", False, False),
        ("https://user:pw@client.example/cb", False, False),
        ("https://client.example:99999/cb", False, False),
        ("/relative/cb", False, False),
        ("https://client.example/c b", False, False),
    ],
)
def test_redirect_uri_registration_rules(uri: str, production: bool, accepted: bool) -> None:
    if accepted:
        assert check_redirect_uri(uri, production=production) == uri
    else:
        with pytest.raises(InvalidClientSpec):
            check_redirect_uri(uri, production=production)


@pytest.mark.parametrize(
    ("registered", "requested", "matches"),
    [
        ("https://client.example/cb", "https://client.example/cb", True),
        ("https://client.example/cb", "https://client.example:443/cb", False),
        ("https://client.example/cb", "https://client.example/cb/", False),
        ("http://127.0.0.1/cb", "http://127.0.0.1:4000/cb", True),
        ("http://127.0.0.1:3000/cb", "http://127.0.0.1:4000/cb", True),
        ("http://[::1]/cb", "http://[::1]:4000/cb", True),
        ("http://127.0.0.1/cb", "http://127.0.0.1:4000/cb?x=1", False),
        ("http://127.0.0.1/cb", "https://127.0.0.1:4000/cb", False),
        ("http://localhost/cb", "http://localhost:4000/cb", False),
    ],
)
def test_redirect_uri_matching(registered: str, requested: str, matches: bool) -> None:
    assert redirect_matches([registered], requested) is matches


def bin_admin(database: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "TEST_DATABASE_URL")}
    env.update(DATABASE_URL=database, SERVICE_SECRET_KEY=TEST_SECRET_KEY)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, os.path.join(root, "bin", "admin"), "create-oauth-client", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_bin_admin_create_oauth_client(database: str, developer: User) -> None:
    common = ["--email", developer.email, "--name", "CLI app", "--redirect-uri", REDIRECT]
    public = bin_admin(database, *common, "--redirect-uri", "com.example.app:/cb", "--public")
    assert public.returncode == 0, public.stderr
    printed = json.loads(public.stdout)
    assert set(printed) == {"client_id", "client_secret"} and printed["client_secret"] is None
    confidential = bin_admin(database, *common, "--scopes", "read:jobs,read:profile")
    assert confidential.returncode == 0, confidential.stderr
    assert json.loads(confidential.stdout)["client_secret"].startswith("hsec_")
    refused_uri = bin_admin(
        database, "--email", developer.email, "--name", "x", "--redirect-uri", "https://a.example/#x"
    )
    assert refused_uri.returncode == 1 and "--redirect-uri" in refused_uri.stderr and not refused_uri.stdout


def test_client_secret_is_stored_hashed(admin: Admin, confidential_app: App, public_app: App) -> None:
    assert confidential_app.secret and confidential_app.secret.startswith("hsec_")
    rows = admin.sql("SELECT id, secret_hash FROM oauth_clients WHERE id IN (%(a)s, %(b)s)",
                     {"a": confidential_app.client_id, "b": public_app.client_id})  # fmt: skip
    hashes = {row["id"]: row["secret_hash"] for row in rows}
    assert bytes(hashes[confidential_app.client_id]) == stored(confidential_app.secret)
    assert hashes[public_app.client_id] is None


# --- throttling --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def throttled(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = settings_for(
        database, DATA_DIR=str(tmp_path_factory.mktemp("throttled")), SIGNIN_LIMIT_PER_ADDRESS="3/minute"
    )
    with LiveServer(settings) as server, server.client() as http:
        yield http


def test_token_endpoint_is_throttled_per_address(throttled: httpx.Client, public_app: App) -> None:
    address = {"X-Forwarded-For": "203.0.113.44"}
    data = {"grant_type": "refresh_token", "refresh_token": "x", "client_id": public_app.client_id}
    for _ in range(3):
        oauth_error(token(throttled, data, headers=address), "invalid_grant")
    limited = token(throttled, data, headers=address)
    oauth_error(limited, "rate_limited", 429)
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    oauth_error(token(throttled, data, headers={"X-Forwarded-For": "203.0.113.45"}), "invalid_grant")


# --- the property -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """A client limited to some scopes, and browsers of a candidate and an employer."""

    apps: list[tuple[App, frozenset[str]]]
    browsers: dict[str, Browser]


@pytest.fixture(scope="module")
def scene(admin: Admin, developer: User, candidate_browser: Browser, employer_browser: Browser) -> Setting:
    limits = [
        None,
        ["read:jobs", "read:profile", "write:jobs"],
        ["read:applications", "write:applications", "read:billing"],
    ]
    apps = []
    for allowed in limits:
        app = register(admin, developer, public=True, scopes=allowed)
        apps.append((app, frozenset(allowed or EVERY_SCOPE)))
    return Setting(apps, {"candidate": candidate_browser, "employer": employer_browser})


@hypothesis_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    requested=st.sets(st.sampled_from(EVERY_SCOPE), min_size=1),
    which=st.integers(min_value=0, max_value=2),
    role=st.sampled_from(["candidate", "employer"]),
)
def test_granted_scopes_never_exceed_requested_client_and_role(
    client: httpx.Client, scene: Setting, requested: set[str], which: int, role: str
) -> None:
    app, allowed = scene.apps[which]
    browser = scene.browsers[role]
    verifier, challenge = pkce()
    scope = " ".join(sorted(requested))
    expected = requested & allowed & ROLE_SCOPES[role]
    page = browser.get("/oauth/authorize", params=authorize_params(app, scope, challenge))
    if not requested <= allowed or not expected:
        event("refused: invalid_scope")
        assert query(location(page))["error"] == "invalid_scope"
        return
    event("granted")
    back = decide(browser, page)
    body = exchange(client, app, back["code"], verifier).json()
    granted = set(body["scope"].split())
    assert granted <= requested & allowed & ROLE_SCOPES[role]
    assert granted == expected
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert set(claims["scope"].split()) == granted
    assert time.time() < claims["exp"]
