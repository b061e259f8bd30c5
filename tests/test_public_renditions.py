"""The feed and sitemaps rendered once per version of the published set into files under DATA_DIR and served
from them (docs/public-pages.md): one render per version however many processes ask, the older renditions
removed (a reader that has one open reads it to its end), a crashed render's draft never served, and the newest
rendition served, under its own validators, while a newer one takes longer than FEED_RENDER_WAIT."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support import LiveServer, User, eventually, ok, settings_for

Call = Callable[..., httpx.Response]


@pytest.fixture(scope="module")
def settings(database: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return settings_for(database, DATA_DIR=str(tmp_path_factory.mktemp("data")), FEED_RENDER_WAIT="0.3")


@pytest.fixture
def publish(call: Call, employer: User) -> Callable[[str], str]:
    def made(title: str) -> str:
        job = ok(call("jobs.create", employer, title=title, company="Acme", location="Izmir"))
        return str(ok(call("jobs.publish", employer, id=job["id"]))["id"])

    return made


def renditions(settings: Any, shelf: str) -> list[Path]:
    """Every directory of the shelf on disk, complete or not."""
    return sorted(path for path in (settings.data_path / "public").glob(f"*/{shelf}/*") if path.is_dir())


@pytest.fixture(scope="module")
def twin(settings: Any) -> Iterator[LiveServer]:
    """A second process of the same host: the same database and DATA_DIR."""
    with LiveServer(settings) as server:
        yield server


def test_one_render_per_version_however_many_processes_ask(
    live: LiveServer, twin: LiveServer, publish: Callable[[str], str], caplog: pytest.LogCaptureFixture
) -> None:
    publish("Riveter")
    caplog.set_level(logging.INFO, logger="procedures.public_pages.renditions")

    def read(server: LiveServer) -> bytes:
        return httpx.get(f"{server.url}/feeds/jobs.xml", timeout=30).content

    with ThreadPoolExecutor(8) as pool:
        feeds = list(pool.map(read, [live, twin] * 4))
    assert len(set(feeds)) == 1 and b"Riveter" in feeds[0]
    renders = [record for record in caplog.records if record.getMessage().startswith("rendered feed")]
    assert len(renders) == 1, [record.getMessage() for record in renders]


def version(answer: httpx.Response) -> int:
    return int(answer.headers["ETag"].strip('"').rsplit("-", 1)[1])


def test_a_new_version_replaces_the_old_while_its_readers_finish(
    client: httpx.Client, settings: Any, publish: Callable[[str], str]
) -> None:
    publish("Boilermaker")
    with client.stream("GET", "/feeds/jobs.xml") as old:
        publish("Pipefitter")  # a new version, rendered by the next request
        new = client.get("/feeds/jobs.xml")
        assert version(new) > version(old) and b"Pipefitter" in new.content
        assert [path.name for path in renditions(settings, "feed")] == [f"v{version(new)}"], "the old one removed"
        body = old.read()
    assert body.endswith(b"</source>\n") and b"Boilermaker" in body and b"Pipefitter" not in body


def test_a_crashed_renders_draft_is_never_served(
    client: httpx.Client, settings: Any, publish: Callable[[str], str]
) -> None:
    client.get("/sitemap.xml")
    (shelf,) = {path.parent for path in renditions(settings, "sitemaps")}
    draft = shelf / ".draft"
    draft.mkdir()
    (draft / "sitemap.xml").write_text("half a sitemap")
    publish("Glazier")
    answer = client.get("/sitemap.xml")
    assert answer.status_code == 200 and b"half a sitemap" not in answer.content
    assert not draft.exists(), "the next render removed it"


def test_the_newest_rendition_is_served_while_a_newer_one_takes_long(
    client: httpx.Client, database: str, publish: Callable[[str], str]
) -> None:
    publish("Mason")
    before = client.get("/feeds/jobs.xml")
    publish("Plasterer")
    with psycopg.connect(database) as locker:
        locker.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")  # the render's read waits on it
        stale = client.get("/feeds/jobs.xml")  # after FEED_RENDER_WAIT
        assert stale.status_code == 200 and stale.headers["ETag"] == before.headers["ETag"]
        assert stale.content == before.content, "the newest rendition there is, under its own validators"
        again = client.get("/feeds/jobs.xml", headers={"If-None-Match": before.headers["ETag"]})
        assert again.status_code == 304

    def rendered() -> httpx.Response | None:
        answer = client.get("/feeds/jobs.xml")
        return answer if version(answer) > version(before) else None

    assert b"Plasterer" in eventually(rendered, "the newer rendition").content
