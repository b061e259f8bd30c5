"""Files (docs/files.md): upload accepted by content, size limits, signed downloads and their headers, who may
read a file, files on applications and profiles, export, erasure, retention and the sweep."""

from __future__ import annotations

import datetime as dt
import hashlib
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from procedures.privacy import PRIVACY
from rpc.core.multipart import clean_filename
from rpc.files.links import DownloadLinks
from rpc.files.store import EmbeddedStore
from rpc.privacy.retention import RetentionSettings, retain
from tests.files_support import (
    DOCX,
    DOCX_TYPE,
    ODS,
    ODT,
    ODT_TYPE,
    PDF,
    TEXT,
    XLSX,
    ZIP,
    raw_request,
    run_sweep,
    stored,
    upload,
)
from tests.support import Admin, LiveServer, User, ok, refused

Call = Callable[..., httpx.Response]
FILE_KEYS = {"id", "filename", "content_type", "size", "sha256", "created_at"}


@pytest.fixture(scope="module")
def store(settings: Any) -> EmbeddedStore:
    return EmbeddedStore(settings.files_path)


def _job(call: Call, owner: User) -> str:
    made = ok(call("jobs.create", owner, title=f"job-{uuid.uuid4().hex[:8]}", company="Acme", location="Izmir"))
    return str(ok(call("jobs.publish", owner, id=made["id"]))["id"])


def _uploaded(client: httpx.Client, who: User, data: bytes = PDF, filename: str = "cv.pdf") -> dict[str, Any]:
    return ok(upload(client, who, data, filename))  # type: ignore[no-any-return]


# --- accepted by content --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "filename", "declared", "detected", "kept"),
    [
        (PDF, "cv.pdf", "application/pdf", "application/pdf", "cv.pdf"),
        # The name and declared type do not matter (the name gets the type's extension).
        (PDF, "cv.txt", "text/plain", "application/pdf", "cv.txt.pdf"),
        (DOCX, "cv.docx", "application/octet-stream", DOCX_TYPE, "cv.docx"),
        (ODT, "cv.odt", "application/zip", ODT_TYPE, "cv.odt"),
        (TEXT, "cv.txt", "text/plain", "text/plain; charset=utf-8", "cv.txt"),
    ],
)
def test_accepted_types_are_told_by_content(
    client: httpx.Client, candidate: User, data: bytes, filename: str, declared: str, detected: str, kept: str
) -> None:
    made = ok(upload(client, candidate, data, filename, declared))
    assert set(made) == FILE_KEYS
    assert made["content_type"] == detected
    assert made["filename"] == kept and made["size"] == len(data)
    assert made["sha256"] == hashlib.sha256(data).hexdigest()
    assert made["created_at"].endswith("Z")


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 64,  # an image
        ZIP,  # any zip is no document
        XLSX,  # an OOXML spreadsheet, not a Word document
        ODS,  # an ODF spreadsheet, not a text
        b"%PDX not quite" + b"\xff\xfe",  # not UTF-8
        b"text with a NUL \x00 inside",
        b"MZ\x90\x00\x03\x00\x00\x00",  # a program
    ],
)
def test_anything_else_is_415_naming_what_is_accepted(client: httpx.Client, candidate: User, data: bytes) -> None:
    error = refused(upload(client, candidate, data, "cv.pdf", "application/pdf"), 415, "unsupported_media_type")
    for accepted in ("PDF", "DOCX", "ODT", "UTF-8 text"):
        assert accepted in error["message"]


def test_a_zip_named_docx_with_a_forged_first_entry_is_refused(client: httpx.Client, candidate: User) -> None:
    """A signature read from the first entry's name is no proof: the archive must hold the Word document."""
    from tests.files_support import archive

    forged = archive([("word/evil.bin", b"x" * 40), ("other.txt", b"y")])
    refused(upload(client, candidate, forged, "cv.docx"), 415, "unsupported_media_type")


def test_an_empty_file_is_refused(client: httpx.Client, candidate: User) -> None:
    error = refused(upload(client, candidate, b"", "cv.txt"), 422, "invalid_params")
    assert error["details"]["errors"][0]["field"] == "file"


