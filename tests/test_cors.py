"""Browsers on other origins (docs/security.md): preflights, the answers' headers, the token endpoints' public
clients, and nothing for the panel or the web pages — over HTTP, then in a real browser on two origins."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from rpc.ops import admin as ops
from tests.chromium import browser_page
from tests.support import Admin, LiveServer, User, free_port, settings_for

APP = "https://app.example.test"
ELSEWHERE = "https://evil.example.test"
PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
EXPOSED = "X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, Idempotent-Replayed"


@pytest.fixture(scope="module")
def settings(database: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return settings_for(database, DATA_DIR=str(tmp_path_factory.mktemp("data")), CORS_ALLOWED_ORIGINS=APP)


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {name: value for name, value in response.headers.items() if name.lower().startswith("access-control-")}


@pytest.mark.parametrize("path", ["/v1/jobs.list", "/v1/jobs.create", "/oauth/token", "/auth/login", "/openapi.json"])
def test_an_allowed_origins_preflight_is_answered_204(client: httpx.Client, path: str) -> None:
    response = client.options(path, headers={"Origin": APP, **PREFLIGHT})
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == APP
    assert (
        response.headers["Access-Control-Allow-Headers"] == "Authorization, Content-Type, Idempotency-Key, X-Request-Id"
    )
    assert "POST" in response.headers["Access-Control-Allow-Methods"]
    assert "Origin" in response.headers["Vary"]
    assert "Access-Control-Expose-Headers" not in response.headers, "Expose-Headers belongs to the other answers"


def test_an_allowed_origins_answers_can_be_read(client: httpx.Client, employer: User) -> None:
    response = client.get("/v1/jobs.list", headers={"Origin": APP, **employer.auth})
    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == APP
    assert response.headers["Access-Control-Expose-Headers"] == EXPOSED
    assert "Origin" in response.headers["Vary"]
    assert "Access-Control-Allow-Headers" not in response.headers, "Allow-Headers belongs to preflights"
    refused = client.get("/v1/jobs.list", headers={"Origin": APP})
    assert refused.status_code == 401 and refused.headers["Access-Control-Allow-Origin"] == APP


@pytest.mark.parametrize(
    "origin", [ELSEWHERE, "null", "https://app.example.test.evil.example", "http://app.example.test"]
)
def test_other_origins_get_no_cors_header(client: httpx.Client, employer: User, origin: str) -> None:
    assert cors_headers(client.options("/v1/jobs.list", headers={"Origin": origin, **PREFLIGHT})) == {}
    assert cors_headers(client.get("/v1/jobs.list", headers={"Origin": origin, **employer.auth})) == {}


@pytest.mark.parametrize("path", ["/panel", "/panel/api-keys", "/web/signin", "/oauth/authorize", "/docs", "/"])
def test_the_panel_and_the_web_pages_never_answer_cors(client: httpx.Client, path: str) -> None:
    assert cors_headers(client.get(path, headers={"Origin": APP})) == {}
    assert cors_headers(client.options(path, headers={"Origin": APP, **PREFLIGHT})) == {}


def test_a_public_clients_redirect_origin_may_call_the_token_endpoints_only(
    client: httpx.Client, admin: Admin, employer: User
) -> None:
    spa = "https://spa.example.test"
    register = admin.run
    register(ops.create_oauth_client, admin.settings, admin.vocabulary, email=employer.email, name="SPA",
             redirect_uris=[f"{spa}/callback"], public=True)  # fmt: skip
    register(ops.create_oauth_client, admin.settings, admin.vocabulary, email=employer.email, name="Server",
             redirect_uris=["https://server.example.test/cb"], public=False)  # fmt: skip
    for path in ("/oauth/token", "/oauth/revoke"):
        assert client.options(path, headers={"Origin": spa, **PREFLIGHT}).headers["Access-Control-Allow-Origin"] == spa
    assert cors_headers(client.options("/v1/jobs.list", headers={"Origin": spa, **PREFLIGHT})) == {}
    confidential = client.options("/oauth/token", headers={"Origin": "https://server.example.test", **PREFLIGHT})
    assert cors_headers(confidential) == {}, "a confidential client's server does not need a browser's CORS"


# --- in a real browser: a page on one loopback origin calls the API on another ----------------------------------

PAGE = b"""<!doctype html><html><body><p id="out">waiting</p><script>
fetch(location.hash.slice(1) + "/v1/profile.me", {headers: {Authorization: "Bearer " + TOKEN}})
  .then(r => r.json().then(body => [r.headers.get("X-RateLimit-Remaining"), body]))
  .then(([left, body]) => { document.getElementById("out").textContent = body.result.email + " " + left; })
  .catch(error => { document.getElementById("out").textContent = "refused: " + error.name; });
</script></body></html>"""


@pytest.fixture
def page_server() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A static page server on a loopback origin of its own: the single-page application."""
    pages: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path.split("#")[0], b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()


def test_a_page_on_an_allowed_origin_reads_the_api_in_a_browser(
    page_server: tuple[str, dict[str, bytes]], database: str, admin: Admin, tmp_path: Any
) -> None:
    origin, pages = page_server
    person = admin.user("employer")
    pages["/app.html"] = PAGE.replace(b"TOKEN", f'"{person.token}"'.encode())
    allowed = settings_for(database, DATA_DIR=str(tmp_path / "a"), CORS_ALLOWED_ORIGINS=origin)
    with LiveServer(allowed) as api, browser_page() as watched:
        watched.page.goto(f"{origin}/app.html#{api.url}")
        expect(watched.page.locator("#out")).to_have_text(f"{person.email} " + "999", timeout=15_000)
    other = settings_for(database, DATA_DIR=str(tmp_path / "b"))
    with LiveServer(other) as api, browser_page() as watched:
        watched.page.goto(f"{origin}/app.html#{api.url}")
        expect(watched.page.locator("#out")).to_have_text("refused: TypeError", timeout=15_000)
