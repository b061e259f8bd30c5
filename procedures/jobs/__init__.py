"""Job postings: `draft → published → closed`, visible to their account until published; and their search
(`procedures.jobs.search`), in the same room, since each uses the other."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from procedures.feed import Feed, FeedParams, FeedQuery, read_feed
from procedures.jobs.search import listing
from procedures.jobs.search.corpus import INDEX
from procedures.published_cache import PROBE, VERSION_SQL, PublishedCache, changes_since
from procedures.window import SLACK, Ranked, Window
from rpc.api import (
    EXAMPLE_ID,
    SPACE,
    Context,
    FieldError,
    Forbidden,
    Id,
    IdParams,
    InvalidTransition,
    LongText,
    NotFound,
    Page,
    PageParams,
    Params,
    PlainText,
    Principal,
    Role,
    ShortText,
    Struct,
    changes,
    like_pattern,
    page_and_total,
    parse_id,
    procedure,
    set_clause,
)
from rpc.core.memory import Slot
from rpc.search.answers import Answers
from rpc.search.index import SearchIndex
from rpc.search.view import View

EmploymentType = Literal["full_time", "part_time", "contract", "internship", "temporary"]
# What interviewers rate on a job's scorecards (docs/interviews.md): a name of 1 to 80 characters on one line.
_LINE = r"\x00-\x1f\x7f"
AttributeName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=80, pattern=rf"^[^{_LINE}]*[^{_LINE}{SPACE}][^{_LINE}]*$")
]
ScorecardAttributes = Annotated[
    tuple[AttributeName, ...],
    msgspec.Meta(
        max_length=20,
        description="What interviewers rate on this job's scorecards: up to 20 names, distinct whatever the case.",
        extra_json_schema={"uniqueItems": True},
    ),
]
JobStatus = Literal["draft", "published", "closed"]
EMPLOYERS: tuple[Role, ...] = ("employer", "admin")


class JobSummary(Struct, frozen=True, kw_only=True):
    """A job as it appears in lists."""

    id: str
    title: str
    company: str
    location: str
    status: JobStatus
    created_at: dt.datetime


class Job(JobSummary, frozen=True, kw_only=True):
    """A job in full."""

    description: str | None
    employment_type: EmploymentType | None
    updated_at: dt.datetime
    published_at: dt.datetime | None
    closed_at: dt.datetime | None
    scorecard_attributes: list[str]


class JobEvent(Struct, frozen=True, kw_only=True):
    """Data of `job.published`, `job.closed` and `job.updated`."""

    job_id: str
    title: str
    status: JobStatus


class ListJobs(PageParams, frozen=True, kw_only=True):
    q: PlainText | None = None
    location: PlainText | None = None
    company: PlainText | None = None
    employment_type: EmploymentType | None = None
    mine: bool = False

    example: ClassVar[Mapping[str, Any]] = {"q": "engineer", "location": "Berlin", "page": 1, "per_page": 20}


class CreateJob(Params, frozen=True, kw_only=True):
    title: ShortText
    company: ShortText
    location: ShortText
    description: LongText | None = None
    employment_type: EmploymentType | None = None
    scorecard_attributes: ScorecardAttributes = ()

    example: ClassVar[Mapping[str, Any]] = {
        "title": "Backend engineer",
        "company": "Acme GmbH",
        "location": "Berlin",
        "description": "Python, PostgreSQL and a taste for well-kept APIs.",
        "employment_type": "full_time",
        "scorecard_attributes": ["SQL", "System design", "Communication"],
    }

    def __post_init__(self) -> None:
        distinct_attributes(self.scorecard_attributes)


class UpdateJob(Params, frozen=True, kw_only=True):
    id: Id
    title: ShortText | msgspec.UnsetType = msgspec.UNSET
    company: ShortText | msgspec.UnsetType = msgspec.UNSET
    location: ShortText | msgspec.UnsetType = msgspec.UNSET
    description: LongText | None | msgspec.UnsetType = msgspec.UNSET
    employment_type: EmploymentType | None | msgspec.UnsetType = msgspec.UNSET
    scorecard_attributes: ScorecardAttributes | msgspec.UnsetType = msgspec.UNSET

    example: ClassVar[Mapping[str, Any]] = {"id": EXAMPLE_ID, "title": "Senior backend engineer"}

    def __post_init__(self) -> None:
        if self.scorecard_attributes is not msgspec.UNSET:
            distinct_attributes(self.scorecard_attributes)


_SUMMARY = "id::text AS id, title, company, location, status, created_at"
_FULL = f"{_SUMMARY}, description, employment_type, updated_at, published_at, closed_at, scorecard_attributes"
_EDITABLE = ("title", "company", "location", "description", "employment_type", "scorecard_attributes")

_FILTERS = {
    "q": "(title ILIKE %(q)s OR company ILIKE %(q)s)",
    "location": "location ILIKE %(location)s",
    "company": "company ILIKE %(company)s",
    "employment_type": "employment_type = %(employment_type)s",
}
_FEED = FeedQuery(name="jobs.changes", columns=_FULL, source="FROM jobs", table="jobs")
_PUBLISHED_TOTAL = "SELECT total FROM job_totals WHERE status = 'published'"
# What the public list shows of a job, from `jobs` or from the log of changes (which keeps published states).
_PUBLIC_SHOWN = "id::text AS id, title, company, location, {status} AS status, created_at"


def distinct_attributes(names: tuple[str, ...]) -> None:
    """Scorecard attributes are told apart by name, whatever the case: `SQL` and `sql` are one attribute."""
    seen: set[str] = set()
    for name in names:
        if name.casefold() in seen:
            raise FieldError("scorecard_attributes", f"{name!r} is there twice; name each attribute once.")
        seen.add(name.casefold())


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
_SELECT = f"SELECT {_FULL}, account_id::text AS account_id FROM jobs WHERE id = %(id)s"
_INSERT = f"""
INSERT INTO jobs (account_id, created_by, title, company, location, description, employment_type,
                  scorecard_attributes)