def test_the_body_must_be_multipart_with_one_file_part(client: httpx.Client, candidate: User) -> None:
    json_body = client.post("/v1/files.upload", json={"filename": "x", "path": "/etc/passwd"}, headers=candidate.auth)
    refused(json_body, 415, "unsupported_media_type")
    refused(client.get("/v1/files.upload", headers=candidate.auth), 405, "method_not_allowed")
    wrong_name = client.post("/v1/files.upload", files={"cv": ("cv.pdf", PDF)}, headers=candidate.auth)
    assert refused(wrong_name, 422, "invalid_params")["details"]["errors"][0]["field"] == "file"
    two = client.post(
        "/v1/files.upload", files=[("file", ("a.pdf", PDF)), ("file", ("b.pdf", PDF))], headers=candidate.auth
    )
    refused(two, 422, "invalid_params")
    no_file = client.post("/v1/files.upload", data={"file": "just a field"}, files={}, headers=candidate.auth)
    assert no_file.status_code in (415, 422)


def test_a_path_in_the_filename_is_dropped(client: httpx.Client, candidate: User) -> None:
    assert _uploaded(client, candidate, filename="C:\\fakepath\\cv.pdf")["filename"] == "cv.pdf"
    assert clean_filename("../../etc/cv\x07\u202e.pdf") == "cv.pdf"
    assert clean_filename("/") == "file"


def test_upload_takes_either_write_scope_and_no_other(client: httpx.Client, admin: Admin, employer: User) -> None:
    """Any person may upload (an employer here: API keys are theirs), with either write scope."""
    profile_key = admin.api_key(employer, scopes="write:profile")["key"]
    ok(upload(client, {"Authorization": f"Bearer {profile_key}"}, PDF))
    applications_key = admin.api_key(employer, scopes="write:applications")["key"]
    ok(upload(client, {"Authorization": f"Bearer {applications_key}"}, PDF))
    jobs_key = admin.api_key(employer, scopes="read:jobs,write:jobs")["key"]
    error = refused(upload(client, {"Authorization": f"Bearer {jobs_key}"}, PDF), 403, "insufficient_scope")
    assert error["details"]["required"] == "write:applications or write:profile"
    refused(upload(client, {}, PDF), 401, "missing_credentials")


# --- size ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(settings: Any) -> Any:
    """The service with a 1,000-byte file limit, on the same database and store."""
    import msgspec

    with LiveServer(msgspec.structs.replace(settings, files_max_bytes=1000)) as server:
        yield server


def _head(candidate: User, extra: str) -> bytes:
    return (
        f"POST /v1/files.upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {candidate.token}\r\n"
        f"Content-Type: multipart/form-data; boundary=b0undary\r\n{extra}\r\n"
    ).encode()


def test_a_declared_length_past_the_limit_is_413_before_any_byte(small: LiveServer, candidate: User) -> None:
    """The answer comes while not one byte of the 20 MB announced was sent."""
    answer = raw_request(small.port, _head(candidate, "Content-Length: 20000000\r\n"), [])
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_streamed_body_past_the_limit_is_413_before_its_end(small: LiveServer, candidate: User) -> None:
    """Chunked, with no length: the answer comes once the file passes the limit, the body never finished."""
    opening = b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'

    def chunk(data: bytes) -> bytes:
        return f"{len(data):x}\r\n".encode() + data + b"\r\n"

    head = _head(candidate, "Transfer-Encoding: chunked\r\n")
    answer = raw_request(small.port, head, [chunk(opening), chunk(b"a" * 1500)])
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_file_at_the_limit_is_taken_and_one_byte_more_is_not(small: LiveServer, candidate: User) -> None:
    with small.client() as http:
        ok(upload(http, candidate, b"a" * 1000, "cv.txt"))
        refused(upload(http, candidate, b"a" * 1001, "cv.txt"), 413, "payload_too_large")


# --- downloads -----------------------------------------------------------------------------------------------


def test_the_uploader_gets_the_exact_bytes_with_safe_headers(client: httpx.Client, candidate: User) -> None:
    made = _uploaded(client, candidate, filename='Çağrı résumé "final".pdf')
    got = ok(client.post("/v1/files.get", json={"id": made["id"]}, headers=candidate.auth))
    assert {k: v for k, v in got.items() if k != "download_url"} == made
    url = urllib.parse.urlsplit(got["download_url"])
    assert url.path == f"/files/{made['id']}/download"
    served = client.get(f"{url.path}?{url.query}")  # no credentials
    assert served.status_code == 200 and served.content == PDF
    assert served.headers["content-type"] == "application/pdf"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-security-policy"] == "sandbox"
    assert served.headers["cache-control"] == "private, no-store"
    disposition = served.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="')
    assert 'filename="_a_r_ r_sum_ _final_.pdf"' in disposition
    quoted = urllib.parse.quote('Çağrı résumé "final".pdf', safe="!#$&+-.^_`|~")
    assert disposition.endswith(f"filename*=UTF-8''{quoted}")


