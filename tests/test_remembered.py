"""Remembered credentials (rpc/auth/remembered.py): a credential seen before saves its parsing and signature
check, yet every use runs its lookup in the database before anything else, so revocation and every change to
the principal act at once (docs/decisions.md), whatever the call would have answered."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from rpc.auth.authenticate import Authenticator
from rpc.auth.keyring import KeyRing
from rpc.auth.remembered import Credential, RememberedCredentials
from rpc.core.crypto import Sealer
from rpc.core.principal import Principal
from rpc.ops import admin as ops
from tests.support import TEST_SECRET_KEY, Admin, User, assert_refused, bearer, error_code

READS = {"jobs.list": {}, "jobs.get": {"id": "none"}, "profile.me": {}}


def quota_left(response: httpx.Response) -> int:
    return int(response.headers["X-RateLimit-Remaining"])


def remembered_key(client: httpx.Client, admin: Admin, user: User, scopes: str) -> dict[str, str]:
    """A new API key of `user`, used once so that the server remembers it."""
    key = admin.api_key(user, scopes=scopes)
    assert client.get("/v1/jobs.list", headers=bearer(key["key"])).status_code == 200
    return key


def test_a_revoked_key_is_refused_by_every_read_at_once(client: httpx.Client, admin: Admin) -> None:
    user = admin.user("employer")
    key = remembered_key(client, admin, user, "read:jobs,read:profile")
    for name, params in READS.items():  # remembered by now: looked up again, not verified again
        assert client.get(f"/v1/{name}", params=params, headers=bearer(key["key"])).status_code in (200, 404)
    admin.revoke(key["id"])
    for name, params in READS.items():
        assert_refused(client.get(f"/v1/{name}", params=params, headers=bearer(key["key"])), "invalid_api_key")


def test_a_revoked_key_gets_401_not_the_error_its_call_would_have_had(client: httpx.Client, admin: Admin) -> None:
    user = admin.user("employer")
    key = remembered_key(client, admin, user, "read:jobs")
    admin.revoke(key["id"])
    for params in ({"per_page": "0"}, {"mine": "perhaps"}, {"page": "999999"}):
        assert_refused(client.get("/v1/jobs.list", params=params, headers=bearer(key["key"])), "invalid_api_key")
    assert_refused(client.get("/v1/profile.me", headers=bearer(key["key"])), "invalid_api_key")  # was 403


def test_the_call_of_a_revoked_key_is_not_counted(client: httpx.Client, admin: Admin) -> None:
    user = admin.user("employer")
    revoked = remembered_key(client, admin, user, "read:jobs")
    other = admin.api_key(user, scopes="read:jobs")
    before = quota_left(client.get("/v1/jobs.list", headers=bearer(other["key"])))
    admin.revoke(revoked["id"])
    assert_refused(client.get("/v1/jobs.list", headers=bearer(revoked["key"])), "invalid_api_key")
    after = quota_left(client.get("/v1/jobs.list", headers=bearer(other["key"])))
    assert after == before - 1, "the refused call was given back to the account's budget"


def test_a_plan_change_acts_on_the_next_call(client: httpx.Client, admin: Admin) -> None:
    user = admin.user("employer", plan="free")
    key = remembered_key(client, admin, user, "read:jobs")
    assert client.get("/v1/jobs.list", headers=bearer(key["key"])).headers["X-RateLimit-Limit"] == "60"
    admin.set_plan(user, "pro")
    response = client.get("/v1/jobs.list", headers=bearer(key["key"]))
    assert response.headers["X-RateLimit-Limit"] == "300"
    assert quota_left(response) == 299, "counted once, in the new plan's window"


def test_a_role_change_acts_on_the_next_call(client: httpx.Client, admin: Admin) -> None:
    user = admin.user("employer")
    session = bearer(user.token)
    assert client.get("/v1/billing.payments.list", headers=session).status_code == 200
    admin.sql("UPDATE users SET role = 'candidate' WHERE id = %(id)s", {"id": user.user_id})
    response = client.get("/v1/billing.payments.list", headers=session)
    assert response.status_code == 403, response.text
    assert error_code(response) == "forbidden"
    assert client.get("/v1/profile.me", headers=session).json()["result"]["role"] == "candidate"


def test_a_deleted_users_session_is_refused_by_a_list(client: httpx.Client, admin: Admin) -> None:
    user = admin.user("employer")
    assert client.get("/v1/jobs.list", headers=user.auth).status_code == 200
    admin.sql("DELETE FROM users WHERE id = %(id)s", {"id": user.user_id})
    assert_refused(client.get("/v1/jobs.list", headers=user.auth), "invalid_token")


def memory(fresh_until: float) -> Credential:
    principal = Principal(user_id="u", account_id="a", role="employer", plan="free", credential="session")
    return Credential(
        principal=principal, digest=b"d", lookup="SELECT 1", values={}, token_scopes=None, fresh_until=fresh_until
    )


def test_memory_is_bounded_and_forgets_what_is_no_longer_fresh() -> None:
    credentials = RememberedCredentials(size=2)
    credentials.put(b"a", memory(time.time() + 60))
    credentials.put(b"stale", memory(time.time() - 1))
    assert credentials.get(b"a") is not None
    assert credentials.get(b"stale") is None, "an expired token, or a key due a last-used stamp, is looked up again"
    credentials.put(b"c", memory(time.time() + 60))
    credentials.put(b"d", memory(time.time() + 60))
    assert credentials.get(b"a") is None, "bounded: the least recently used is forgotten"
    assert credentials.get(b"c") is not None and credentials.get(b"d") is not None


def test_a_lookup_row_resolves_to_what_the_principal_is_made_of_now() -> None:
    principal = Principal(user_id="u", account_id="a", role="employer", plan="free", credential="oauth")
    credential = Credential(
        principal=principal,
        digest=b"d",
        lookup="SELECT 1",
        values={},
        token_scopes=frozenset({"read:jobs", "write:jobs"}),
        fresh_until=0,
    )
    row = {"user_id": "u", "account_id": "a", "role": "candidate", "plan": "pro", "scopes": ["read:jobs"]}
    now = credential.resolve(row)
    assert (now.role, now.plan) == ("candidate", "pro")
    assert now.scopes == frozenset({"read:jobs"}), "an OAuth token holds what both it and its grant hold"


def test_a_remembered_lookup_carries_the_procedures_probes(admin: Admin, settings: Any) -> None:
    """A cached read stays one statement: its probes (scalar queries, a version say) ride in the lookup."""
    user = admin.user("employer")
    key = bearer(admin.api_key(user, scopes="read:jobs")["key"])["Authorization"]
    probes = {"answer": "SELECT 41 + 1", "published": "SELECT count(*) FROM jobs WHERE false"}

    async def twice() -> tuple[dict[str, Any], dict[str, Any]]:
        async with await ops.connect(admin.database_url) as conn:
            keyring = await KeyRing.load(conn, Sealer(TEST_SECRET_KEY))
            authenticator = Authenticator(settings, keyring, None)
            first = await authenticator.authenticate(conn, key, probes)
            second = await authenticator.authenticate(conn, key, probes)
            return first[1], second[1]

    fresh, remembered = asyncio.run(twice())
    assert fresh == {}, "a credential seen for the first time is looked up whole: the procedure probes itself"
    assert remembered == {"answer": 42, "published": 0}
