"""Public pages under pressure (docs/public-pages.md, docs/security.md): slow readers of the feed and sitemaps
hold no database connection, so everything else answers as before while they crawl; and a public page that
cannot get a connection answers `503` with `Retry-After`, never `500`."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.support import LiveServer, User, eventually, ok, settings_for

SLOW_READERS = 16
JOBS = 1000  # of about 15 KB each: a feed of about 15 MB, more than sockets buffer
POOL = {"DB_POOL_MIN": "1", "DB_POOL_MAX": "3", "DB_POOL_TIMEOUT": "1"}


@pytest.fixture(scope="module")
def settings(database: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return settings_for(database, DATA_DIR=str(tmp_path_factory.mktemp("data")), **POOL)


@pytest.fixture(scope="module")
def published(database: str, employer: User) -> str:
    """A large published set; the id of one of its jobs. Its search documents are made from the title alone: the
    search trigger's folding of 20 MB of descriptions would take half a minute."""
    with psycopg.connect(database) as conn:  # one transaction: nobody else sees the trigger off
        conn.execute("ALTER TABLE jobs DISABLE TRIGGER jobs_search_document")
        conn.execute(
            """
            INSERT INTO jobs (account_id, title, company, location, description, status, published_at, search_doc)
            SELECT %(account)s, 'Welder ' || n, 'Acme', 'Izmir', repeat('Welding and fitting. ', 700), 'published',
                   now(), job_document('Welder ' || n, 'Acme', 'Izmir', NULL)
            FROM generate_series(1, %(jobs)s) AS n
            """,
            {"account": employer.account_id, "jobs": JOBS},
        )
        conn.execute("ALTER TABLE jobs ENABLE TRIGGER jobs_search_document")
        row = conn.execute("SELECT id::text FROM jobs LIMIT 1").fetchone()
    assert row is not None
    return str(row[0])


class SlowReader:
    """A client that asks for a document, takes its first few bytes, and then reads nothing more: its socket's
    small buffer fills, and the server's sending waits on it."""

    def __init__(self, port: int, path: str) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.socket.connect(("127.0.0.1", port))
        self.socket.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        self.head = self.socket.recv(64)

    def rest(self) -> bytes:
        """Everything else it is sent, read at last."""
        chunks = [self.head]
        while chunk := self.socket.recv(1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.socket.close()


@pytest.fixture
def slow_readers(live: LiveServer, published: str) -> Iterator[list[SlowReader]]:
    paths = ["/feeds/jobs.xml", "/sitemap.xml", "/sitemap-1.xml"]
    readers = [SlowReader(live.port, paths[n % len(paths)]) for n in range(SLOW_READERS)]
    yield readers
    for reader in readers:
        reader.close()


def test_slow_readers_of_the_feed_leave_every_other_request_answering(
    client: httpx.Client, employer: User, published: str, slow_readers: list[SlowReader]
) -> None:
    assert all(reader.head.startswith(b"HTTP/1.1 200 ") for reader in slow_readers), [r.head for r in slow_readers]
    # With the pool's three connections held by the readers, each of these waited its second and failed.
    for _ in range(5):
        assert ok(client.get("/v1/jobs.list", headers=employer.auth))["total"] == JOBS
        assert client.get("/healthz").status_code == 200
        assert client.get("/jobs").status_code == 200
        assert client.get(f"/jobs/{published}").status_code == 200
        assert client.get("/sitemap.xml").status_code == 200
    feed = slow_readers[0].rest()
    assert feed.count(b"</job>") == JOBS and feed.endswith(b"</source>\n")


def test_a_reader_gets_the_same_bytes_however_slowly_it_reads(client: httpx.Client, published: str) -> None:
    whole = client.get("/feeds/jobs.xml")
    assert int(whole.headers["Content-Length"]) == len(whole.content)
    with client.stream("GET", "/feeds/jobs.xml") as streamed:
        assert streamed.headers["ETag"] == whole.headers["ETag"]
        assert b"".join(streamed.iter_bytes(chunk_size=7)) == whole.content
    head = client.head("/feeds/jobs.xml")
    assert head.content == b"" and head.headers["Content-Length"] == whole.headers["Content-Length"]


# --- no connection to be had ------------------------------------------------------------------------------------


@pytest.fixture
def exhausted(database: str, tmp_path_factory: pytest.TempPathFactory, published: str) -> Iterator[LiveServer]:
    """A server whose one pooled connection waits on a lock the test holds: every other request waits for the
    pool, half a second, in vain."""
    busy = settings_for(
        database, DATA_DIR=str(tmp_path_factory.mktemp("busy")), DB_POOL_MIN="1", DB_POOL_MAX="1", DB_POOL_TIMEOUT="0.5"
    )
    with LiveServer(busy) as server, psycopg.connect(database) as locker:
        locker.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
        waiting = threading.Thread(target=lambda: httpx.get(f"{server.url}/jobs/{published}", timeout=60))
        waiting.start()
        eventually(lambda: _waits_on_a_lock(database), "a request waiting on the lock with the pool's connection")
        try:
            yield server
        finally:
            locker.rollback()
            waiting.join(timeout=60)


def _waits_on_a_lock(database: str) -> bool:
    with psycopg.connect(database) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])


def test_a_public_page_without_a_connection_is_503_never_500(exhausted: LiveServer, published: str) -> None:
    pages = [
        "/jobs?q=welder",
        f"/jobs/{published}",
        f"/jobs/{published}/apply",
        "/me",
        "/sitemap.xml",
        "/sitemap-1.xml",
        "/feeds/jobs.xml",
    ]
    with httpx.Client(base_url=exhausted.url, timeout=30, headers={"Accept": "text/html"}) as browser:
        answers = {path: browser.get(path) for path in pages}
        answers["POST /alerts/unsubscribe/<token>"] = browser.post("/alerts/unsubscribe/" + "A" * 43)
        answers["/healthz"] = browser.get("/healthz")
    statuses = {path: answer.status_code for path, answer in answers.items()}
    assert statuses == dict.fromkeys(statuses, 503), statuses
    assert all(answer.headers.get("Retry-After") for answer in answers.values())
    assert "text/html" in answers["/jobs?q=welder"].headers["Content-Type"], "a page to a browser"