def test_a_text_file_is_served_as_utf8_text(client: httpx.Client, candidate: User) -> None:
    made = _uploaded(client, candidate, TEXT, "cv.txt")
    url = ok(client.get("/v1/files.get", params={"id": made["id"]}, headers=candidate.auth))["download_url"]
    served = fetch(client, url)
    assert served.content == TEXT and served.headers["content-type"] == "text/plain; charset=utf-8"


def fetch(client: httpx.Client, url: str) -> httpx.Response:
    """GET a download link on the live server (links name PUBLIC_URL), without credentials."""
    path, query = _link(url)
    return client.get(path, params=query)


def _link(url: str) -> tuple[str, dict[str, str]]:
    parts = urllib.parse.urlsplit(url)
    return parts.path, dict(urllib.parse.parse_qsl(parts.query))


def test_an_altered_or_expired_link_is_403_never_the_bytes(
    client: httpx.Client, candidate: User, settings: Any
) -> None:
    made = _uploaded(client, candidate)
    asked = time.time()
    path, query = _link(
        ok(client.post("/v1/files.get", json={"id": made["id"]}, headers=candidate.auth))["download_url"]
    )
    assert settings.files_link_lifetime == 600, "ten minutes unless FILES_LINK_LIFETIME says otherwise"
    assert int(query["expires"]) - asked == pytest.approx(600, abs=5)
    other = _uploaded(client, candidate)
    attempts = [
        (path, {**query, "expires": str(int(query["expires"]) + 3600)}),  # a longer life
        (path, {**query, "signature": query["signature"][:-2] + "AA"}),
        (path, {k: v for k, v in query.items() if k != "signature"}),
        (path.replace(made["id"], other["id"]), query),  # another file
    ]
    expired = DownloadLinks(settings).url(made["id"], now=time.time() - settings.files_link_lifetime - 5)
    attempts.append(_link(expired))
    for where, params in attempts:
        answer = client.get(where, params=params)
        assert refused(answer, 403, "forbidden") and PDF not in answer.content


def test_strangers_get_404(client: httpx.Client, admin: Admin, candidate: User, employer: User) -> None:
    made = _uploaded(client, candidate)
    for who in (admin.user("candidate"), employer, admin.user("admin")):
        refused(client.post("/v1/files.get", json={"id": made["id"]}, headers=who.auth), 404, "not_found")
    for bad in ("nope", 12, str(uuid.uuid4())):
        refused(client.post("/v1/files.get", json={"id": bad}, headers=candidate.auth), 404, "not_found")


# --- applications and profiles -------------------------------------------------------------------------------


def test_an_application_carries_its_resume_and_attachments(
    client: httpx.Client, call: Call, admin: Admin, employer: User, colleague: User, stranger: User
) -> None:
    person = admin.user("candidate")
    resume = _uploaded(client, person)
    extras = [_uploaded(client, person, data, name) for data, name in ((DOCX, "a.docx"), (ODT, "b.odt"))]
    job = _job(call, employer)
    made = ok(
        call(
            "applications.create",
            person,
            job_id=job,
            resume_file_id=resume["id"],
            attachment_file_ids=[extras[1]["id"], extras[0]["id"]],
            resume_url="https://cv.example.test/me.pdf",
        )
    )
    assert made["resume"] == resume and made["attachments"] == [extras[1], extras[0]]
    assert made["resume_url"] == "https://cv.example.test/me.pdf"
    for who in (person, employer):
        seen = ok(call("applications.get", who, id=made["id"]))
        assert seen["resume"] == resume and seen["attachments"] == [extras[1], extras[0]]
    listed = ok(call("applications.list", employer, job_id=job))["data"]
    assert listed[0]["resume"] == resume
    # The job's account reads the files; its download is in the account's audit log; others get 404.
    for who in (employer, colleague):
        url = ok(call("files.get", who, id=resume["id"]))["download_url"]
        assert fetch(client, url).content == PDF
    downloads = admin.sql(
        "SELECT account_id::text AS account_id, actor_id FROM audit_entries "
        "WHERE action = 'file.downloaded' AND target_id = %(t)s ORDER BY id",
        {"t": resume["id"]},
    )
    assert downloads == [
        {"account_id": employer.account_id, "actor_id": employer.user_id},
        {"account_id": employer.account_id, "actor_id": colleague.user_id},
    ]
    refused(call("files.get", stranger, id=resume["id"]), 404, "not_found")
    # The candidate's own download is not audited.
    assert fetch(client, ok(call("files.get", person, id=resume["id"]))["download_url"]).status_code == 200
    assert len(admin.sql("SELECT 1 FROM audit_entries WHERE target_id = %(t)s", {"t": resume["id"]})) == 2


