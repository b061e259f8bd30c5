"""The README's quickstart and the OAuth walkthrough of docs/oauth.md, run as pasted against a live `bin/serve`:
every `sh` block of those sections, in order, in one bash session. Only the address changes (the test's port
instead of 8000); the person in the browser of the walkthrough is played by a small browser (tests/browser.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rpc.outbox import signatures
from tests.browser import Browser, location
from tests.conftest import Databases
from tests.support import TEST_SECRET_KEY, User, eventually, free_port, serving

ROOT = Path(__file__).resolve().parent.parent
SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
README_ADDRESS = "http://127.0.0.1:8000"


def shell_blocks(path: Path, heading: str) -> list[str]:
    """The `sh` blocks of the section under `heading` (up to the next heading of its level or above)."""
    text = "\n" + path.read_text()
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n")
    following = re.search(rf"^#{{1,{len(level)}}} ", text[start + len(heading) + 2 :], re.MULTILINE)
    section = text[start : start + len(heading) + 2 + following.start()] if following else text[start:]
    return SHELL_BLOCK.findall(section)


@pytest.fixture(scope="module")
def served(databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """`bin/serve` on a free port, and the environment the pasted commands run in (the same database)."""
    port = free_port()
    unset = ("DATABASE_URL", "TEST_DATABASE_URL", "PUBLIC_URL")  # PUBLIC_URL: bin/serve's default, from --port
    env = {
        **{name: value for name, value in os.environ.items() if name not in unset},
        "DATABASE_URL": databases.copy(),
        "DATA_DIR": str(tmp_path_factory.mktemp("readme")),
        "SERVICE_SECRET_KEY": TEST_SECRET_KEY,
        # `python3` and `bin/*` of the pasted commands run in this virtualenv, as they would in the project's.
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bin" / "serve"), "--port", str(port)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        eventually(serving(f"{url}/healthz", server), "bin/serve's /healthz", timeout=60)
        yield url, env
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def pasted(blocks: list[str], url: str) -> str:
    return "set -euo pipefail\n" + "\n".join(blocks).replace(README_ADDRESS, url)


def run(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_readme_quickstart_runs_as_pasted(served: tuple[str, dict[str, str]]) -> None:
    url, env = served
    blocks = shell_blocks(ROOT / "README.md", "## Quickstart")
    assert len(blocks) >= 4, "the quickstart's blocks were found"
    done = run(pasted(blocks, url), env, ROOT)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert "published" in lines, "jobs.publish answered the job, published"
    assert any('"title":"Backend engineer"' in line for line in lines), "jobs.list found it"
    searched = [line for line in lines if '"facets"' in line]
    assert len(searched) == 1 and '"title":"Backend engineer"' in searched[0], "jobs.search found it as typed"
    assert '"total":1' in searched[0] and '{"value":"Berlin","count":1}' in searched[0], "exact total and facets"
    assert "boss@example.com" in lines, "profile.me with the session token"
    assert "resume.txt" in lines, "applications.create answered the application with its résumé"
    assert lines[-2:] == ["Grace Hopper", "Compilers and programming languages"], "the employer read the résumé"
    replayed = [line.lower() for line in lines if line.lower().startswith("idempotent-replayed")]
    assert replayed == ["idempotent-replayed: true"], "the second call with the Idempotency-Key was a replay"


def test_the_recruiting_loops_walkthrough_runs_as_pasted(databases: Databases, tmp_path: Path) -> None:
    """docs/interviews.md's walkthrough, after the quickstart, on a server of its own (the quickstart's people and
    job are made again): a round from applying to hired, as pasted."""
    env = {
        **{name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "PUBLIC_URL")},
        "DATABASE_URL": databases.copy(),
        "DATA_DIR": str(tmp_path),
        "SERVICE_SECRET_KEY": TEST_SECRET_KEY,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bin" / "serve"), "--port", str(port)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        eventually(serving(f"{url}/healthz", server), "bin/serve's /healthz", timeout=60)
        blocks = shell_blocks(ROOT / "README.md", "## Quickstart") + shell_blocks(
            ROOT / "docs" / "interviews.md", "## Walkthrough"
        )
        done = run(pasted(blocks, url), env, ROOT)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    lines = done.stdout.splitlines()
    walked = lines[lines.index("Compilers and programming languages") + 1 :]
    assert walked[:3] == ["published", "grace@example.com", "interview_scheduled"], walked
    assert re.fullmatch(r"[0-9a-f-]{36}", walked[3]), "the double booking named the interview it met"
    assert walked[4:11] == ["strong_yes", "completed", "approved", "sent", "accepted", "hired", "cancelled"]
    assert re.fullmatch(rf"{url}/calendar/[A-Za-z0-9_-]+\.ics", walked[11]), walked[11]


def test_the_readme_receiver_verifies_our_deliveries_both_ways() -> None:
    """The README's two checks, run as printed, accept the headers an attempt is sent with (during a rotation
    overlap too) and refuse a changed body."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Receiving webhooks") :]
    code = re.search(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert code is not None, "the section shows its code"
    receiver: dict[str, Any] = {}
    exec(compile(code.group(1), "README.md", "exec"), receiver)  # noqa: S102 - the README's own example
    body = b'{"event": "job.published", "data": {}, "timestamp": "2026-11-25T06:00:00Z", "idempotency_key": "e1"}'
    old, new = signatures.new_secret(), signatures.new_secret()
    for secret, previous, holder in [(new, None, new), (new, old, old), (new, old, new)]:
        headers = signatures.signed_headers(
            event_id="e1", timestamp=int(time.time()), body=body, secret=secret, previous_secret=previous
        )
        assert receiver["verified_event"](holder, body, headers) == json.loads(body)
        assert receiver["signed_by_us"](holder, body, headers)
        assert receiver["verified_event"](holder, body + b" ", headers) is None
        assert not receiver["signed_by_us"](holder, body + b" ", headers)
    assert receiver["verified_event"](signatures.new_secret(), body, headers) is None, "another secret fails"


def test_the_oauth_walkthrough_runs_as_pasted(served: tuple[str, dict[str, str]]) -> None:
    """The walkthrough's command waits for a browser: here the test signs in and presses Allow, as a person
    would in the browser the command asked them to open, while the rest of the blocks run on."""
    url, env = served
    field = shell_blocks(ROOT / "README.md", "## Quickstart")[0]
    setup, demo, after = shell_blocks(ROOT / "docs" / "oauth.md", "## Walkthrough")
    prepared = run(pasted([field, setup], url), env, ROOT)
    assert prepared.returncode == 0, prepared.stderr
    waiting = subprocess.Popen(
        ["bash", "-c", pasted([field, demo, after], url)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert waiting.stderr is not None
    address = ""
    for line in waiting.stderr:
        if "/oauth/authorize?" in line:
            address = line.strip()
            break
    assert address.startswith(f"{url}/oauth/authorize?"), "the command printed the address to open"
    person = User("", "", "ada@example.com", "a candidate password", "candidate", "")
    browser = Browser(url)
    signed_in = browser.sign_in(person, address.removeprefix(url))
    consent = browser.get(location(signed_in))
    back = browser.submit(consent, "/oauth/authorize", button=("decision", "approve"))
    assert location(back).startswith("http://127.0.0.1:8765/callback?")
    httpx.get(location(back), timeout=30)  # the browser comes back to the command's loopback address
    browser.close()
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    assert "ada@example.com" in out.splitlines(), "the app read the person's profile"
    assert '"access_token"' in out, "the refresh gave a new pair"


# --- the first hour: another port, the first page after signing in, "Try it out" --------------------------------


def test_serve_on_another_port_points_everything_there(served: tuple[str, dict[str, str]]) -> None:
    """`bin/serve --port N` without PUBLIC_URL: the document's server, the OAuth issuer and the panel's links are
    at port N, not 8000."""
    url, _ = served
    assert httpx.get(f"{url}/openapi.json").json()["servers"] == [{"url": url}]
    metadata = httpx.get(f"{url}/.well-known/oauth-authorization-server").json()
    assert metadata["issuer"] == url and metadata["token_endpoint"] == f"{url}/oauth/token"


def test_serve_on_a_busy_port_says_so_in_one_line(served: tuple[str, dict[str, str]]) -> None:
    url, env = served
    port = url.rsplit(":", 1)[1]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "serve"), "--port", port],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stdout == "", "no banner"
    assert (
        done.stderr
        == f"error: port {port} on 127.0.0.1 is in use (another bin/serve?): stop that, or choose another --port\n"
    )


def test_serve_help_describes_host_and_port() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "serve"), "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "the address to listen on" in done.stdout and "the port to listen on" in done.stdout


