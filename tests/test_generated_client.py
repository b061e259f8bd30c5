"""A Python client generated from the live /openapi.json by openapi-python-client (which needs no network), driven
against the server: its classes bear the document's plain names, and jobs, applications and errors go through it
as any integrator's would."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tests.support import Admin, LiveServer

BIN = Path(sys.executable).parent
PACKAGE = "hire_client"


@pytest.fixture
def hire(live: LiveServer, tmp_path: Path) -> Iterator[ModuleType]:
    """The generated package, imported from `tmp_path` (and forgotten afterwards)."""
    document = tmp_path / "openapi.json"
    document.write_bytes(httpx.get(f"{live.url}/openapi.json").content)
    generate = [str(BIN / "openapi-python-client"), "generate", "--path", str(document), "--meta", "none"]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # its ruff post-hooks
    done = subprocess.run(
        [*generate, "--output-path", str(tmp_path / PACKAGE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def test_the_generated_models_have_plain_names(hire: ModuleType) -> None:
    models = importlib.import_module(f"{PACKAGE}.models")
    for name in ("Job", "JobResult", "JobSummaryPage", "JobSummaryPageResult", "ApplicationResult", "ErrorBody"):
        assert isinstance(getattr(models, name), type), name
    modules = {path.stem for path in (Path(models.__file__).parent).glob("*.py")}
    assert not [name for name in modules if "rpc_core" in name or "procedures_" in name], "no module paths"


def test_jobs_applications_and_errors_through_the_generated_client(
    hire: ModuleType, live: LiveServer, admin: Admin
) -> None:
    api = importlib.import_module(f"{PACKAGE}.api")
    models = importlib.import_module(f"{PACKAGE}.models")
    jobs = {name: importlib.import_module(f"{api.__name__}.jobs.jobs_{name}") for name in ("create", "publish")}
    reads = {name: importlib.import_module(f"{api.__name__}.jobs.jobs_{name}") for name in ("list", "get", "get_post")}
    applications = importlib.import_module(f"{api.__name__}.applications.applications_create")
    listing = importlib.import_module(f"{api.__name__}.applications.applications_list")
    employer = hire.AuthenticatedClient(base_url=live.url, token=admin.user("employer").token)
    candidate = hire.AuthenticatedClient(base_url=live.url, token=admin.user("candidate").token)

    body = models.CreateJob.from_dict(
        {"title": "Backend engineer", "company": "ACME", "location": "Berlin", "employment_type": "full_time"}
    )
    created = jobs["create"].sync(client=employer, body=body, idempotency_key=str(uuid.uuid4()))
    assert isinstance(created, models.JobResult), created
    job = created.result
    assert (job.title, job.status.value) == ("Backend engineer", "draft")
    published = jobs["publish"].sync(client=employer, body=models.IdParams(id=job.id))
    assert isinstance(published, models.JobResult) and published.result.status.value == "published"

    page = reads["list"].sync(client=employer, mine=True, per_page=5)
    assert isinstance(page, models.JobSummaryPageResult), page
    assert isinstance(page.result, models.JobSummaryPage)
    assert [summary.id for summary in page.result.data] == [job.id] and page.result.total == 1
    one = reads["get"].sync(client=candidate, id=job.id)
    assert isinstance(one, models.JobResult) and one.result.id == job.id
    posted = reads["get_post"].sync(client=candidate, body=models.IdParams(id=job.id))  # the read's POST
    assert isinstance(posted, models.JobResult) and posted.result.to_dict() == one.result.to_dict()

    applied = applications.sync(
        client=candidate,
        body=models.CreateApplication(job_id=job.id, cover_letter="Six years of Python services."),
        idempotency_key=str(uuid.uuid4()),
    )
    assert isinstance(applied, models.ApplicationResult), applied
    received = listing.sync(client=employer, job_id=job.id)
    assert isinstance(received, models.ApplicationPageResult)
    assert [application.id for application in received.result.data] == [applied.result.id]

    missing = reads["get"].sync_detailed(client=employer, id=str(uuid.uuid4()))
    assert missing.status_code == 404 and isinstance(missing.parsed, models.ErrorBody)
    assert missing.parsed.error.code == "not_found"
    deep = reads["list"].sync_detailed(client=employer, page=1_000, per_page=100)
    assert deep.status_code == 422 and isinstance(deep.parsed, models.ErrorBody)
    assert deep.parsed.error.code == "invalid_params"
    twice = applications.sync_detailed(client=candidate, body=models.CreateApplication(job_id=job.id))
    assert twice.status_code == 409 and twice.parsed.error.code == "conflict"