VALUES (%(account_id)s, %(user_id)s, %(title)s, %(company)s, %(location)s, %(description)s, %(employment_type)s,
        %(scorecard_attributes)s)
RETURNING {_FULL}
"""
_PUBLISH = f"""
UPDATE jobs SET status = 'published', published_at = now(), updated_at = now()
WHERE id = %(id)s RETURNING {_FULL}
"""
_CLOSE = f"""
UPDATE jobs SET status = 'closed', closed_at = now(), updated_at = now()
WHERE id = %(id)s RETURNING {_FULL}
"""


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
    shown, total = listing.newest(
        view,
        q=params.q,
        location=params.location,
        company=params.company,
        employment_type=params.employment_type,
        limit=params.per_page,
        offset=params.offset,
    )
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
        _SUMMARY,
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


@procedure("jobs.create", scope="write:jobs", write=True, roles=EMPLOYERS)
async def create_job(ctx: Context, params: CreateJob) -> Job:
    """Create a job in your account as a `draft`."""
    cursor = await ctx.conn.execute(
        _INSERT,
        {
            "account_id": ctx.principal.account_id,
            "user_id": ctx.principal.user_id,
            **msgspec.structs.asdict(params),
            "scorecard_attributes": list(params.scorecard_attributes),
        },
    )
    return Job(**await cursor.fetchone())  # type: ignore[arg-type]


@procedure("jobs.update", scope="write:jobs", write=True, roles=EMPLOYERS, emits=("job.updated",))
async def update_job(ctx: Context, params: UpdateJob) -> Job:
    """Change any of a job's title, company, location, description and employment type (event `job.updated`)."""
    job, account_id = await owned(ctx, params.id)
    changed = changes(params, _EDITABLE)
    if "scorecard_attributes" in changed:
        changed["scorecard_attributes"] = list(changed["scorecard_attributes"])
    if not changed:
        return job
    cursor = await ctx.conn.execute(
        f"UPDATE jobs SET {set_clause(changed)} WHERE id = %(id)s RETURNING {_FULL}",
        {**changed, "id": job.id},
    )
    updated = Job(**await cursor.fetchone())  # type: ignore[arg-type]
    await _announce(ctx, "job.updated", updated, account_id)
    return updated


@procedure("jobs.publish", scope="write:jobs", write=True, roles=EMPLOYERS, emits=("job.published",))
async def publish_job(ctx: Context, params: IdParams) -> Job:
    """Publish a draft (`draft → published`, event `job.published`)."""
    return await _transition(ctx, params.id, "draft", "published", _PUBLISH)


@procedure("jobs.close", scope="write:jobs", write=True, roles=EMPLOYERS, emits=("job.closed",))
async def close_job(ctx: Context, params: IdParams) -> Job:
    """Close a published job (`published → closed`, event `job.closed`)."""
    return await _transition(ctx, params.id, "published", "closed", _CLOSE)


async def _transition(ctx: Context, job_id: Id, source: JobStatus, target: JobStatus, query: str) -> Job:
    job, account_id = await owned(ctx, job_id)
    if job.status != source:
        raise InvalidTransition(job.status, target)
    cursor = await ctx.conn.execute(query, {"id": job.id})
    changed = Job(**await cursor.fetchone())  # type: ignore[arg-type]
    await _announce(ctx, f"job.{target}", changed, account_id)
    return changed


async def _announce(ctx: Context, kind: str, job: Job, account_id: str) -> None:
    await ctx.emit(kind, JobEvent(job_id=job.id, title=job.title, status=job.status), [account_id])


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
