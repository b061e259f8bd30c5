"""Health, /openapi.json, and `503 unavailable` while the database is away (then recovery)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import psycopg
import pytest
from psycopg import sql

from procedures.vocabulary import VOCABULARY
from rpc.app import load_registry
from tests.conftest import Databases
from tests.support import Admin, LiveServer, User, eventually, settings_for


def test_healthz(client: httpx.Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_openapi_lists_every_procedure_with_its_scope(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.")
    for proc in load_registry():
        operation = document["paths"][f"/v1/{proc.name}"]
        assert set(operation) == {method.lower() for method in proc.methods}, "every method the server takes"
        described = operation["post" if proc.write else "get"]
        assert described["operationId"] == proc.name
        assert described["tags"] == [proc.name.split(".")[0]]
        assert described["security"] == [{s: [scope]} for scope in proc.scopes for s in ("bearer", "oauth2")]
        assert described["description"].startswith(proc.doc.splitlines()[0])
        example = dict(proc.params_type.example)
        if proc.upload:
            assert set(described["requestBody"]["content"]) == {"multipart/form-data"}
        elif proc.write:
            assert described["requestBody"]["content"]["application/json"]["example"] == example
        else:
            assert f"Also `POST` (`{proc.name}.post`)" in described["description"]
            shown = {p["name"]: p["example"] for p in described["parameters"] if "example" in p}
            required = {p["name"] for p in described["parameters"] if p["required"]}
            assert shown == {name: value for name, value in example.items() if name in required}
            for method in ("head", "post"):
                twin = operation[method]
                assert twin["operationId"] == f"{proc.name}.{method}" and twin["x-same-as"] == proc.name
                assert (twin["tags"], twin["security"]) == (described["tags"], described["security"])
            assert operation["head"]["parameters"] == described["parameters"]
            assert all("content" not in answer for answer in operation["head"]["responses"].values())
            body = operation["post"]["requestBody"]
            assert body["content"]["application/json"]["example"] == example
            assert body["required"] == bool(required), "no body is a call without parameters"
    assert {tag["name"] for tag in document["tags"]} >= {"jobs", "applications", "profile", "billing", "audit"}
    flow = document["components"]["securitySchemes"]["oauth2"]["flows"]["authorizationCode"]
    assert flow["authorizationUrl"].endswith("/oauth/authorize") and flow["tokenUrl"].endswith("/oauth/token")
    assert set(flow["scopes"]) == set(VOCABULARY.scopes)
    schemas = document["components"]["schemas"]
    assert "Job" in schemas
    assert set(schemas["JobSummary"]["properties"]) == {"id", "title", "company", "location", "status", "created_at"}


def test_ids_are_documented_as_strings_and_any_other_value_is_not_found(client: httpx.Client, admin: Admin) -> None:
    """An id is sent as a string (or null where it may be left out); whatever else arrives in its place is the
    `404` of an unknown id (never a `422` that would tell ids apart from other values), and the document says only
    that."""
    answer = client.get("/openapi.json")
    assert '{"type":"integer"},{"type":"number"},{"type":"boolean"}' not in answer.text.replace(" ", "")
    document = answer.json()
    [parameter] = document["paths"]["/v1/jobs.get"]["get"]["parameters"]
    assert parameter["schema"] == {"type": "string", "description": "An opaque object id (a string)."}
    properties = document["components"]["schemas"]["CreateApplication"]["properties"]
    assert properties["job_id"]["type"] == "string"
    assert properties["resume_file_id"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert properties["attachment_file_ids"]["items"]["type"] == "string"
    cleared = document["components"]["schemas"]["UpdateProfile"]["properties"]["resume_file_id"]
    assert cleared["anyOf"] == [{"type": "string"}, {"type": "null"}], "null clears the profile's résumé"
    user = admin.user("employer")
    for value in (5, 2.5, True, None):
        answer = client.post("/v1/jobs.get", json={"id": value}, headers=user.auth)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found", answer.text


class Outage:
    """Makes one database refuse connections and drops the ones it has, until `end()`."""

    def __init__(self, server_url: str, database_url: str) -> None:
        self.server_url = server_url
        self.name = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]

    def begin(self) -> None:
        self._run("ALTER DATABASE {} ALLOW_CONNECTIONS false")
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (self.name,))

    def end(self) -> None:
        self._run("ALTER DATABASE {} ALLOW_CONNECTIONS true")

    def _run(self, statement: str) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(sql.SQL(statement).format(sql.Identifier(self.name)))


@pytest.fixture
def outage_server(
    server_url: str, databases: Databases, tmp_path: object
) -> Iterator[tuple[LiveServer, Admin, Outage]]:
    url = databases.copy()
    settings = settings_for(url, DB_POOL_TIMEOUT="1", DATA_DIR=str(tmp_path))
    outage = Outage(server_url, url)
    with LiveServer(settings) as live:
        try:
            yield live, Admin(url, settings), outage
        finally:
            outage.end()


def test_database_away_is_503_then_service_returns(outage_server: tuple[LiveServer, Admin, Outage]) -> None:
    live, admin, outage = outage_server
    user: User = admin.user("employer")
    with live.client() as client:
        assert client.get("/v1/jobs.list", headers=user.auth).status_code == 200
        outage.begin()
        for path in ("/v1/jobs.list", "/v1/profile.me", "/healthz"):
            response = client.get(path, headers=user.auth)
            assert response.status_code == 503, response.text
            assert response.json()["error"]["code"] == "unavailable"
            assert int(response.headers["Retry-After"]) >= 1
        login = client.post("/auth/login", json={"email": user.email, "password": user.password})
        assert login.status_code == 503
        outage.end()
        eventually(
            lambda: client.get("/v1/jobs.list", headers=user.auth).status_code == 200,
            "full service after the database's return",
            timeout=5,
        )
        assert client.get("/healthz").status_code == 200


def test_readyz(client: httpx.Client) -> None:
    assert client.get("/readyz").status_code == 200


def test_metrics_count_calls_by_procedure_and_status(client: httpx.Client, admin: Admin) -> None:
    user = admin.user("employer")
    client.get("/v1/jobs.list", headers=user.auth)
    client.get("/v1/jobs.get", params={"id": "nope"}, headers=user.auth)
    client.get("/v1/made.up.name", headers=user.auth)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'hire_requests_total{procedure="jobs.list",status="200"}' in text
    assert 'hire_requests_total{procedure="jobs.get",status="404"}' in text
    assert 'hire_requests_total{procedure="unknown",status="404"}' in text
    assert "made.up.name" not in text, "no label per made-up name"
    assert 'hire_request_seconds_bucket{le="0.1",procedure="jobs.list"}' in text
    assert 'hire_db_pool_connections{state="size"}' in text
    assert "hire_queue_jobs" in text
    assert "hire_webhook_attempts_total" in text


def test_metrics_are_only_for_allowed_addresses(databases: Databases, tmp_path: object) -> None:
    settings = settings_for(databases.copy(), METRICS_ALLOW="10.0.0.0/8", DATA_DIR=str(tmp_path))
    with LiveServer(settings) as live, live.client() as client:
        assert client.get("/metrics").status_code == 403
