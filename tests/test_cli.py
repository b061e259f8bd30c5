"""The operator commands as a person runs them: processes, JSON on stdout, reasons on stderr."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import pytest

from rpc.ops import cli
from rpc.ops.cli import SERVERS
from tests.conftest import Databases
from tests.support import TEST_SECRET_KEY, Admin, bearer, eventually, free_port, serving, settings_for

ROOT = Path(__file__).resolve().parent.parent
SECRET = TEST_SECRET_KEY  # the template database's signing key is sealed with it
PASSWORD = "a long enough password"  # bin/admin create-user holds it to the web's rule


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "TEST_DATABASE_URL")}
    return {**env, "SERVICE_SECRET_KEY": SECRET, **extra}


def run(command: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bin" / command), *args], env=env, capture_output=True, text=True, timeout=120
    )


def ok(command: str, *args: str, env: dict[str, str]) -> dict[str, Any]:
    done = run(command, *args, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout
    result: dict[str, Any] = json.loads(lines[0])
    return result


@pytest.fixture(scope="module")
def db_env(databases: Databases) -> dict[str, str]:
    return environment(DATABASE_URL=databases.copy())


def test_admin_commands_print_one_json_object(db_env: dict[str, str]) -> None:
    created = ok("admin", "create-user", "--email", "Boss@Example.test", "--password", PASSWORD, "--role", "employer",
                 "--account-name", "ACME", env=db_env)  # fmt: skip
    assert set(created) == {"user_id", "account_id"}
    colleague = ok("admin", "create-user", "--email", "c@example.test", "--password", PASSWORD, "--role", "employer",
                   "--account-id", created["account_id"], env=db_env)  # fmt: skip
    assert colleague["account_id"] == created["account_id"]
    assert set(ok("admin", "mint-token", "--email", "boss@example.test", env=db_env)) == {"access_token"}
    key = ok("admin", "create-api-key", "--email", "boss@example.test", "--name", "ci", "--scopes",
             "read:jobs,write:jobs", env=db_env)  # fmt: skip
    assert set(key) == {"id", "key"}
    assert key["key"].startswith("service_test_"), "create-api-key defaults to --mode test"
    revoked = ok("admin", "revoke-api-key", "--id", key["id"], env=db_env)
    assert revoked["id"] == key["id"]
    assert revoked["revoked_at"].endswith("Z")
    assert ok("admin", "set-plan", "--email", "boss@example.test", "--plan", "pro", env=db_env) == {
        "account_id": created["account_id"],
        "plan": "pro",
    }
    hook = ok("admin", "create-webhook", "--email", "boss@example.test", "--url", "https://hooks.example.test/in",
              "--events", "job.published", env=db_env)  # fmt: skip
    assert ok("admin", "delete-webhook", "--id", hook["id"], env=db_env) == {"id": hook["id"], "deleted": True}
    assert "no such object" in run("admin", "delete-webhook", "--id", hook["id"], env=db_env).stderr
    by_operator = [("webhook.created", "operator", None), ("webhook.deleted", "operator", None)]
    url = db_env["DATABASE_URL"]
    assert Admin(url, settings_for(url)).audit_trail(hook["id"]) == by_operator


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["create-user", "--email", "x@example.test", "--password", PASSWORD, "--role", "owner"], "--role"),
        (["create-user", "--email", "x@example.test", "--password", "short", "--role", "employer"], "10 characters"),
        (
            ["create-user", "--email", "same@example.test", "--password", "same@example.test", "--role", "employer"],
            "may not be your e-mail address",
        ),
        (["mint-token", "--email", "nobody@example.test"], "no user"),
        (["set-plan", "--email", "nobody@example.test", "--plan", "pro"], "no user"),
        (["revoke-api-key", "--id", "not-an-id"], "not an id"),
        (["delete-user", "--email", "nobody@example.test"], "no user with e-mail nobody@example.test"),
        (
            [
                "create-user",
                "--email",
                "y@example.test",
                "--password",
                PASSWORD,
                "--role",
                "employer",
                "--account-id",
                "00000000-0000-0000-0000-000000000000",
            ],
            "no account",
        ),
    ],
)
def test_admin_failures_exit_non_zero_with_a_reason(db_env: dict[str, str], args: list[str], reason: str) -> None:
    done = run("admin", *args, env=db_env)
    assert done.returncode != 0
    assert done.stdout == ""
    assert reason in done.stderr


def test_api_keys_are_for_employers_and_admins(db_env: dict[str, str]) -> None:
    ok(
        "admin",
        "create-user",
        "--email",
        "cand@example.test",
        "--password",
        PASSWORD,
        "--role",
        "candidate",
        env=db_env,
    )
    done = run("admin", "create-api-key", "--email", "cand@example.test", "--name", "k", "--scopes", "read:jobs",
               env=db_env)  # fmt: skip
    assert done.returncode != 0
    assert "employers and admins" in done.stderr


def test_mint_token_is_refused_in_production(db_env: dict[str, str]) -> None:
    env = {
        **db_env,
        "SERVICE_ENV": "production",
        "SMTP_URL": "smtp://127.0.0.1:9",
        "PUBLIC_URL": "https://hire.example",
    }
    done = run("admin", "mint-token", "--email", "boss@example.test", env=env)
    assert done.returncode != 0
    assert "mint-token is refused on a production deployment" in done.stderr


def test_signing_keys_rotate_and_retire_in_order(databases: Databases) -> None:
    """A new key first; the key that signs is never retired; an older one only once its tokens have run out
    (or with --force, which ends them)."""
    env = environment(DATABASE_URL=databases.copy())
    with psycopg.connect(env["DATABASE_URL"]) as conn:
        (old_kid,) = conn.execute("SELECT kid FROM signing_keys WHERE retired_at IS NULL").fetchone() or ("",)
    new_kid = ok("admin", "rotate-signing-key", env=env)["kid"]
    assert new_kid != old_kid
    signing = run("admin", "retire-signing-key", "--kid", new_kid, env=env)
    assert signing.returncode != 0 and "the key that signs now" in signing.stderr
    young = run("admin", "retire-signing-key", "--kid", old_kid, env=env)
    assert young.returncode != 0 and "--force" in young.stderr, "tokens it signed may still be in use"
    unknown = run("admin", "retire-signing-key", "--kid", "nope", env=env)
    assert unknown.returncode != 0 and "no unretired signing key 'nope'" in unknown.stderr
    assert ok("admin", "retire-signing-key", "--kid", old_kid, "--force", env=env)["kid"] == old_kid
    with psycopg.connect(env["DATABASE_URL"]) as conn:
        unretired = conn.execute("SELECT kid FROM signing_keys WHERE retired_at IS NULL").fetchall()
    assert unretired == [(new_kid,)]


def _audit_entries(url: str) -> list[tuple[int, str, str | None]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT id, action, target_id FROM audit_entries ORDER BY id").fetchall()


def test_verify_audit_prints_the_verdict_and_fails_on_a_changed_entry(databases: Databases) -> None:
    env = environment(DATABASE_URL=databases.copy())
    ok("admin", "create-user", "--email", "a@example.test", "--password", PASSWORD, "--role", "employer", env=env)
    ok("admin", "set-plan", "--email", "a@example.test", "--plan", "pro", env=env)
    key = ok("admin", "create-api-key", "--email", "a@example.test", "--name", "k", "--scopes", "read:jobs", env=env)
    entries = _audit_entries(env["DATABASE_URL"])
    assert ok("admin", "verify-audit", env=env) == {"entries": len(entries), "ok": True}
    victim = next(entry_id for entry_id, action, target in entries if target == key["id"])
    with psycopg.connect(env["DATABASE_URL"]) as conn:  # as a superuser could: the append-only trigger off
        conn.execute("SET session_replication_role = replica")
        conn.execute("UPDATE audit_entries SET client_address = '203.0.113.9' WHERE id = %s", (victim,))
    done = run("admin", "verify-audit", env=env)
    assert done.returncode != 0
    verdict = json.loads(done.stdout)
    assert verdict == {
        "entries": [entry[0] for entry in entries].index(victim),
        "ok": False,
        "entry": {"id": str(victim), "action": "api_key.created", "reason": verdict["entry"]["reason"]},
    }
    assert "do not match its hash" in verdict["entry"]["reason"]
    assert f"entry {victim}" in done.stderr


def test_delete_user_erases_the_person(db_env: dict[str, str]) -> None:
    made = ok("admin", "create-user", "--email", "Gone@Example.test", "--password", PASSWORD, "--role", "candidate",
              env=db_env)  # fmt: skip
    assert ok("admin", "delete-user", "--email", "gone@example.test", env=db_env) == {
        "user_id": made["user_id"],
        "deleted": True,
    }
    with psycopg.connect(db_env["DATABASE_URL"]) as conn:
        row = conn.execute(
            "SELECT email, password_hash, deleted_at IS NOT NULL FROM users WHERE id = %s", (made["user_id"],)
        ).fetchone()
        entry = conn.execute(
            "SELECT actor_kind, actor_id FROM audit_entries WHERE action = 'user.deleted' AND target_id = %s",
            (made["user_id"],),
        ).fetchall()
    assert row == (None, None, True)
    assert entry == [("operator", None)]
    again = run("admin", "delete-user", "--email", "gone@example.test", env=db_env)
    assert again.returncode != 0 and again.stdout == "" and "no user with e-mail" in again.stderr
    back = ok("admin", "create-user", "--email", "gone@example.test", "--password", PASSWORD, "--role", "candidate",
              env=db_env)  # fmt: skip
    assert back["user_id"] != made["user_id"], "the e-mail may come back as a new person"


def test_delete_user_refuses_the_last_member_of_a_paying_account(db_env: dict[str, str]) -> None:
    made = ok("admin", "create-user", "--email", "payer@example.test", "--password", PASSWORD, "--role", "employer",
              "--account-name", "Paying", env=db_env)  # fmt: skip
    url = db_env["DATABASE_URL"]
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO subscriptions (account_id, plan, status, current_period_start, current_period_end)"
            " VALUES (%s, 'pro', 'active', now(), now() + interval '30 days')",
            (made["account_id"],),
        )
    before = _audit_entries(url)
    with psycopg.connect(url) as conn:
        person = conn.execute("SELECT * FROM users WHERE id = %s", (made["user_id"],)).fetchone()
    done = run("admin", "delete-user", "--email", "payer@example.test", env=db_env)
    assert done.returncode != 0 and done.stdout == ""
    assert "last member of an account with an active subscription" in done.stderr
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT * FROM users WHERE id = %s", (made["user_id"],)).fetchone() == person
        assert conn.execute("SELECT name FROM accounts WHERE id = %s", (made["account_id"],)).fetchone() == ("Paying",)
    assert _audit_entries(url) == before, "nothing recorded either"


def test_serve_refuses_several_workers_with_memory_counters(db_env: dict[str, str]) -> None:
    done = run("serve", "--workers", "2", env=db_env)
    assert done.returncode != 0
    assert "RATE_LIMIT_STORAGE" in done.stderr


def test_serve_as_root_without_useradd_ends_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Root whose PATH lacks /usr/sbin (`su` without `-`), on a machine without pgserver's system user yet: one
    line that says what to do, not pgserver's traceback from `useradd` not found."""
    for name, value in environment(DATA_DIR=str(tmp_path / "data"), PATH="/usr/bin:/bin").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(pwd, "getpwnam", _nobody)  # no system user for PostgreSQL yet
    with pytest.raises(SystemExit) as exited:
        cli.serve(["--port", str(free_port())])
    assert exited.value.code == 1
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith("error: run as root, the embedded PostgreSQL runs as")
    assert "PATH=$PATH:/usr/sbin" in said and "DATABASE_URL" in said
    assert not (tmp_path / "data" / "pgdata").exists(), "nothing was started"


