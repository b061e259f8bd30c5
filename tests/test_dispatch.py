"""The calling conventions and error rows of CONTRACT.md §2–3, in the check order of §12."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support import Admin, User, bearer, error_code


@pytest.fixture(scope="module")
def key(admin: Admin, employer: User) -> str:
    return admin.api_key(employer, scopes="read:jobs")["key"]


def test_read_accepts_get_and_post(client: httpx.Client, employer: User) -> None:
    by_get = client.get("/v1/jobs.list", params={"per_page": 5}, headers=employer.auth)
    by_post = client.post("/v1/jobs.list", json={"per_page": 5}, headers=employer.auth)
    assert by_get.status_code == by_post.status_code == 200
    assert by_get.json() == by_post.json()
    assert set(by_get.json()["result"]) == {"data", "total", "page", "per_page"}
    assert by_get.json()["result"]["per_page"] == 5


def test_post_read_with_empty_body_means_empty_object(client: httpx.Client, employer: User) -> None:
    response = client.post("/v1/profile.me", headers=employer.auth)
    assert response.status_code == 200
    assert response.json()["result"]["id"] == employer.user_id


def test_charset_utf8_is_json(client: httpx.Client, employer: User) -> None:
    headers = {**employer.auth, "Content-Type": "application/json; charset=utf-8"}
    assert client.post("/v1/jobs.list", content=b"{}", headers=headers).status_code == 200


def test_unknown_procedure(client: httpx.Client, employer: User) -> None:
    response = client.get("/v1/jobs.nope", headers=employer.auth)
    assert response.status_code == 404
    assert error_code(response) == "unknown_procedure"


def test_other_version_is_unknown_procedure(client: httpx.Client, employer: User) -> None:
    response = client.get("/v2/jobs.list", headers=employer.auth)
    assert response.status_code == 404
    assert error_code(response) == "unknown_procedure"


def test_unknown_procedure_comes_before_credentials(client: httpx.Client) -> None:
    assert error_code(client.delete("/v1/nothing.here")) == "unknown_procedure"


def test_get_on_a_write_is_405_with_allow(client: httpx.Client, employer: User) -> None:
    response = client.get("/v1/jobs.create", headers=employer.auth)
    assert response.status_code == 405
    assert error_code(response) == "method_not_allowed"
    assert response.headers["Allow"] == "POST"


def test_405_comes_before_credentials(client: httpx.Client) -> None:
    assert client.get("/v1/jobs.publish").status_code == 405


def test_other_methods_on_a_read_are_405(client: httpx.Client, employer: User) -> None:
    response = client.put("/v1/jobs.list", headers=employer.auth)
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET, POST"


def test_missing_credentials(client: httpx.Client) -> None:
    response = client.get("/v1/jobs.list")
    assert response.status_code == 401
    assert error_code(response) == "missing_credentials"
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_other_scheme_is_invalid_token(client: httpx.Client) -> None:
    response = client.get("/v1/jobs.list", headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert response.status_code == 401
    assert error_code(response) == "invalid_token"
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


def test_insufficient_scope_names_required_and_granted(client: httpx.Client, key: str) -> None:
    response = client.post("/v1/jobs.create", json={}, headers=bearer(key))
    assert response.status_code == 403
    assert error_code(response) == "insufficient_scope"
    assert response.json()["error"]["details"] == {"required": "write:jobs", "granted": ["read:jobs"]}


def test_401_comes_before_415_413_400(client: httpx.Client) -> None:
    response = client.post("/v1/jobs.create", content=b"x" * 2_000_000, headers={"Content-Type": "text/plain"})
    assert error_code(response) == "missing_credentials"


def test_unsupported_media_type(client: httpx.Client, employer: User) -> None:
    headers = {**employer.auth, "Content-Type": "text/plain"}
    response = client.post("/v1/jobs.create", content=b"{}", headers=headers)
    assert response.status_code == 415
    assert error_code(response) == "unsupported_media_type"


def test_415_comes_before_413(client: httpx.Client, employer: User) -> None:
    headers = {**employer.auth, "Content-Type": "application/xml"}
    assert client.post("/v1/jobs.create", content=b"x" * 2_000_000, headers=headers).status_code == 415


def test_payload_too_large_by_content_length(client: httpx.Client, employer: User) -> None:
    body = b'{"title": "' + b"x" * (1024 * 1024) + b'"}'
    headers = {**employer.auth, "Content-Type": "application/json"}
    response = client.post("/v1/jobs.create", content=body, headers=headers)
    assert response.status_code == 413
    assert error_code(response) == "payload_too_large"


def test_payload_too_large_when_chunked(client: httpx.Client, employer: User) -> None:
    def chunks():  # no Content-Length: the bytes actually received count
        for _ in range(20):
            yield b" " * 65536

    headers = {**employer.auth, "Content-Type": "application/json"}
    response = client.post("/v1/jobs.create", content=chunks(), headers=headers)
    assert response.status_code == 413


def test_exactly_one_mebibyte_is_accepted_as_a_body(client: httpx.Client, employer: User) -> None:
    body = b"{}" + b" " * (1024 * 1024 - 2)
    headers = {**employer.auth, "Content-Type": "application/json"}
    assert client.post("/v1/jobs.list", content=body, headers=headers).status_code == 200


# The last three are well-formed JSON apart from a string that is not UTF-8 (RFC 8259 §8.1).
@pytest.mark.parametrize(
    "body", [b"{", b"[1, 2]", b'"text"', b"null", b"\xff\xfe", b'"\x80"', b'{"title": "\xce"}', b'{"\x80": 1}']
)
def test_invalid_json(client: httpx.Client, employer: User, body: bytes) -> None:
    headers = {**employer.auth, "Content-Type": "application/json"}
    response = client.post("/v1/jobs.create", content=body, headers=headers)
    assert response.status_code == 400
    assert error_code(response) == "invalid_json"


def test_empty_body_of_a_write_is_invalid_json(client: httpx.Client, employer: User) -> None:
    headers = {**employer.auth, "Content-Type": "application/json"}
    assert error_code(client.post("/v1/jobs.create", content=b"", headers=headers)) == "invalid_json"


def test_invalid_params_name_every_field(client: httpx.Client, employer: User) -> None:
    response = client.post("/v1/jobs.create", json={"title": "", "company": 7, "colour": "red"}, headers=employer.auth)
    assert response.status_code == 422
    assert error_code(response) == "invalid_params"
    fields = {e["field"] for e in response.json()["error"]["details"]["errors"]}
    assert fields == {"title", "company", "location", "colour"}


def test_invalid_query_params(client: httpx.Client, employer: User) -> None:
    response = client.get("/v1/jobs.list", params={"per_page": 101, "page": 0}, headers=employer.auth)
    assert response.status_code == 422
    fields = {e["field"] for e in response.json()["error"]["details"]["errors"]}
    assert fields == {"per_page", "page"}


def test_paging_deeper_than_ten_thousand_rows_is_refused(client: httpx.Client, employer: User) -> None:
    response = client.get("/v1/jobs.list", params={"per_page": 100, "page": 101}, headers=employer.auth)
    assert response.status_code == 422
    assert response.json()["error"]["details"]["errors"][0]["field"] == "page"
    assert client.get("/v1/jobs.list", params={"per_page": 100, "page": 100}, headers=employer.auth).is_success


def test_request_id_is_echoed_when_sane(client: httpx.Client) -> None:
    response = client.get("/v1/jobs.list", headers={"X-Request-Id": "abc.DEF_123-x"})
    assert response.headers["X-Request-Id"] == "abc.DEF_123-x"


@pytest.mark.parametrize("sent", ["has space", "x" * 129, "semi;colon", ""])
def test_request_id_is_replaced_when_not(client: httpx.Client, sent: str) -> None:
    response = client.get("/v1/jobs.list", headers={"X-Request-Id": sent})
    generated = response.headers["X-Request-Id"]
    assert generated != sent and re.fullmatch(r"[A-Za-z0-9._-]{1,128}", generated)


def test_every_response_has_a_request_id(client: httpx.Client) -> None:
    for path in ("/v1/jobs.list", "/v2/x", "/healthz", "/nowhere", "/openapi.json"):
        assert client.get(path).headers.get("X-Request-Id")


def test_paths_outside_the_api_answer_in_the_error_format(client: httpx.Client) -> None:
    response = client.get("/nowhere")
    assert response.status_code == 404
    assert error_code(response) == "not_found"