def test_an_application_takes_only_the_callers_files(
    client: httpx.Client, call: Call, admin: Admin, employer: User
) -> None:
    person, other = admin.user("candidate"), admin.user("candidate")
    theirs = _uploaded(client, other)
    mine = [_uploaded(client, person) for _ in range(6)]
    job = _job(call, employer)
    refused(call("applications.create", person, job_id=job, resume_file_id=theirs["id"]), 404, "not_found")
    refused(call("applications.create", person, job_id=job, attachment_file_ids=[theirs["id"]]), 404, "not_found")
    refused(call("applications.create", person, job_id=job, resume_file_id="bogus"), 404, "not_found")
    six = [f["id"] for f in mine]
    refused(call("applications.create", person, job_id=job, attachment_file_ids=six), 422, "invalid_params")
    twice = [six[0], six[0]]
    refused(call("applications.create", person, job_id=job, attachment_file_ids=twice), 422, "invalid_params")
    both = {"resume_file_id": six[0], "attachment_file_ids": [six[0]]}
    refused(call("applications.create", person, job_id=job, **both), 422, "invalid_params")
    assert ok(call("applications.list", person))["total"] == 0  # nothing was made
    made = ok(call("applications.create", person, job_id=job))
    assert made["resume"] is None and made["attachments"] == []


def test_the_profile_shows_its_resume(client: httpx.Client, call: Call, admin: Admin) -> None:
    person, other = admin.user("candidate"), admin.user("candidate")
    assert ok(call("profile.me", person))["resume"] is None
    resume = _uploaded(client, person)
    assert ok(call("profile.update", person, resume_file_id=resume["id"]))["resume"] == resume
    assert ok(call("profile.me", person))["resume"] == resume
    assert ok(call("profile.update", person, headline="Engineer"))["resume"] == resume  # left alone
    refused(call("profile.update", person, resume_file_id=_uploaded(client, other)["id"]), 404, "not_found")
    assert ok(call("profile.update", person, resume_file_id=None))["resume"] is None


# --- export, erasure, retention, sweep -----------------------------------------------------------------------


def test_export_lists_the_files_with_links_and_erasure_deletes_them(
    client: httpx.Client, call: Call, admin: Admin, employer: User, store: EmbeddedStore, database: str
) -> None:
    person = admin.user("candidate")
    files = [_uploaded(client, person), _uploaded(client, person, TEXT, "cv.txt")]
    ok(call("profile.update", person, resume_file_id=files[0]["id"]))
    application = ok(call("applications.create", person, job_id=_job(call, employer), resume_file_id=files[1]["id"]))
    exported = ok(call("profile.export", person))["files"]
    assert {f["id"] for f in exported} == {f["id"] for f in files}
    for entry in exported:
        assert fetch(client, entry["download_url"]).status_code == 200
    assert {f["id"] for f in files} <= stored(store)
    ok(call("profile.delete", person, confirm=person.email))
    ids = [f["id"] for f in files]
    assert admin.sql("SELECT id FROM files WHERE id = ANY(%(ids)s::uuid[])", {"ids": ids}) == []
    assert ok(call("applications.get", employer, id=application["id"]))["resume"] is None
    run_sweep(database, store)
    assert not set(ids) & stored(store)


