"""`/sitemap.xml` (and `/sitemap-N.xml`) for search engines, `/feeds/jobs.xml` for job aggregators: every
published job, rendered once per version of the published set into files and served from them
(`renditions`: no reader holds a database connection, however slowly it reads), with `ETag`/`Last-Modified` from
that version and `304` to a client that holds it."""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import os
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from procedures.public_pages.jobposting import description_html
from procedures.public_pages.renditions import RENDERER, file_response, write_document
from procedures.public_pages.settings import PublicSettings
from procedures.public_pages.snapshot import Published, not_modified, published_state, rows
from procedures.public_pages.xmltext import cdata, text
from rpc.api import Connection
from rpc.services import services

XML = "application/xml; charset=utf-8"
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
# The job types aggregators read (Indeed's XML feed).
JOB_TYPES = {
    "full_time": "fulltime",
    "part_time": "parttime",
    "contract": "contract",
    "internship": "internship",
    "temporary": "temporary",
}
_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'
# Oldest first, so that a job keeps its sitemap file while newer ones are published.
_SITEMAP_JOBS = """
SELECT id::text AS id, updated_at FROM jobs WHERE status = 'published' ORDER BY created_at, id
"""
# Newest first: an aggregator that stops early has the freshest.
_FEED_JOBS = """
SELECT id::text AS id, title, company, location, description, employment_type, published_at, updated_at
FROM jobs WHERE status = 'published' ORDER BY created_at DESC, id DESC
"""
FEED = "feed.xml"  # in its rendition: `GET /feeds/jobs.xml`
BATCH_URLS = 500  # `<url>`s written at a time


def _files(published: Published, settings: PublicSettings) -> int:
    return max(1, math.ceil(published.total / settings.urls_per_file))


@dataclass(frozen=True, slots=True)
class _Kind:
    """Documents rendered together: their shelf, and how a rendition of them is written."""

    shelf: str
    write: Callable[[Connection, Published, Path, PublicSettings], Awaitable[None]]


async def sitemap(request: Request, settings: PublicSettings) -> Response:
    """`GET /sitemap.xml`: the urlset itself while it fits one file, else the index of `/sitemap-N.xml`."""
    return await _answer(request, settings, SITEMAPS, "sitemap")


async def sitemap_file(request: Request, settings: PublicSettings) -> Response:
    """`GET /sitemap-N.xml`: the Nth `SITEMAP_URLS_PER_FILE` published jobs, oldest first."""
    number: int = request.path_params["number"]

    def exists(published: Published) -> bool:
        return 1 <= number <= _files(published, settings)

    return await _answer(request, settings, SITEMAPS, f"sitemap-{number}", exists)


async def jobs_feed(request: Request, settings: PublicSettings) -> Response:
    """`GET /feeds/jobs.xml`: the aggregators' XML feed of every published job, newest first."""
    return await _answer(request, settings, FEEDS, "feed")


async def _answer(
    request: Request,
    settings: PublicSettings,
    kind: _Kind,
    document: str,
    exists: Callable[[Published], bool] = lambda _: True,
) -> Response:
    """`document` (`<document>.xml`, its `ETag` `"<document>-<version>"`) of the current version's rendition, or
    of the newest one while that is rendered; `304` when the client holds it, `404` when there is none such."""
    running = services(request)
    current = await published_state(running.pool)
    if not exists(current):
        return _not_found()
    if not_modified(request, current, document):
        return Response(status_code=304, headers=current.headers(document))
    renderer = running.memory.get(RENDERER)
    written_with = f"{settings.public_url}\n{settings.urls_per_file}"
    shelf = await renderer.shelf(running.pool, running.settings.data_path / "public", written_with, kind.shelf)

    async def write(conn: Connection, published: Published, directory: Path) -> None:
        await kind.write(conn, published, directory, settings)

    rendition = await renderer.current(shelf, current.version, running.reads, write, settings.render_wait)
    opened = rendition.open(f"{document}.xml")
    if opened is None:  # the newest rendition is older, and has fewer sitemap files
        return _not_found()
    headers = rendition.published.headers(document)
    if not_modified(request, rendition.published, document):
        opened.close()
        return Response(status_code=304, headers=headers)
    return file_response(opened, request.method, XML, headers)


