"""Hostile files and hostile bodies (docs/security.md, the third round): a zip that inflates gigabytes is refused
without the server's memory growing, a name that promises another type gets the detected type's extension, an
applicant's file needs `read:applications`, and a multipart boundary RFC 2046 does not allow is a clear `4xx`
on every form that takes a file."""

from __future__ import annotations

import bz2
import struct
import threading
import urllib.parse
import uuid
import zlib
from collections.abc import Callable, Iterator

import httpx
import psutil
import pytest

from rpc.core.multipart import FILENAME_MAX
from tests.browser import Browser
from tests.files_support import DOCX, ODT_TYPE, PDF, TEXT, upload
from tests.support import Admin, LiveServer, User, ok, refused

Call = Callable[..., httpx.Response]
MB = 1024 * 1024
# What telling a file's type may add to the server's memory at its peak (the upload's own buffers included).
MEMORY_SLACK = 16 * MB
DEFLATED, BZIP2 = 8, 12


def _zip(entries: list[tuple[bytes, int, bytes, int]], listed: int = 1) -> bytes:
    """A zip of `(name, method, compressed bytes, declared size)` entries, its directory listing each `listed`
    times, written by hand: `zipfile` writes only what it compressed itself, and declares the true size."""
    body, directory = b"", b""
    for name, method, data, declared in entries:
        local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, 0, len(data), declared, len(name), 0)
        central = struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            20,
            20,
            0,
            method,
            0,
            0,
            0,
            len(data),
            declared,
            len(name),
            0,
            0,
            0,
            0,
            0,
            len(body),
        )
        body += local + name + data
        directory += (central + name) * listed
    count = min(len(entries) * listed, 0xFFFF)
    return body + directory + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, len(directory), len(body), 0)


def deflate_bomb(inflated: int) -> bytes:
    """An ODT's shape whose `mimetype` entry declares 39 bytes but inflates to `inflated` bytes of zeros: one
    deflated MiB of zeros, ended by a full flush so that copies of it chain, repeated (about 1 KiB each)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = deflate.compress(bytes(MB)) + deflate.flush(zlib.Z_FULL_FLUSH)
    stream = piece * (inflated // MB) + b"\x03\x00"  # and a last, empty block
    return _zip([(b"mimetype", DEFLATED, stream, len(ODT_TYPE))])


def bzip2_bomb(inflated: int) -> bytes:
    """The same with a bzip2 `mimetype`, which inflates a whole block (tens of MB) however little is read."""
    return _zip([(b"mimetype", BZIP2, bz2.compress(bytes(inflated)), len(ODT_TYPE))])


def wide_zip(entries: int) -> bytes:
    """A zip whose directory lists one empty entry `entries` times, 47 bytes each: each costs a reader memory."""
    return _zip([(b"a", 0, b"", 0)], listed=entries)


class PeakMemory:
    """The most this process (the live server runs in it) held while the block ran, above what it held before:
    its resident size sampled every millisecond."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._done = threading.Event()
        self._before = self._peak = 0

    def __enter__(self) -> PeakMemory:
        self._before = self._peak = self._process.memory_info().rss
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._sampler.join()

    def _sample(self) -> None:
        while not self._done.wait(0.001):
            self._peak = max(self._peak, self._process.memory_info().rss)

    @property
    def growth(self) -> int:
        return self._peak - self._before


# --- archives that would inflate -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: deflate_bomb(2048 * MB),  # 2 MB sent, 2 GiB if inflated
        lambda: bzip2_bomb(64 * MB),
        lambda: wide_zip(200_000),  # 9.4 MB of directory: 200,000 entries to hold
    ],
    ids=["deflate-2GiB", "bzip2", "200k-entries"],
)
def test_an_archive_that_would_inflate_is_refused_in_constant_memory(
    client: httpx.Client, candidate: User, make: Callable[[], bytes]
) -> None:
    archive = make()
    assert len(archive) < 10 * MB
    with PeakMemory() as memory:
        refused(upload(client, candidate, archive, "cv.odt", ODT_TYPE), 415, "unsupported_media_type")
    assert memory.growth < MEMORY_SLACK, f"the server's memory grew by {memory.growth / MB:.0f} MB"


def test_real_documents_are_still_told_within_the_read_limit(client: httpx.Client, candidate: User) -> None:
    """A Word document with a few hundred entries (images, say) reads far less than the limit."""
    from tests.files_support import archive

    entries = [("[Content_Types].xml", b"<Types/>"), ("word/document.xml", b"<w:document/>")]
    entries += [(f"word/media/image{n}.png", b"\x89PNG" + bytes(64)) for n in range(300)]
    made = ok(upload(client, candidate, archive(entries), "cv.docx"))
    assert made["content_type"] == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


# --- names that promise another type ---------------------------------------------------------------------------


def _download(client: httpx.Client, url: str) -> httpx.Response:
    parts = urllib.parse.urlsplit(url)
    return client.get(parts.path, params=dict(urllib.parse.parse_qsl(parts.query)))


