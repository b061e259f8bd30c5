"""`bin/serve --access-log` never writes a token link in full (docs/security.md): the mailed links' `?token=`,
the alerts' one-click unsubscribe, a calendar feed's address, a download link's signature and a one-time reveal
are written redacted, by either HTTP server, as read from the real process's output."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid

import httpx
import pytest

from rpc.ops.cli import SERVERS
from rpc.web.access_log import REDACTED
from tests.conftest import Databases
from tests.support import eventually, free_port, serving
from tests.test_cli import ROOT, environment

SECRET = "S3cr3tT0k3n" + "x" * 32  # no address of the service holds this but where a token goes


def token_links() -> dict[str, str]:
    """Each address that carries a token, and how it is written redacted."""
    file_id = uuid.uuid4()
    return {
        f"/web/verify?token={SECRET}": f"/web/verify?{REDACTED}",
        f"/web/reset?token={SECRET}": f"/web/reset?{REDACTED}",
        f"/web/invite?token={SECRET}": f"/web/invite?{REDACTED}",
        f"/alerts/unsubscribe/{SECRET}": f"/alerts/unsubscribe/{REDACTED}",
        f"/calendar/{SECRET}.ics": f"/calendar/{REDACTED}.ics",
        f"/files/{file_id}/download?expires=1&signature={SECRET}": f"/files/{file_id}/download?{REDACTED}",
        f"/panel/api-keys?reveal={SECRET}": f"/panel/api-keys?reveal={REDACTED}",
    }


@pytest.mark.parametrize("server", SERVERS)
def test_token_links_are_never_written_in_full_to_the_access_log(databases: Databases, server: str) -> None:
    port = free_port()
    env = environment(DATABASE_URL=databases.copy())
    command = [sys.executable, str(ROOT / "bin" / "serve"), "--port", str(port), "--server", server]
    process = subprocess.Popen(
        [*command, "--no-worker", "--access-log"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    links = token_links()
    try:
        eventually(serving(f"{url}/healthz", process), "bin/serve's /healthz", timeout=60)
        with httpx.Client(base_url=url, timeout=30) as http:
            for link in links:
                http.get(link)
            http.get("/jobs?q=welder")
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert '"GET /jobs' in output, output[-2000:]  # the log is on
    assert SECRET not in output, [line for line in output.splitlines() if SECRET in line]
    for redacted in links.values():  # granian writes no query by default
        assert (redacted if server == "uvicorn" else redacted.partition("?")[0]) in output, redacted