@pytest.mark.parametrize(
    ("role", "landing", "heading"),
    [("employer", "/panel", "<h1>First Hour Ltd</h1>"), ("candidate", "/me", '<h1 id="home-title">Hello</h1>')],
)
def test_signing_in_lands_on_a_page_of_ones_own(
    served: tuple[str, dict[str, str]], role: str, landing: str, heading: str
) -> None:
    url, env = served
    email = f"first-hour-{role}@example.com"
    made = run(
        f"bin/admin create-user --email {email} --password 'a first hour password' --role {role}"
        " --account-name 'First Hour Ltd'",
        env,
        ROOT,
    )
    assert made.returncode == 0, made.stderr
    browser = Browser(url)
    try:
        signed_in = browser.sign_in(User("", "", email, "a first hour password", role, ""))
        assert location(signed_in) == "/web"
        first = browser.follow(signed_in)
        assert location(first) == landing
        page = browser.follow(first)
        assert page.status_code == 200 and heading in page.text
    finally:
        browser.close()


def test_docs_try_it_out_sends_the_example_of_jobs_create(served: tuple[str, dict[str, str]]) -> None:
    """What "Try it out" of `POST /v1/jobs.create` at `/docs` sends as it stands: the document's example, which
    the service takes (a draft, seen by its account only)."""
    url, env = served
    assert httpx.get(f"{url}/docs").status_code == 200
    operation = httpx.get(f"{url}/openapi.json").json()["paths"]["/v1/jobs.create"]["post"]
    example = operation["requestBody"]["content"]["application/json"]["example"]
    assert example["title"] == "Backend engineer"
    made = run(
        "bin/admin create-user --email try-it-out@example.com --password 'a try it out password' --role employer"
        " && bin/admin create-api-key --email try-it-out@example.com --name docs --scopes write:jobs",
        env,
        ROOT,
    )
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout.splitlines()[-1])["key"]
    answer = httpx.post(f"{url}/v1/jobs.create", json=example, headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] | example == answer.json()["result"], "the job is the example"