def test_unreferenced_files_go_after_a_day_and_their_bytes_after(
    client: httpx.Client, call: Call, admin: Admin, employer: User, store: EmbeddedStore, database: str
) -> None:
    person = admin.user("candidate")
    loose, on_profile, applied = (_uploaded(client, person) for _ in range(3))
    ok(call("profile.update", person, resume_file_id=on_profile["id"]))
    ok(call("applications.create", person, job_id=_job(call, employer), attachment_file_ids=[applied["id"]]))
    fresh = _uploaded(client, person)
    ids = [loose["id"], on_profile["id"], applied["id"]]
    admin.sql("UPDATE files SET created_at = now() - interval '25 hours' WHERE id = ANY(%(ids)s::uuid[])", {"ids": ids})
    run_sweep(database, store)  # the row goes; its bytes wait for the next run (after the commit)
    left = {
        row["id"] for row in admin.sql("SELECT id::text AS id FROM files WHERE owner_id = %(o)s", {"o": person.user_id})
    }
    assert left == {on_profile["id"], applied["id"], fresh["id"]}
    assert loose["id"] in stored(store)
    run_sweep(database, store)
    assert loose["id"] not in stored(store) and {on_profile["id"], applied["id"], fresh["id"]} <= stored(store)


def test_bytes_no_file_names_are_swept_once_old(store: EmbeddedStore, database: str, tmp_path: Any) -> None:
    import asyncio

    source = tmp_path / "stray"
    source.write_bytes(b"left by an upload whose row never committed")
    stray = str(uuid.uuid4())
    asyncio.run(store.put(stray, source))
    run_sweep(database, store, strays=True)
    assert stray in stored(store)  # young: maybe an upload still in flight
    run_sweep(database, store, strays=True, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=2))
    assert stray not in stored(store)


def test_retention_lets_go_of_an_old_applications_files(
    client: httpx.Client, call: Call, admin: Admin, employer: User, store: EmbeddedStore, database: str
) -> None:
    import asyncio

    from rpc.ops import admin as ops

    person = admin.user("candidate")
    sent = _uploaded(client, person)
    made = ok(call("applications.create", person, job_id=_job(call, employer), resume_file_id=sent["id"]))
    ok(call("applications.withdraw", person, id=made["id"]))
    admin.sql("UPDATE applications SET updated_at = now() - interval '800 days' WHERE id = %(id)s", {"id": made["id"]})
    admin.sql("UPDATE files SET created_at = now() - interval '800 days' WHERE id = %(id)s", {"id": sent["id"]})

    async def retention() -> None:
        async with await ops.connect(database) as conn, conn.transaction():
            await retain(conn, RetentionSettings(), PRIVACY.retention)

    asyncio.run(retention())
    run_sweep(database, store)
    run_sweep(database, store)
    assert admin.sql("SELECT id FROM files WHERE id = %(id)s", {"id": sent["id"]}) == []
    assert sent["id"] not in stored(store)
    assert ok(call("applications.get", employer, id=made["id"]))["resume"] is None


def test_a_store_that_fails_leaves_no_file(settings: Any, admin: Admin, tmp_path: Any) -> None:
    """The bytes are written before the row: when they cannot be written, no File is made."""
    import msgspec

    (tmp_path / "files").write_text("a file where the store's directory should be")
    broken = msgspec.structs.replace(settings, data_dir=str(tmp_path))
    person = admin.user("candidate")
    with LiveServer(broken) as server, server.client() as http:
        refused(upload(http, person, PDF), 500, "internal_error")
    assert admin.sql("SELECT id FROM files WHERE owner_id = %(o)s", {"o": person.user_id}) == []


def test_no_staged_upload_outlives_its_call(client: httpx.Client, candidate: User) -> None:
    import tempfile
    from pathlib import Path

    def staged() -> set[Path]:
        return set(Path(tempfile.gettempdir()).glob("hire-upload-*"))

    before = staged()
    ok(upload(client, candidate, PDF))
    refused(upload(client, candidate, ZIP), 415, "unsupported_media_type")
    refused(client.get("/v1/files.upload", headers=candidate.auth), 405, "method_not_allowed")
    assert staged() <= before


def test_openapi_describes_the_upload_as_multipart(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    paths = document["paths"]
    upload_body = paths["/v1/files.upload"]["post"]["requestBody"]
    assert set(upload_body["content"]) == {"multipart/form-data"}
    assert upload_body["content"]["multipart/form-data"]["schema"]["required"] == ["file"]
    assert paths["/v1/files.upload"]["post"]["security"] == [
        {"bearer": ["write:applications"]},
        {"oauth2": ["write:applications"]},
        {"bearer": ["write:profile"]},
        {"oauth2": ["write:profile"]},
    ]
    assert "download_url" in document["components"]["schemas"]["FileDownload"]["properties"]
    assert "Upload" not in document["components"]["schemas"]  # the dispatcher's staging is no client's business
