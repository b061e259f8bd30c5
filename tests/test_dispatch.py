"""The calling conventions and error rows of docs/decisions.md, in the dispatcher's order (docs/architecture.md)."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.support import Admin, LiveServer, User, bearer, error_code


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
    assert response.headers["Allow"] == "GET, HEAD, POST"


def test_head_works_wherever_get_does(client: httpx.Client, employer: User) -> None:
    """RFC 9110 section 9.3.2: the GET's status and headers, no body."""
    got = client.get("/v1/jobs.list", headers=employer.auth)
    head = client.head("/v1/jobs.list", headers=employer.auth)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert client.head("/v1/jobs.create", headers=employer.auth).status_code == 405


def test_a_repeated_query_parameter_is_refused(client: httpx.Client, employer: User) -> None:
    """Last-wins would silently drop a value."""
    response = client.get("/v1/jobs.list?page=1&page=2", headers=employer.auth)
    assert response.status_code == 422
    assert response.json()["error"]["details"]["errors"] == [
        {"field": "page", "message": "Sent more than once; send it once."}
    ]


def test_a_whole_number_written_as_a_float_is_an_integer(client: httpx.Client, employer: User) -> None:
    """JSON Schema calls 20.0 an integer; a string that looks like one is still refused."""
    assert (
        client.post("/v1/jobs.list", json={"per_page": 20.0}, headers=employer.auth).json()["result"]["per_page"] == 20
    )
    for wrong in (20.5, "20"):
        assert client.post("/v1/jobs.list", json={"per_page": wrong}, headers=employer.auth).status_code == 422


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"page": 596809.0},
            [{"field": "page", "message": "page × per_page may not exceed 10000; narrow the filters"}],
        ),
        ({"page": 596809.0, "per_page": 0.0}, [{"field": "per_page", "message": "Expected `int` >= 1."}]),
        ({"page": 2.0, "per_page": 5.0, "status": "nope"}, None),
    ],
)
def test_an_integral_float_is_judged_as_the_integer_it_is(
    client: httpx.Client, employer: User, body: dict[str, Any], expected: list[dict[str, str]] | None
) -> None:
    """Where `596809.0` is refused, it is for what the integer breaks (a rule across fields, a bound), never as a
    float: JSON Schema, and so every generated client, counts it as an integer. The same for every procedure,
    here one with its own parameters beside the paging."""
    procedure = "jobs.list" if expected else "applications.list"
    response = client.post(f"/v1/{procedure}", json=body, headers=employer.auth)
    assert response.status_code == 422 and error_code(response) == "invalid_params"
    errors = response.json()["error"]["details"]["errors"]
    if expected:
        assert errors == expected
    else:
        assert [error["field"] for error in errors] == ["status"], "only the bad status, not the floats"


def test_a_blank_body_is_not_an_empty_object(client: httpx.Client, employer: User) -> None:
    headers = {**employer.auth, "Content-Type": "application/json"}
    assert client.post("/v1/jobs.list", content=b"", headers=headers).status_code == 200
    response = client.post("/v1/jobs.list", content=b"  \n", headers=headers)
    assert response.status_code == 400 and error_code(response) == "invalid_json"


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
    message = response.json()["error"]["message"]
    assert "needs the scope write:jobs; these credentials have read:jobs" in message
    assert "Settings > API keys" in message and "bin/admin create-api-key --scopes write:jobs" in message


@pytest.mark.parametrize("sent", ["123", 123])
def test_a_malformed_id_is_404_saying_what_an_id_looks_like(client: httpx.Client, key: str, sent: object) -> None:
    """A malformed id names no object (404, as the contract says), and the message says an id is a UUID."""
    for response in (
        client.get("/v1/jobs.get", params={"id": str(sent)}, headers=bearer(key)),
        client.post("/v1/jobs.get", json={"id": sent}, headers=bearer(key)),
    ):
        assert response.status_code == 404 and error_code(response) == "not_found"
        message = response.json()["error"]["message"]
        assert message.startswith("No such object: id must be an id as this service returns them, a UUID such as")
        assert "123 is not one" in message.replace('"', "")


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


# The last three are well-formed JSON apart from a string that is not UTF-8 (RFC 8259 section 8.1).
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


