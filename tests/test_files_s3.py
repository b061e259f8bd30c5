"""The S3-compatible file store (FILES_STORE=s3://bucket/prefix), against moto's standalone S3 server started
on a free loopback port: uploads land as objects under the prefix, downloads stream them back, erasure and the
sweep delete them, and objects no File names are swept."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rpc.files.s3 import S3Store
from tests.files_support import DOCX, PDF, run_sweep, stored, upload
from tests.support import Admin, LiveServer, User, eventually, free_port, ok, settings_for

BUCKET = "hire-files"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on a loopback port of its own, with an empty bucket."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:

        def bucket_made() -> bool:
            assert process.poll() is None, "moto's server exited"
            try:
                httpx.put(f"{endpoint}/{BUCKET}", timeout=1).raise_for_status()
            except httpx.TransportError:
                return False
            return True

        eventually(bucket_made, "moto's server and its bucket", timeout=30)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def s3_settings(database: str, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return settings_for(
        database,
        DATA_DIR=str(tmp_path_factory.mktemp("data")),
        FILES_STORE=f"s3://{BUCKET}/resumes",
        S3_ENDPOINT_URL=s3_endpoint,
        S3_REGION="us-east-1",
        S3_ACCESS_KEY_ID="testing",
        S3_SECRET_ACCESS_KEY="testing",
    )


@pytest.fixture(scope="module")
def s3_client(s3_settings: Any) -> Iterator[httpx.Client]:
    with LiveServer(s3_settings) as server, server.client() as http:
        yield http


@pytest.fixture(scope="module")
def store(s3_settings: Any) -> S3Store:
    return S3Store(s3_settings)


def _objects(endpoint: str) -> set[str]:
    """The bucket's keys, as S3's own listing says."""
    listing = httpx.get(f"{endpoint}/{BUCKET}", params={"list-type": "2"}).text
    return {part.split("</Key>")[0] for part in listing.split("<Key>")[1:]}


def _fetch(client: httpx.Client, url: str) -> httpx.Response:
    parts = httpx.URL(url)
    return client.get(parts.path, params=parts.params)


def test_an_upload_is_an_object_under_the_prefix_and_comes_back_exact(
    s3_client: httpx.Client, s3_endpoint: str, candidate: User
) -> None:
    made = ok(upload(s3_client, candidate, DOCX, "cv.docx"))
    assert f"resumes/{made['id']}" in _objects(s3_endpoint)
    link = ok(s3_client.post("/v1/files.get", json={"id": made["id"]}, headers=candidate.auth))["download_url"]
    served = _fetch(s3_client, link)
    assert served.status_code == 200 and served.content == DOCX
    assert served.headers["content-security-policy"] == "sandbox"


def test_erasure_and_the_sweep_delete_the_objects(
    s3_client: httpx.Client, s3_endpoint: str, admin: Admin, database: str, store: S3Store
) -> None:
    person = admin.user("candidate")
    made = ok(upload(s3_client, person, PDF))
    ok(s3_client.post("/v1/profile.delete", json={"confirm": person.email}, headers=person.auth))
    assert f"resumes/{made['id']}" in _objects(s3_endpoint)  # until the sweep, after the erasure committed
    run_sweep(database, store)
    assert f"resumes/{made['id']}" not in _objects(s3_endpoint)


def test_objects_no_file_names_are_swept_once_old_and_others_left_alone(
    s3_endpoint: str, database: str, store: S3Store, candidate: User, s3_client: httpx.Client
) -> None:
    kept = ok(upload(s3_client, candidate, PDF))["id"]
    stray = str(uuid.uuid4())
    httpx.put(f"{s3_endpoint}/{BUCKET}/resumes/{stray}", content=b"never committed").raise_for_status()
    httpx.put(f"{s3_endpoint}/{BUCKET}/resumes/not-ours.txt", content=b"someone else's").raise_for_status()
    assert {stray, kept} <= stored(store)
    run_sweep(database, store, strays=True)
    assert stray in stored(store)  # young: maybe an upload in flight
    run_sweep(database, store, strays=True, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=2))
    assert stray not in stored(store) and kept in stored(store)
    assert "resumes/not-ours.txt" in _objects(s3_endpoint)
