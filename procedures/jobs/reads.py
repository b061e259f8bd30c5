"""The jobs' reads: `jobs.list` (the public list, followed between versions of the published set, or filtered by
the search index; your account's jobs with `mine`), `jobs.get`, `jobs.changes`; and `owned`, the one way a write
or the hiring desk reaches a job the caller's account owns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from procedures.feed import Feed, FeedParams, FeedQuery, read_feed
from procedures.jobs.search import listing
from procedures.jobs.search.corpus import INDEX
from procedures.jobs.shapes import JOB_COLUMNS, SUMMARY_COLUMNS, Job, JobSummary, ListJobs
from procedures.published_cache import PROBE, VERSION_SQL, PublishedCache, changes_since
from procedures.window import SLACK, Ranked, Window
from rpc.api import (
    Context,
    Forbidden,
    Id,
    IdParams,
    NotFound,
    Page,
    Principal,
    like_pattern,
    page_and_total,
    parse_id,
    procedure,
)
from rpc.core.memory import Slot
from rpc.search.answers import Answers
from rpc.search.index import SearchIndex
from rpc.search.view import View

_FILTERS = {
    "q": "(title ILIKE %(q)s OR company ILIKE %(q)s)",
    "location": "location ILIKE %(location)s",
    "company": "company ILIKE %(company)s",
    "employment_type": "employment_type = %(employment_type)s",
}
_FEED = FeedQuery(name="jobs.changes", columns=JOB_COLUMNS, source="FROM jobs", table="jobs")
_PUBLISHED_TOTAL = "SELECT total FROM job_totals WHERE status = 'published'"
# What the public list shows of a job, from `jobs` or from the log of changes (which keeps published states).
_PUBLIC_SHOWN = "id::text AS id, title, company, location, {status} AS status, created_at"


@dataclass(frozen=True, slots=True)
class _KeptPage:
    """A page of the public list as remembered: the first pages follow the changes to the published set."""

    version: int
    window: Window
    page: Page[JobSummary]


# Pages of the public list, per version of the published set: the popular pages cost no statement of their own.
_PUBLIC_PAGES = Slot("jobs.public_pages", lambda: PublishedCache[_KeptPage](size=1024))
# Filtered pages of the search index at its current position (`rpc.search.answers`).
_FILTERED: Slot[Answers[Page[JobSummary]]] = Slot("jobs.list filtered", Answers)
_summary = msgspec.json.Decoder(JobSummary)
_SELECT = f"SELECT {JOB_COLUMNS}, account_id::text AS account_id FROM jobs WHERE id = %(id)s"


@procedure("jobs.list", scope="read:jobs", probes=(PROBE,))
async def list_jobs(ctx: Context, params: ListJobs) -> Page[JobSummary]:
    """List published jobs of every account, newest first; with `mine=true`, your account's jobs in every status.

    `q` matches a case-insensitive substring of the title or company; `location` and `company` match
    case-insensitive substrings; `employment_type` matches exactly.
    """
    if params.mine:
        return await _list(ctx, params)
    if any(getattr(params, name) is not None for name in _FILTERS):
        filtered = await _from_index(ctx, params)
        if filtered is not None:
            return filtered
    kept = await ctx.kept(_PUBLIC_PAGES).answer(
        ctx, params, lambda: _public_page(ctx, params), lambda old: _public_followed(ctx, params, old)
    )
    return kept.page


async def _from_index(ctx: Context, params: ListJobs) -> Page[JobSummary] | None:
    """A filtered public page from the search index at the position the call read; None while it is built."""
    index: SearchIndex | None = ctx.indexes.get(INDEX)
    position = await ctx.probe(PROBE)
    view = await index.view(ctx.conn, position) if index is not None and position is not None else None
    if view is None:
        return None
    asked = (params.q, params.location, params.company, params.employment_type, params.per_page, params.page)
    return ctx.kept(_FILTERED).of(view.position, asked, lambda: _newest(view, params))


def _newest(view: View, params: ListJobs) -> Page[JobSummary]:
    shown, total = listing.page(view, params)
    jobs = [_summary.decode(job) for job in shown]
    return Page(data=jobs, total=total, page=params.page, per_page=params.per_page)


def _filters(params: ListJobs) -> tuple[list[str], dict[str, Any]]:
    """The filters' conditions (over columns the change log keeps too) and their values."""
    where, values = [], {}
    for name, clause in _FILTERS.items():
        value = getattr(params, name)
        if value is not None:
            where.append(clause)
            values[name] = value if name == "employment_type" else like_pattern(value)
    return where, values


async def _list(ctx: Context, params: ListJobs) -> Page[JobSummary]:
    """One account's jobs in every status (`mine=true`)."""
    where, values = _filters(params)
    values.update(limit=params.per_page, offset=params.offset, account_id=ctx.principal.account_id)
    rows, total = await page_and_total(
        ctx,
        SUMMARY_COLUMNS,
        f"FROM jobs WHERE {' AND '.join(['account_id = %(account_id)s', *where])}",
        "jobs.created_at DESC, jobs.id DESC",
        values,
    )
    return Page(data=[JobSummary(**row) for row in rows], total=total, page=params.page, per_page=params.per_page)