def _not_found() -> Response:
    return Response("Not found", status_code=404, media_type="text/plain")


async def _sitemaps(conn: Connection, published: Published, directory: Path, settings: PublicSettings) -> None:
    """`sitemap-N.xml` of `urls_per_file` jobs each, from one ordered read; `sitemap.xml` the index of them, or
    the one urlset itself."""
    files = _files(published, settings)
    urls = _urls(conn, settings)
    for number in range(1, files + 1):
        await write_document(directory / f"sitemap-{number}.xml", _urlset(urls, settings.urls_per_file))
    if files == 1:
        os.link(directory / "sitemap-1.xml", directory / "sitemap.xml")
        return
    await write_document(directory / "sitemap.xml", _index(published, settings, files))


async def _index(published: Published, settings: PublicSettings, files: int) -> AsyncIterator[str]:
    yield f'{_HEAD}<sitemapindex xmlns="{SITEMAP_NS}">\n'
    lastmod = _w3c(published.changed_at)
    for number in range(1, files + 1):
        loc = text(f"{settings.public_url}/sitemap-{number}.xml")
        yield f"<sitemap><loc>{loc}</loc><lastmod>{lastmod}</lastmod></sitemap>\n"
    yield "</sitemapindex>\n"


async def _urls(conn: Connection, settings: PublicSettings) -> AsyncIterator[str]:
    """Every published job's `<url>`, oldest first."""
    async for batch in rows(conn, "sitemap_jobs", _SITEMAP_JOBS, {}):
        for job in batch:
            loc, lastmod = text(settings.job_url(job["id"])), _w3c(job["updated_at"])
            yield f"<url><loc>{loc}</loc><lastmod>{lastmod}</lastmod></url>\n"


async def _urlset(urls: AsyncIterator[str], most: int) -> AsyncIterator[str]:
    """A urlset of the next `most` of `urls` (a batch of them a part)."""
    yield f'{_HEAD}<urlset xmlns="{SITEMAP_NS}">\n'
    batch: list[str] = []
    for _ in range(most):
        url = await anext(urls, None)
        if url is None:
            break
        batch.append(url)
        if len(batch) == BATCH_URLS:
            yield "".join(batch)
            batch.clear()
    yield "".join(batch) + "</urlset>\n"


async def _feed(conn: Connection, published: Published, directory: Path, settings: PublicSettings) -> None:
    await write_document(directory / FEED, _feed_parts(conn, published, settings))


async def _feed_parts(conn: Connection, published: Published, settings: PublicSettings) -> AsyncIterator[str]:
    publisher = urllib.parse.urlsplit(settings.public_url).hostname or settings.public_url
    yield (
        f"{_HEAD}<source>\n<publisher>{cdata(publisher)}</publisher>\n"
        f"<publisherurl>{cdata(settings.public_url)}</publisherurl>\n"
        f"<lastBuildDate>{cdata(_rfc2822(published.changed_at))}</lastBuildDate>\n"
    )
    async for batch in rows(conn, "feed_jobs", _FEED_JOBS, {}):
        yield "".join(_job(settings, job) for job in batch)
    yield "</source>\n"


def _job(settings: PublicSettings, job: dict[str, Any]) -> str:
    published: dt.datetime = job["published_at"] or job["updated_at"]
    kind = JOB_TYPES.get(job["employment_type"], "")
    return (
        f"<job>\n<title>{cdata(str(job['title']))}</title>\n<date>{cdata(_rfc2822(published))}</date>\n"
        f"<referencenumber>{cdata(str(job['id']))}</referencenumber>\n"
        f"<url>{cdata(settings.job_url(str(job['id'])))}</url>\n<company>{cdata(str(job['company']))}</company>\n"
        f"<city>{cdata(str(job['location']))}</city>\n"
        f"<description>{cdata(description_html(job['description']))}</description>\n"
        f"<jobtype>{cdata(kind)}</jobtype>\n</job>\n"
    )


def _rfc2822(moment: dt.datetime) -> str:
    return email.utils.format_datetime(moment.astimezone(dt.UTC), usegmt=True)


def _w3c(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


SITEMAPS = _Kind("sitemaps", _sitemaps)
FEEDS = _Kind("feed", _feed)
