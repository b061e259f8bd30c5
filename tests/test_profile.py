"""profile.me and profile.update through HTTP (docs/decisions.md)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support import TIMESTAMP, Admin, Call, User, bearer, ok, refused

PROFILE_KEYS = {
    "id",
    "email",
    "display_name",
    "role",
    "account_id",
    "headline",
    "location",
    "bio",
    "resume",
    "notify_new_applications",
    "created_at",
    "updated_at",
}


@pytest.fixture
def person(admin: Admin) -> User:
    """A fresh user per test, so that updates do not leak between tests."""
    return admin.user("candidate")


@pytest.mark.parametrize("role", ["candidate", "employer", "admin"])
def test_me_has_the_exact_shape(call: Call, admin: Admin, role: str) -> None:
    user = admin.user(role)
    profile = ok(call("profile.me", user))
    assert set(profile) == PROFILE_KEYS
    assert profile["id"] == user.user_id
    assert profile["account_id"] == user.account_id
    assert profile["email"] == user.email
    assert profile["role"] == role
    assert profile["display_name"] is None and profile["headline"] is None
    assert profile["location"] is None and profile["bio"] is None
    assert TIMESTAMP.match(profile["created_at"]) and TIMESTAMP.match(profile["updated_at"])


def test_me_by_get(client: httpx.Client, person: User) -> None:
    response = client.get("/v1/profile.me", headers=person.auth)
    assert ok(response)["id"] == person.user_id


def test_me_takes_no_parameters(call: Call, person: User) -> None:
    error = refused(call("profile.me", person, id="someone-else"), 422, "invalid_params")
    assert error["details"]["errors"] == [{"field": "id", "message": "Unknown parameter; the parameters are: none."}]


def test_each_user_sees_only_themselves(call: Call, admin: Admin, person: User) -> None:
    other = admin.user("employer")
    ok(call("profile.update", other, display_name="Other"))
    assert ok(call("profile.me", person))["display_name"] is None
    assert ok(call("profile.me", other))["display_name"] == "Other"


def test_update_is_partial(call: Call, person: User) -> None:
    before = ok(call("profile.me", person))
    first = ok(call("profile.update", person, display_name="Ada", headline="Engineer"))
    assert set(first) == PROFILE_KEYS
    assert (first["display_name"], first["headline"], first["location"], first["bio"]) == (
        "Ada",
        "Engineer",
        None,
        None,
    )
    second = ok(call("profile.update", person, bio="Writes compilers.", location="London"))
    assert (second["display_name"], second["headline"], second["location"], second["bio"]) == (
        "Ada",
        "Engineer",
        "London",
        "Writes compilers.",
    )
    fixed = {"id", "email", "role", "account_id", "created_at"}
    assert {k: second[k] for k in fixed} == {k: before[k] for k in fixed}
    assert ok(call("profile.me", person)) == second


def test_null_clears_a_field(call: Call, person: User) -> None:
    ok(call("profile.update", person, display_name="Ada", headline="Engineer", bio="Bio"))
    cleared = ok(call("profile.update", person, headline=None, bio=None))
    assert (cleared["display_name"], cleared["headline"], cleared["bio"]) == ("Ada", None, None)
    assert ok(call("profile.me", person)) == cleared


def test_empty_update_changes_nothing(call: Call, person: User) -> None:
    ok(call("profile.update", person, display_name="Ada"))
    before = ok(call("profile.me", person))
    assert ok(call("profile.update", person)) == before


def test_updated_at_moves_forward(call: Call, admin: Admin, person: User) -> None:
    admin.sql("UPDATE users SET updated_at = updated_at - interval '1 day' WHERE id = %(id)s", {"id": person.user_id})
    before = ok(call("profile.me", person))
    after = ok(call("profile.update", person, headline="New"))
    assert TIMESTAMP.match(after["updated_at"])
    assert after["updated_at"] > before["updated_at"]
    again = ok(call("profile.update", person, headline="Newer"))
    assert again["updated_at"] >= after["updated_at"]
    assert again["created_at"] == before["created_at"]


@pytest.mark.parametrize(
    ("field", "limit"), [("display_name", 200), ("headline", 200), ("location", 200), ("bio", 5_000)]
)
def test_length_limits(call: Call, person: User, field: str, limit: int) -> None:
    assert ok(call("profile.update", person, **{field: "x" * limit}))[field] == "x" * limit
    error = refused(call("profile.update", person, **{field: "y" * (limit + 1)}), 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == [field]
    assert ok(call("profile.me", person))[field] == "x" * limit


@pytest.mark.parametrize("fields", [{"email": "new@example.test"}, {"role": "admin"}, {"nickname": "x"}])
def test_unknown_or_fixed_fields_are_invalid_params(call: Call, person: User, fields: dict[str, Any]) -> None:
    before = ok(call("profile.me", person))
    error = refused(call("profile.update", person, **fields), 422, "invalid_params")
    [name] = fields
    assert any(e["field"] == name and e["message"].startswith("Unknown parameter") for e in error["details"]["errors"])
    assert ok(call("profile.me", person)) == before


def test_wrong_type_is_invalid_params(call: Call, person: User) -> None:
    error = refused(call("profile.update", person, headline=42), 422, "invalid_params")
    assert [e["field"] for e in error["details"]["errors"]] == ["headline"]


def test_bad_field_refuses_the_whole_update(call: Call, person: User) -> None:
    refused(call("profile.update", person, display_name="Ada", bio="z" * 5_001), 422, "invalid_params")
    assert ok(call("profile.me", person))["display_name"] is None


def test_read_only_api_key_reads_but_cannot_update(client: httpx.Client, admin: Admin, employer: User) -> None:
    key = admin.api_key(employer, scopes="read:profile")["key"]
    headers = bearer(key)
    assert ok(client.get("/v1/profile.me", headers=headers))["id"] == employer.user_id
    response = client.post("/v1/profile.update", json={"headline": "Nope"}, headers=headers)
    error = refused(response, 403, "insufficient_scope")
    assert error["details"] == {"required": "write:profile", "granted": ["read:profile"]}
    assert ok(client.get("/v1/profile.me", headers=headers))["headline"] is None


def test_write_key_updates_its_users_profile(client: httpx.Client, admin: Admin) -> None:
    owner = admin.user("employer")
    key = admin.api_key(owner, scopes="read:profile,write:profile")["key"]
    headers = bearer(key)
    updated = ok(client.post("/v1/profile.update", json={"headline": "Via key"}, headers=headers))
    assert updated["id"] == owner.user_id and updated["headline"] == "Via key"


def test_key_without_profile_scopes_cannot_read(client: httpx.Client, admin: Admin, employer: User) -> None:
    key = admin.api_key(employer, scopes="read:jobs")["key"]
    response = client.get("/v1/profile.me", headers=bearer(key))
    assert refused(response, 403, "insufficient_scope")["details"]["required"] == "read:profile"