# --- a credential that changes while the body of a write is still arriving (docs/security.md) ----------------


class HalfSentPost:
    """A POST whose headers are sent now and whose body is sent later, on a raw connection."""

    def __init__(self, live: LiveServer, path: str, headers: dict[str, str], body: bytes) -> None:
        self._connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
        self._connection.putrequest("POST", path)
        for name, value in {**headers, "Content-Type": "application/json", "Content-Length": str(len(body))}.items():
            self._connection.putheader(name, value)
        self._connection.endheaders()
        self._body = body

    def finish(self) -> tuple[int, dict[str, Any]]:
        self._connection.send(self._body)
        response = self._connection.getresponse()
        answer = (response.status, json.loads(response.read()))
        self._connection.close()
        return answer


def wait_until_counted(client: httpx.Client, other_key: str, before: int) -> None:
    """Until the account's budget shows one call more than this loop's own: the half-sent write has been
    authenticated and counted, and now waits for its body."""
    for polls in range(1, 200):
        left = int(client.get("/v1/jobs.list", headers=bearer(other_key)).headers["X-RateLimit-Remaining"])
        if left == before - polls - 1:
            return
    raise AssertionError("the half-sent write was never counted")


def half_sent_job(client: httpx.Client, live: LiveServer, admin: Admin, user: User) -> tuple[HalfSentPost, str]:
    """`jobs.create` with a key of `user` (used once before, so remembered), its body not yet sent."""
    key = admin.api_key(user, scopes="read:jobs,write:jobs")
    other = admin.api_key(user, scopes="read:jobs")["key"]
    assert client.get("/v1/jobs.list", headers=bearer(key["key"])).status_code == 200
    before = int(client.get("/v1/jobs.list", headers=bearer(other)).headers["X-RateLimit-Remaining"])
    body = json.dumps({"title": "Half-sent", "company": "Acme", "location": "Izmir"}).encode()
    post = HalfSentPost(live, "/v1/jobs.create", bearer(key["key"]), body)
    wait_until_counted(client, other, before)
    return post, key["id"]


def test_a_key_revoked_while_a_write_body_arrives_stops_the_write(
    client: httpx.Client, live: LiveServer, admin: Admin
) -> None:
    user = admin.user("employer")
    post, key_id = half_sent_job(client, live, admin, user)
    admin.revoke(key_id)
    status, body = post.finish()
    assert (status, body["error"]["code"]) == (401, "invalid_api_key")
    assert admin.sql("SELECT count(*) AS n FROM jobs WHERE account_id = %(a)s", {"a": user.account_id})[0]["n"] == 0


def test_a_role_lost_while_a_write_body_arrives_stops_the_write(
    client: httpx.Client, live: LiveServer, admin: Admin
) -> None:
    user = admin.user("employer")
    post, _ = half_sent_job(client, live, admin, user)
    admin.sql("UPDATE users SET role = 'candidate' WHERE id = %(id)s", {"id": user.user_id})
    status, body = post.finish()
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert admin.sql("SELECT count(*) AS n FROM jobs WHERE account_id = %(a)s", {"a": user.account_id})[0]["n"] == 0


def test_a_deleted_user_whose_write_body_arrives_late_is_refused(
    client: httpx.Client, live: LiveServer, admin: Admin
) -> None:
    user = admin.user("employer")
    post, _ = half_sent_job(client, live, admin, user)
    admin.sql("DELETE FROM users WHERE id = %(id)s", {"id": user.user_id})
    status, body = post.finish()
    assert (status, body["error"]["code"]) == (401, "invalid_api_key")


# --- JSON nested too deeply to decode (docs/security.md) -------------------------------------------------------