async def _public_page(ctx: Context, params: ListJobs) -> _KeptPage:
    """One statement: the version it sees, the page (the first with `SLACK` rows more, to follow changes with)
    and the exact total — kept by the triggers when nothing filters, else counted."""
    where, values = _filters(params)
    condition = " AND ".join(["status = 'published'", *where])
    first = params.page == 1
    values.update(limit=params.per_page + (SLACK if first else 0), offset=params.offset)
    total = f"SELECT count(*) FROM jobs WHERE {condition}" if where else _PUBLISHED_TOTAL
    result = await ctx.conn.execute(
        f"""SELECT page.*, {VERSION_SQL}, ({total}) AS _total FROM (SELECT 1) AS one LEFT JOIN LATERAL (
            SELECT {_PUBLIC_SHOWN.format(status="status")} FROM jobs WHERE {condition}
            ORDER BY created_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s
        ) AS page ON true""",
        values,
    )
    rows = await result.fetchall()
    found = [_public_row(row) for row in rows if row["id"] is not None]
    window = Window.of(found, values["limit"], int(rows[0]["_total"] or 0))
    return _kept_page(params, int(rows[0]["_version"] or 0), window)


async def _public_followed(ctx: Context, params: ListJobs, old: _KeptPage) -> _KeptPage | None:
    """`old` moved by the changes since its version that match its filters; None when it cannot follow them
    (a later page, whose rows shift with every change before it, or too many of its rows left)."""
    where, values = _filters(params)
    columns = _PUBLIC_SHOWN.format(status="'published'")
    changes = await changes_since(ctx, old.version, columns, " AND ".join(where) or "true", values)
    if changes is None or (changes.rows and params.page != 1):
        return None
    window = old.window.followed([(row["_entered"], _public_row(row)) for row in changes.rows])
    if not window.holds(params.per_page):
        return None
    return _kept_page(params, changes.version, window)


def _public_row(row: dict[str, Any]) -> Ranked:
    job = JobSummary(**{key: value for key, value in row.items() if not key.startswith("_")})
    return Ranked(key=(job.created_at, job.id), item=job)


def _kept_page(params: ListJobs, version: int, window: Window) -> _KeptPage:
    jobs = [row.item for row in window.rows[: params.per_page]]
    page = Page(data=jobs, total=window.total, page=params.page, per_page=params.per_page)
    return _KeptPage(version=version, window=window, page=page)


@procedure("jobs.get", scope="read:jobs")
async def get_job(ctx: Context, params: IdParams) -> Job:
    """Get one job: published and closed jobs are visible to everyone, drafts only to their account."""
    job, _ = await _visible(ctx, params.id, lock=False)
    return job


@procedure("jobs.changes", scope="read:jobs")
async def job_changes(ctx: Context, params: FeedParams) -> Feed[Job]:
    """Every job you can see that changed after `cursor`, in its current state, oldest change first: published
    and closed jobs of every account and every job of yours. Follow `next_cursor` while `has_more`; ask again
    later with the last one for what changed since. Nothing is ever skipped (docs/sync.md).
    """
    principal = ctx.principal
    condition = "TRUE" if principal.is_admin else "(jobs.status <> 'draft' OR jobs.account_id = %(account_id)s)"
    rows, next_cursor, has_more = await read_feed(ctx, _FEED, params, condition, {"account_id": principal.account_id})
    return Feed(data=[Job(**row) for row in rows], next_cursor=next_cursor, has_more=has_more)


async def _visible(ctx: Context, job_id: Id, *, lock: bool) -> tuple[Job, str]:
    """The job and its account, if the caller may see it; else `404`."""
    cursor = await ctx.conn.execute(_SELECT + (" FOR UPDATE" if lock else ""), {"id": parse_id(job_id)})
    row = await cursor.fetchone()
    if row is None:
        raise NotFound("No such job.")
    account_id = row.pop("account_id")
    job = Job(**row)
    if job.status == "draft" and not _owns(ctx.principal, account_id):
        raise NotFound("No such job.")
    return job, account_id


async def owned(ctx: Context, job_id: Id, *, lock: bool = True) -> tuple[Job, str]:
    """The job (locked for a change with `lock`) if the caller's account owns it: `404` unseen, `403` not owned.
    The hiring desk reads its jobs through it."""
    job, account_id = await _visible(ctx, job_id, lock=lock)
    if not _owns(ctx.principal, account_id):
        raise Forbidden("Only the account that owns this job may change it.")
    return job, account_id


def _owns(principal: Principal, account_id: str) -> bool:
    return principal.is_admin or principal.account_id == account_id
