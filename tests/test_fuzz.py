"""Every registered procedure, fed generated parameters (fitting and not) over HTTP: never a 5xx, and
every 4xx is the contract's error body. New procedures are covered without editing this file."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpc.app import load_registry
from rpc.core.envelope import Result
from rpc.core.registry import Procedure
from tests.support import Admin, User

PROMISED_CODES = {
    "invalid_json", "missing_credentials", "invalid_token", "token_expired", "invalid_api_key",
    "insufficient_scope", "forbidden", "https_required", "unknown_procedure", "not_found",
    "method_not_allowed", "invalid_transition", "conflict", "payload_too_large", "unsupported_media_type",
    "invalid_params", "rate_limited", "internal_error", "unavailable",
}  # fmt: skip
PROCEDURES = [proc.name for proc in load_registry()]

TRICKY_TEXT = ["", " ", "%", "_", "\\", "a\x00b", "\u2028", "😀", "x" * 10_001, "00000000-0000-0000-0000-000000000000"]
texts = st.sampled_from(TRICKY_TEXT) | st.text(max_size=300)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def fitting(info: mi.Type) -> st.SearchStrategy[Any]:
    """Values of the declared type, near its bounds (so that both sides of each bound are tried)."""
    if isinstance(info, mi.Metadata):
        return fitting(info.type)
    if isinstance(info, mi.UnionType):
        return st.one_of([fitting(t) for t in info.types])
    if isinstance(info, mi.LiteralType):
        return st.sampled_from(info.values)
    if isinstance(info, mi.BoolType):
        return st.booleans()
    if isinstance(info, mi.IntType):
        low = info.ge if info.ge is not None else -5
        high = info.le if info.le is not None else 20_000
        return st.integers(min_value=low - 1, max_value=high + 1)
    if isinstance(info, mi.StrType):
        longest = (info.max_length or 50) + 1
        return st.text(max_size=min(longest, 300)) | st.sampled_from(
            ["", " ", "%", "_", "00000000-0000-0000-0000-000000000000"]
        )
    if isinstance(info, mi.NoneType):
        return st.none()
    return json_values


@st.composite
def parameters(draw: st.DrawFn, params_type: type[msgspec.Struct]) -> dict[str, Any]:
    info = mi.type_info(params_type)
    assert isinstance(info, mi.StructType)
    chosen: dict[str, Any] = {}
    for field in info.fields:
        if draw(st.integers(0, 3)) > 0:  # mostly sent, sometimes left out (required ones too)
            chosen[field.encode_name] = draw(json_values if draw(st.integers(0, 3)) == 0 else fitting(field.type))
    if draw(st.integers(0, 9)) == 0:
        chosen[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
    return chosen


def check(response: httpx.Response, proc: Procedure | None = None) -> None:
    """Never a 5xx; an error is the contract's body; a success decodes, strictly, as the procedure's result."""
    assert response.status_code < 500, (response.status_code, response.text)
    assert response.status_code != 429, "over the request budget: the procedure's own checks were not reached"
    body = response.json()
    if response.status_code == 200:
        assert set(body) == {"result"}
        if proc is not None:
            msgspec.json.decode(response.content, type=Result[proc.result_type], strict=True)
    else:
        assert set(body) == {"error"}, body
        assert set(body["error"]) == {"code", "message", "details"}
        assert body["error"]["code"] in PROMISED_CODES


@pytest.fixture(scope="module")
def shared_callers(admin: Admin) -> list[User]:
    return [admin.user("employer"), admin.user("candidate")]


@pytest.fixture
def callers(admin: Admin, shared_callers: list[User]) -> list[User]:
    """An admin of its own for each test (it passes every role check, so the procedures' own code runs, and
    it stays within its account's request budget), then an employer and a candidate."""
    return [admin.user("admin"), *shared_callers]


@pytest.mark.parametrize("name", PROCEDURES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_json_bodies(client: httpx.Client, callers: list[User], name: str, data: st.DataObject) -> None:
    proc = load_registry().get(name)
    assert proc is not None
    caller = data.draw(st.sampled_from(callers))
    params = data.draw(parameters(proc.params_type))
    check(client.post(f"/v1/{name}", json=params, headers=caller.auth), proc)


@pytest.mark.parametrize("name", PROCEDURES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_query_strings(client: httpx.Client, callers: list[User], name: str, data: st.DataObject) -> None:
    proc = load_registry().get(name)
    assert proc is not None
    params = data.draw(parameters(proc.params_type))
    query = {
        key: value if isinstance(value, str) else msgspec.json.encode(value).decode() for key, value in params.items()
    }
    check(client.get(f"/v1/{name}", params=query, headers=callers[0].auth), proc)


@pytest.mark.parametrize("name", PROCEDURES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=64), content_type=st.sampled_from(["application/json", "text/plain", None]))
def test_arbitrary_bytes(
    client: httpx.Client, callers: list[User], name: str, body: bytes, content_type: str | None
) -> None:
    headers = {**callers[0].auth, **({"Content-Type": content_type} if content_type else {})}
    check(client.post(f"/v1/{name}", content=body, headers=headers))


def text_fields(params_type: type[msgspec.Struct]) -> list[str]:
    """Fields that accept a string (alone or in a union)."""

    def takes_text(info: mi.Type) -> bool:
        if isinstance(info, mi.Metadata):
            return takes_text(info.type)
        if isinstance(info, mi.UnionType):
            return any(takes_text(t) for t in info.types)
        return isinstance(info, mi.StrType)

    info = mi.type_info(params_type)
    assert isinstance(info, mi.StructType)
    return [field.encode_name for field in info.fields if takes_text(field.type)]


@pytest.mark.parametrize("name", PROCEDURES)
def test_tricky_strings_in_every_text_field(client: httpx.Client, callers: list[User], name: str) -> None:
    """Deterministically, every awkward string in every string parameter, by GET and by POST."""
    proc = load_registry().get(name)
    assert proc is not None
    for field in text_fields(proc.params_type):
        for value in TRICKY_TEXT:
            check(client.post(f"/v1/{name}", json={field: value}, headers=callers[0].auth), proc)
            if not proc.write:
                check(client.get(f"/v1/{name}", params={field: value[:2000]}, headers=callers[0].auth), proc)


DEEP = [b"[" * 10_000, b'{"a":' * 5_000, b'{"x": ' + b"[" * 3_000 + b"]" * 3_000 + b"}"]


@pytest.mark.parametrize("name", PROCEDURES)
def test_json_nested_too_deeply_is_invalid_json_for_every_procedure(
    client: httpx.Client, callers: list[User], name: str
) -> None:
    proc = load_registry().get(name)
    assert proc is not None
    # An upload takes no JSON at all: any JSON body is the wrong media type, whatever it holds.
    expected = (415, "unsupported_media_type") if proc.upload else (400, "invalid_json")
    headers = {**callers[0].auth, "Content-Type": "application/json"}
    for body in DEEP:
        response = client.post(f"/v1/{name}", content=body, headers=headers)
        check(response)
        assert (response.status_code, response.json()["error"]["code"]) == expected


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/auth/login", "invalid_json"),
        ("/auth/refresh", "invalid_json"),
        ("/oauth/token", "invalid_request"),
        ("/oauth/revoke", "invalid_request"),
    ],
)
def test_json_nested_too_deeply_is_refused_by_every_json_endpoint(client: httpx.Client, path: str, error: str) -> None:
    for body in DEEP:
        response = client.post(path, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400, (path, response.status_code, response.text[:200])
        answer = response.json()
        assert answer.get("error") == error or answer.get("error", {}).get("code") == error, answer


def test_json_nested_too_deeply_is_a_malformed_payment_notification(client: httpx.Client) -> None:
    for body in DEEP:
        response = client.post("/api/webhooks/paytr", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400 and response.headers["content-type"].startswith("text/plain")
