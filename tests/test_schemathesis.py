"""A short schemathesis pass over /openapi.json with every check (`--checks all`), as an employer's API key with
every scope and as a candidate's session: no server error, no answer outside the document, no request the
document allows refused or one it forbids accepted. What the document cannot say is told to schemathesis by
tests/schemathesis_hooks.py. The calls stay within each account's request budget (`--rate-limit`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from procedures.vocabulary import SCOPES
from tests.support import Admin, LiveServer

ROOT = Path(__file__).resolve().parent.parent
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"


def fuzz(live: LiveServer, token: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    command = [
        str(SCHEMATHESIS), "run", f"{live.url}/openapi.json",
        "--checks", "all",
        "--header", f"Authorization: Bearer {token}",
        "--max-examples", "3",
        "--phases", "examples,coverage,fuzzing",
        "--rate-limit", "900/m",
        "--workers", "1",
        "--seed", "20261124",
        # Its `confirm` must be the caller's own e-mail, state no schema holds; the right one would erase the
        # fuzzing user midway. tests/test_privacy.py covers it.
        "--exclude-path", "/v1/profile.delete",
        # A file is accepted by its content (PDF, DOCX, ODT, UTF-8 text), which a schema of bytes cannot say, and
        # the fuzzer's own files (a PNG) are rightly refused; tests/test_files.py covers acceptance and refusals.
        "--exclude-path", "/v1/files.upload",
    ]  # fmt: skip
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks", "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.parametrize("who", ["employer key", "candidate session"])
def test_schemathesis_finds_nothing(live: LiveServer, admin: Admin, tmp_path: Path, who: str) -> None:
    if who == "employer key":
        token = admin.api_key(admin.user("employer"), scopes=",".join(SCOPES), mode="live")["key"]
    else:
        token = admin.user("candidate").token
    done = fuzz(live, token, tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