DEEP_BODIES = [b"[" * 100_000, b'{"a":' * 100_000, b'{"title": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"]


@pytest.mark.parametrize("body", DEEP_BODIES)
def test_deeply_nested_json_is_invalid_json_not_a_crash(client: httpx.Client, employer: User, body: bytes) -> None:
    headers = {**employer.auth, "Content-Type": "application/json"}
    for name in ("jobs.create", "jobs.list"):
        response = client.post(f"/v1/{name}", content=body, headers=headers)
        assert response.status_code == 400, response.text
        assert error_code(response) == "invalid_json"


# --- errors that say how to fix them --------------------------------------------------------------------------


def test_an_unknown_procedure_suggests_the_nearest_names(client: httpx.Client, employer: User) -> None:
    response = client.get("/v1/jobs.lst", headers=employer.auth)
    assert error_code(response) == "unknown_procedure"
    assert "Did you mean jobs.list" in response.json()["error"]["message"]
    far = client.get("/v1/zzz.qqq", headers=employer.auth).json()["error"]["message"]
    assert "Did you mean" not in far and "/openapi.json" in far


@pytest.mark.parametrize(("path", "hint"), [("/v1/jobs/list", "/v1/jobs.list"), ("/v1/", "/v1/jobs.list")])
def test_a_slashed_path_says_procedure_names_use_dots(client: httpx.Client, path: str, hint: str) -> None:
    response = client.get(path)
    assert response.status_code == 404 and error_code(response) == "unknown_procedure"
    assert hint in response.json()["error"]["message"]


def test_invalid_json_says_where(client: httpx.Client, employer: User) -> None:
    headers = {**employer.auth, "Content-Type": "application/json"}
    message = client.post("/v1/jobs.create", content=b'{"title": "x",}', headers=headers).json()["error"]["message"]
    assert message.startswith("The body is not valid JSON") and "byte" in message


@contextlib.contextmanager
def _lock_conflicts(database: str, times: int) -> Iterator[None]:
    """The next `times` inserts into jobs fail as a deadlock victim's would (SQLSTATE 40P01); a sequence counts
    them, since it is not rolled back with the transaction that failed."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE conflicts_left")
        conn.execute(
            f"""CREATE FUNCTION conflict() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF nextval('conflicts_left') <= {times:d} THEN
                    RAISE EXCEPTION 'deadlock detected (made by the test)' USING ERRCODE = 'deadlock_detected';
                END IF;
                RETURN NEW;
            END $$"""
        )
        conn.execute("CREATE TRIGGER conflict BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION conflict()")
        try:
            yield
        finally:
            conn.execute("DROP TRIGGER conflict ON jobs")
            conn.execute("DROP FUNCTION conflict()")
            conn.execute("DROP SEQUENCE conflicts_left")


def _titled(admin: Admin, title: str) -> int:
    return int(admin.sql("SELECT count(*) AS n FROM jobs WHERE title = %(t)s", {"t": title})[0]["n"])


def test_a_write_that_meets_a_deadlock_is_tried_once_more(
    client: httpx.Client, admin: Admin, employer: User, database: str
) -> None:
    """A deadlock rolls the whole write back before anything was answered: the service runs it again, and the
    client sees one success (one job, one kept answer for its Idempotency-Key)."""
    draft = {"title": "Tried twice", "company": "Locks", "location": "Here"}
    headers = {**employer.auth, "Idempotency-Key": "deadlock-once"}
    with _lock_conflicts(database, times=1):
        first = client.post("/v1/jobs.create", json=draft, headers=headers)
    assert first.status_code == 200, first.text
    assert _titled(admin, "Tried twice") == 1
    again = client.post("/v1/jobs.create", json=draft, headers=headers)
    assert again.json() == first.json() and again.headers.get("Idempotent-Replayed") == "true"


def test_a_second_lock_conflict_is_busy_not_unavailable(
    client: httpx.Client, admin: Admin, employer: User, database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Twice in a row: `503 unavailable` (the contract's code) with Retry-After, said to be a busy database, and
    logged as such, not as a database that is down; nothing applied."""
    draft = {"title": "Busy twice", "company": "Locks", "location": "Here"}
    with _lock_conflicts(database, times=2), caplog.at_level(logging.INFO):
        response = client.post("/v1/jobs.create", json=draft, headers=employer.auth)
    assert response.status_code == 503 and error_code(response) == "unavailable"
    assert "busy" in response.json()["error"]["message"] and response.headers["Retry-After"] == "1"
    assert _titled(admin, "Busy twice") == 0
    logged = [record.getMessage() for record in caplog.records]
    assert any("database busy" in line and "DeadlockDetected" in line for line in logged), logged
    assert not any("database unavailable" in line for line in logged), logged