@pytest.mark.parametrize(
    ("data", "sent", "kept"),
    [
        (TEXT, "CV.vbs", "CV.vbs.txt"),
        (TEXT, "cv.url", "cv.url.txt"),
        (TEXT, "notes.csv", "notes.csv.txt"),
        (PDF, "cv.html", "cv.html.pdf"),
        (PDF, "resume", "resume.pdf"),
        (PDF, "CV.PDF", "CV.PDF"),
        (DOCX, "cv.docx", "cv.docx"),
        (TEXT, "x" * (FILENAME_MAX - 2) + ".sh", "x" * (FILENAME_MAX - 4) + ".txt"),
    ],
)
def test_a_file_is_named_and_downloaded_with_its_types_extension(
    client: httpx.Client, candidate: User, data: bytes, sent: str, kept: str
) -> None:
    made = ok(upload(client, candidate, data, sent, "application/octet-stream"))
    assert made["filename"] == kept
    link = ok(client.post("/v1/files.get", json={"id": made["id"]}, headers=candidate.auth))["download_url"]
    disposition = _download(client, link).headers["content-disposition"]
    assert disposition.endswith("''" + urllib.parse.quote(kept, safe="!#$&+-.^_`|~"))


def test_a_file_kept_before_under_another_types_name_downloads_with_its_own(
    client: httpx.Client, candidate: User, admin: Admin
) -> None:
    made = ok(upload(client, candidate, PDF, "cv.pdf"))
    admin.sql("UPDATE files SET filename = 'cv.html' WHERE id = %(id)s", {"id": made["id"]})
    link = ok(client.post("/v1/files.get", json={"id": made["id"]}, headers=candidate.auth))["download_url"]
    assert 'filename="cv.html.pdf"' in _download(client, link).headers["content-disposition"]


# --- who may read an applicant's file ---------------------------------------------------------------------------


def test_an_applicants_file_needs_read_applications(
    client: httpx.Client, call: Call, admin: Admin, employer: User
) -> None:
    person = admin.user("candidate")
    resume = ok(upload(client, person, PDF))
    job = ok(call("jobs.create", employer, title="Welder", company="Acme", location="Izmir"))["id"]
    ok(call("jobs.publish", employer, id=job))
    ok(call("applications.create", person, job_id=job, resume_file_id=resume["id"]))

    def get(user: User, scopes: str, file_id: str) -> httpx.Response:
        key = admin.api_key(user, scopes)["key"]
        return client.post("/v1/files.get", json={"id": file_id}, headers={"Authorization": f"Bearer {key}"})

    refused(get(employer, "read:profile", resume["id"]), 404, "not_found")
    assert ok(get(employer, "read:applications", resume["id"]))["id"] == resume["id"]
    own = ok(upload(client, employer, TEXT, "note.txt"))
    for scopes in ("read:profile", "read:applications"):
        assert ok(get(employer, scopes, own["id"]))["id"] == own["id"], "one's own file with either scope"


# --- multipart boundaries ---------------------------------------------------------------------------------------


def _body(boundary: str) -> bytes:
    head = 'Content-Disposition: form-data; name="file"; filename="cv.txt"\r\n\r\n'
    return f"--{boundary}\r\n{head}hello\r\n--{boundary}--\r\n".encode()


@pytest.mark.parametrize("length", [71, 257, 5000])
def test_a_boundary_rfc_2046_does_not_allow_is_422_on_the_api(
    client: httpx.Client, candidate: User, length: int
) -> None:
    boundary = "b" * length
    answer = client.post(
        "/v1/files.upload",
        content=_body(boundary),
        headers={**candidate.auth, "Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    body = refused(answer, 422, "invalid_params")
    assert body["details"]["errors"][0]["field"] == "Content-Type"
    assert "70" in body["details"]["errors"][0]["message"]


def test_a_boundary_of_70_characters_is_taken(client: httpx.Client, candidate: User) -> None:
    boundary = "'()+_,-./:=? b" * 5
    answer = client.post(
        "/v1/files.upload",
        content=_body(boundary),
        headers={**candidate.auth, "Content-Type": f'multipart/form-data; boundary="{boundary}"'},
    )
    assert ok(answer)["filename"] == "cv.txt"


@pytest.fixture
def signed_in(live: LiveServer, admin: Admin) -> Iterator[Browser]:
    browser = Browser(live.url)
    browser.sign_in(admin.user("candidate"))
    yield browser
    browser.close()


def test_the_pages_that_take_a_file_refuse_a_bad_boundary_with_400(
    signed_in: Browser, call: Call, employer: User
) -> None:
    job = ok(call("jobs.create", employer, title=f"job-{uuid.uuid4().hex[:8]}", company="Acme", location="Izmir"))
    ok(call("jobs.publish", employer, id=job["id"]))
    boundary = "b" * 300
    for path in (f"/jobs/{job['id']}/apply", "/me/resume"):
        answer = signed_in.http.post(
            path, content=_body(boundary), headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
        )
        assert answer.status_code == 400, (path, answer.status_code, answer.text[:300])