def _nobody(name: str) -> Any:
    raise KeyError(name)


def postmasters_of(data_dir: Path) -> list[int]:
    """Pids of PostgreSQL servers still running on a data directory below `data_dir`."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(proc.info["cmdline"] or [])
        if "postgres" in command and f"-D {data_dir}" in command:
            found.append(proc.info["pid"])
    return found


@pytest.fixture(params=SERVERS)
def bare_machine_serve(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, str], float]]:
    """`bin/serve` with no DATABASE_URL: the embedded PostgreSQL under DATA_DIR, under each HTTP server."""
    env = environment(DATA_DIR=str(tmp_path / "data"))
    port = free_port()
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bin" / "serve"), "--port", str(port), "--server", request.param],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        eventually(serving(f"{url}/healthz", process), "bin/serve's /healthz", timeout=60)
        yield url, env, time.monotonic() - started
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert not postmasters_of(tmp_path / "data"), "bin/serve stopped its embedded PostgreSQL on SIGTERM"
    assert process.stdout is not None
    banner = json.loads(process.stdout.readline())
    assert banner["listening"] == url
    assert "embedded PostgreSQL" in banner["database"]
    assert (banner["panel"], banner["api_reference"]) == (f"{url}/panel", f"{url}/docs")
    assert banner["first_step"].startswith("bin/admin create-user"), "a new database says what to do first"


def test_bare_machine_serves_jobs_list_with_an_admin_made_key(
    bare_machine_serve: tuple[str, dict[str, str], float],
) -> None:
    url, env, startup = bare_machine_serve
    home = httpx.get(f"{url}/")
    assert home.status_code == 200 and 'href="/docs"' in home.text and 'href="/panel"' in home.text
    print(f"bin/serve with the embedded database answered /healthz after {startup:.2f} s")
    ok("admin", "create-user", "--email", "e@example.test", "--password", PASSWORD, "--role", "employer", env=env)
    key = ok("admin", "create-api-key", "--email", "e@example.test", "--name", "n", "--scopes", "read:jobs", env=env)
    response = httpx.get(f"{url}/v1/jobs.list", headers=bearer(key["key"]))
    assert response.status_code == 200
    assert response.json() == {"result": {"data": [], "total": 0, "page": 1, "per_page": 20}}