MARKDOWN_NAME = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")


def test_every_document_a_text_names_is_in_the_repository() -> None:
    """README, docs, commands' help and code point only at documents a clone has (what the service promises is in
    docs/, not in a file a user does not get)."""
    texts = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *(p for p in ROOT.glob("bin/*") if p.is_file())]
    texts += [*ROOT.glob("rpc/**/*.py"), *ROOT.glob("rpc/**/*.html"), *ROOT.glob("procedures/**/*.*")]
    texts += [ROOT / "schema.sql", *ROOT.glob("migrations/*.sql"), *ROOT.glob("bench/*.py")]
    missing = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in texts
        if path.suffix in ("", ".md", ".py", ".html", ".sql")
        for name in MARKDOWN_NAME.findall(path.read_text())
        if not (ROOT / name).exists() and not (path.parent / name).exists()
    ]
    assert missing == []


# Documents of the people who ordered the service, which a clone does not have (spelt so as not to match here).
_OUTSIDE = re.compile(r"(CONTRACT|DESIGN|SPEC)\.md|\.\./shared")
_NOT_OURS = {".git", ".venv", ".data", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def test_no_file_names_a_document_the_repository_does_not_hold() -> None:
    """What the service promises is written in its own docs/; no comment, doc or help text sends a reader to a
    document outside the repository."""
    named = [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*")
        if path.is_file()
        and not _NOT_OURS & set(path.relative_to(ROOT).parts)
        and path.suffix in ("", ".py", ".md", ".sql", ".html", ".txt", ".toml", ".cfg", ".sh", ".json", ".xml")
        and _OUTSIDE.search(path.read_text(errors="replace"))
    ]
    assert named == []


# A section number is cited only with the public standard it belongs to ("RFC 6749 section 5.2"); a section sign
# and a number alone, or the word and a number of nothing named, points into a document a clone does not have.
_SECTION = re.compile(r"\u00a7|\bsections? \d", re.IGNORECASE)
_OF_A_STANDARD = re.compile(
    r"(RFC \d+|OpenID Connect Core|ODF 1\.2|WHATWG HTML|OpenAPI 3\.1),?\s+sections? \d[\d.]*(\s+and\s+\d[\d.]*)?"
)


def test_no_file_cites_a_section_of_a_document_it_does_not_name() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    cited = []
    for name in filter(None, tracked.decode().split("\0")):
        data = (ROOT / name).read_bytes() if (ROOT / name).is_file() else b""
        if b"\0" in data:
            continue  # a picture
        # The standards' citations blanked out (their lines kept), what is left may cite no section.
        text = _OF_A_STANDARD.sub(lambda m: re.sub(r"\S", "-", m.group()), data.decode(errors="replace"))
        cited += [f"{name}:{text.count(chr(10), 0, found.start()) + 1}" for found in _SECTION.finditer(text)]
    assert cited == [], "say the thing itself, or point to the page of docs/ that says it"
