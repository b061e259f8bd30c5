"""`/sitemap.xml` (and `/sitemap-N.xml`) for search engines, `/feeds/jobs.xml` for job aggregators: every
published job, streamed from one snapshot in constant memory, with `ETag`/`Last-Modified` from the published
set's version and `304` to a client that holds it."""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from procedures.public_pages.jobposting import description_html
from procedures.public_pages.settings import PublicSettings
from procedures.public_pages.snapshot import Published, answer, rows
from procedures.public_pages.xmltext import cdata, text
from rpc.api import Connection
from rpc.web.state import web

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
SELECT id::text AS id, updated_at FROM jobs WHERE status = 'published'
ORDER BY created_at, id OFFSET %(offset)s LIMIT %(limit)s
"""
# Newest first: an aggregator that stops early has the freshest.
_FEED_JOBS = """
SELECT id::text AS id, title, company, location, description, employment_type, published_at, updated_at
FROM jobs WHERE status = 'published' ORDER BY created_at DESC, id DESC
"""


def _files(published: Published, settings: PublicSettings) -> int:
    return max(1, math.ceil(published.total / settings.urls_per_file))


async def sitemap(request: Request, settings: PublicSettings) -> Response:
    """`GET /sitemap.xml`: the urlset itself while it fits one file, else the index of `/sitemap-N.xml`."""

    async def body(conn: Connection, published: Published) -> AsyncIterator[str]:
        files = _files(published, settings)
        if files == 1:
            async for part in _urlset(conn, settings, 0):
                yield part
            return
        yield f'{_HEAD}<sitemapindex xmlns="{SITEMAP_NS}">\n'
        lastmod = _w3c(published.changed_at)
        for number in range(1, files + 1):
            loc = text(f"{settings.public_url}/sitemap-{number}.xml")
            yield f"<sitemap><loc>{loc}</loc><lastmod>{lastmod}</lastmod></sitemap>\n"
        yield "</sitemapindex>\n"

    return await answer(request, web(request).pool, "sitemap", XML, body)


async def sitemap_file(request: Request, settings: PublicSettings) -> Response:
    """`GET /sitemap-N.xml`: the Nth `SITEMAP_URLS_PER_FILE` published jobs, oldest first."""
    number: int = request.path_params["number"]

    async def body(conn: Connection, published: Published) -> AsyncIterator[str]:
        async for part in _urlset(conn, settings, (number - 1) * settings.urls_per_file):
            yield part

    def exists(published: Published) -> bool:
        return 1 <= number <= _files(published, settings)

    return await answer(request, web(request).pool, f"sitemap-{number}", XML, body, exists)


async def _urlset(conn: Connection, settings: PublicSettings, offset: int) -> AsyncIterator[str]:
    yield f'{_HEAD}<urlset xmlns="{SITEMAP_NS}">\n'
    params = {"offset": offset, "limit": settings.urls_per_file}
    async for batch in rows(conn, "sitemap_jobs", _SITEMAP_JOBS, params):
        yield "".join(
            f"<url><loc>{text(settings.job_url(job['id']))}</loc><lastmod>{_w3c(job['updated_at'])}</lastmod></url>\n"
            for job in batch
        )
    yield "</urlset>\n"


async def jobs_feed(request: Request, settings: PublicSettings) -> Response:
    """`GET /feeds/jobs.xml`: the aggregators' XML feed of every published job, newest first."""

    async def body(conn: Connection, published: Published) -> AsyncIterator[str]:
        publisher = urllib.parse.urlsplit(settings.public_url).hostname or settings.public_url
        yield (
            f"{_HEAD}<source>\n<publisher>{cdata(publisher)}</publisher>\n"
            f"<publisherurl>{cdata(settings.public_url)}</publisherurl>\n"
            f"<lastBuildDate>{cdata(_rfc2822(published.changed_at))}</lastBuildDate>\n"
        )
        async for batch in rows(conn, "feed_jobs", _FEED_JOBS, {}):
            yield "".join(_job(settings, job) for job in batch)
        yield "</source>\n"

    return await answer(request, web(request).pool, "feed", XML, body)


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
