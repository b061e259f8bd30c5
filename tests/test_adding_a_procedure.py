"""docs/adding-a-procedure.md, done as it says. The page's Python blocks, in order, are a module of procedures
(`procedures/jobs/locations.py` in the page) and its test; here the module is written to a temporary folder, never
to the repository's procedures/, and served by a server process that imports it before `bin/serve`'s own start
(the registry belongs to the process: the tests' process keeps only the repository's procedures, which the fuzz
tests walk). The module is held to the house's checks, found in `/openapi.json` and `/docs` as the page says, and
the page's own test runs against it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from rpc.settings import Settings
from tests.chromium import browser_page
from tests.support import Admin, Call, bearer, database_env, eventually, free_port, ok, refused, serving
from tests.test_cli import environment
from tests.test_docs_browser import operation

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "adding-a-procedure.md"
MODULE = "jobs_locations"  # the page's `procedures/jobs/locations.py`, under a name of its own
# What the page's params say of themselves, as /openapi.json and /docs must show it.
STATUS = "Count only the jobs in this status; every status when left out."
LOCATION = "Where the jobs are now, exactly as written on them."
TO = "Where they move: the location written on each from now on."


def guide() -> tuple[str, str]:
    """The page's module (every Python block but the test, in order) and its test (on the lines it has in the
    page, so that a failure points there)."""
    page = GUIDE.read_text()
    blocks = [
        (page.count("\n", 0, found.start(1)), found.group(1))
        for found in re.finditer(r"^```python\n(.*?)^```$", page, re.S | re.M)
    ]
    tests = ["\n" * line + block for line, block in blocks if block.startswith("def test_")]
    module = [block for _, block in blocks if not block.startswith("def test_")]
    assert (len(module), len(tests)) == (4, 1), "the imports, the shapes, the read, the write; and the test"
    return "\n\n".join(module), tests[0]


@pytest.fixture(scope="module")
def guided(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service with the page's module loaded, in a process of its own on this module's database."""
    folder = tmp_path_factory.mktemp("guided")
    (folder / f"{MODULE}.py").write_text(guide()[0])
    port = free_port()
    env = environment(
        **database_env(settings),
        SERVICE_ENV="test",
        PUBLIC_URL=settings.public_url,  # the issuer of the tests' session tokens
        DATA_DIR=str(folder / "data"),
        PYTHONPATH=os.pathsep.join([str(folder), str(ROOT)]),
    )
    launcher = f"import {MODULE}\nfrom rpc.ops.cli import serve\nserve(['--port', '{port}', '--no-worker'])"
    log = folder / "server.log"
    with log.open("w") as output:
        process = subprocess.Popen([sys.executable, "-c", launcher], env=env, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    answering = serving(f"{url}/healthz")
    try:
        eventually(lambda: process.poll() is not None or answering(), "the guided server's start", timeout=60)
        assert process.poll() is None, log.read_text()
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def client(guided: str) -> Iterator[httpx.Client]:
    """The guided server's client (conftest's `call` posts through it)."""
    with httpx.Client(base_url=guided, timeout=30) as http:
        yield http


def test_the_module_passes_the_house_checks(tmp_path: Path) -> None:
    """ruff and its format as if the module stood where the page puts it; mypy, strict as on procedures/."""
    module = guide()[0]
    place = "procedures/jobs/locations.py"
    for command in (["check"], ["format", "--check"]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", place, "-"],
            input=module, cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    path = tmp_path / f"{MODULE}.py"
    path.write_text(module)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(path)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_openapi_describes_the_procedures_and_their_params(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    read = document["paths"]["/v1/jobs.count_by_location"]["get"]
    assert (read["operationId"], read["tags"]) == ("jobs.count_by_location", ["jobs"])
    assert read["summary"].startswith("How many of your account's jobs are in each location, the most first")
    assert {"bearer": ["read:jobs"]} in read["security"]
    parameters = {parameter["name"]: parameter for parameter in read["parameters"]}
    assert set(parameters) == {"status", "page", "per_page"}
    status = parameters["status"]
    assert STATUS in (status.get("description"), status["schema"].get("description"))
    assert sorted(status["schema"]["enum"]) == ["closed", "draft", "published"]

    write = document["paths"]["/v1/jobs.relocate"]["post"]
    assert (write["operationId"], write["tags"]) == ("jobs.relocate", ["jobs"])
    schema = write["requestBody"]["content"]["application/json"]["schema"]
    params = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    described = {name: field.get("description") for name, field in params["properties"].items()}
    assert described == {"location": LOCATION, "to": TO}
    assert write["requestBody"]["content"]["application/json"]["example"] == {"location": "Berlin", "to": "Potsdam"}


def test_docs_lists_them(guided: str) -> None:
    with browser_page() as watched:
        page = watched.page
        page.goto(f"{guided}/docs")
        counted = operation(page, "jobs.count_by_location")
        counted.locator(".opblock-summary").click()
        status = counted.locator('tr[data-param-name="status"]')
        expect(status).to_contain_text("published")
        expect(status).to_contain_text(STATUS)  # its description, where Swagger UI shows a parameter's meaning
        moved = operation(page, "jobs.relocate")
        moved.locator(".opblock-summary").click()
        expect(moved).to_contain_text("Potsdam")  # its example body
    assert watched.console_errors == []


def test_the_read_answers_get_with_its_page_and_total(call: Call, client: httpx.Client, admin: Admin) -> None:
    """Beside the page's test, which posts: the query string, a page past the end, and the refusals by GET."""
    boss = admin.user("employer")
    for location in ("Lyon", "Lyon", "Oslo"):
        ok(call("jobs.create", boss, title="Welder", company="Acme", location=location))
    counted = ok(client.get("/v1/jobs.count_by_location?per_page=1", headers=boss.auth))
    assert counted == {"data": [{"location": "Lyon", "jobs": 2}], "total": 2, "page": 1, "per_page": 1}
    beyond = ok(client.get("/v1/jobs.count_by_location?per_page=1&page=3", headers=boss.auth))
    assert (beyond["data"], beyond["total"]) == ([], 2)
    refused(client.get("/v1/jobs.count_by_location?status=open", headers=boss.auth), 422, "invalid_params")
    refused(client.get("/v1/jobs.count_by_location?per_page=0", headers=boss.auth), 422, "invalid_params")
    key = admin.api_key(boss, scopes="write:jobs")["key"]
    refused(client.get("/v1/jobs.count_by_location", headers=bearer(key)), 403, "insufficient_scope")
    refused(
        call("jobs.relocate", admin.api_key(boss, scopes="read:jobs")["key"], location="Lyon", to="Oslo"),
        403,
        "insufficient_scope",
    )
    refused(call("jobs.relocate", boss, location="", to="Oslo"), 422, "invalid_params")


def test_the_page_s_own_test_passes(call: Call, admin: Admin) -> None:
    """The page's test, as written there, against the module as written there."""
    names: dict[str, Any] = {"Call": Call, "Admin": Admin, "ok": ok, "refused": refused}
    exec(compile(guide()[1], str(GUIDE), "exec"), names)  # noqa: S102 - the repository's own page
    (test,) = [value for name, value in names.items() if name.startswith("test_")]
    test(call, admin)
