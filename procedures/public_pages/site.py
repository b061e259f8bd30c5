"""What the public pages share: their templates (in front of the panel's and the web sign-in's, whose
`base.html` they extend), their headers, a published job read by id, and a procedure's `Context` for the person
signed in to this browser, so that a page does what the API does by running the procedure's own code."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from procedures.public_pages.jobposting import PublicJob
from rpc.api import Connection, Context, Principal
from rpc.panel.pages import PanelPages
from rpc.services import Services
from rpc.web.auth_api import client_address
from rpc.web.pages import content_security_policy
from rpc.web.sessions import WebUser

PAGES = PanelPages("procedures.public_pages")
# A CDN (and the browser) may keep a public page a minute: a closed job stops being offered soon after.
PUBLIC_CACHE = "public, max-age=60"

_JOB = """
SELECT id::text AS id, title, company, location, description, employment_type, status, published_at, updated_at
FROM jobs WHERE id = %(id)s
"""
_PLAN = "SELECT plan FROM accounts WHERE id = %(id)s"


def render(template: str, status: int = 200, *, user: WebUser | None = None, **values: Any) -> HTMLResponse:
    """A page of these templates, with the panel's headers (no caching) and no script at all."""
    context = {"user": user, "csrf_token": user.csrf_token if user else "", "notice": None, "status": status}
    context.update(values)
    response = PAGES.render(f"public/{template}", context, status)
    response.headers["Content-Security-Policy"] = content_security_policy()
    return response


def public(response: Response) -> Response:
    """`response` as the same for everyone: cacheable a minute by any cache. Only pages rendered without the
    visitor (no `user`, no CSRF token) may be."""
    response.headers["Cache-Control"] = PUBLIC_CACHE
    return response


def message(
    status: int, title: str, text: str, *, user: WebUser | None = None, link: tuple[str, str] | None = None
) -> HTMLResponse:
    return render("message.html", status, user=user, title=title, message=text, link=link)


async def find_job(conn: Connection, job_id: str) -> PublicJob | None:
    """The job with this id in any status; None for a malformed or unknown id."""
    try:
        parsed = uuid.UUID(job_id)
    except ValueError:
        return None
    row = await (await conn.execute(_JOB, {"id": parsed})).fetchone()
    return PublicJob(**row) if row else None


def job_gone(job: PublicJob | None) -> Response | None:
    """The answer for a job nobody may see or apply to — `404` for unknown and drafts, `410` for closed — or None
    for a published one."""
    if job is None or job.status == "draft":
        return message(404, "No such job", "There is no job at this address. It may never have been published.")
    if job.status == "closed":
        text = f"{job.title} at {job.company} is closed: it no longer takes applications."
        return message(410, "This job is closed", text, link=("/jobs", "Search the open jobs"))
    return None


async def context_for(request: Request, conn: Connection, services: Services, user: WebUser, procedure: str) -> Context:
    """The `Context` the API would give `procedure` when called by `user` in this browser session, on `conn`
    (the caller opens the transaction a write needs)."""
    row = await (await conn.execute(_PLAN, {"id": user.account_id})).fetchone()
    principal = Principal(
        user_id=user.user_id,
        account_id=user.account_id,
        role=user.role,
        plan=row["plan"] if row else "free",
        credential="session",
    )
    return visitor_context(request, conn, services, principal, procedure)


def visitor_context(
    request: Request,
    conn: Connection,
    services: Services,
    principal: Principal,
    procedure: str,
    probes: Mapping[str, str] | None = None,
) -> Context:
    """The `Context` of `procedure` run by this page for `principal`, on `conn`: what the procedure would do in a
    transaction of its own (storing a file's row) is a savepoint on the page's connection, inside the page's own
    transaction (so that it commits with the rest of the page's work, or not at all)."""
    proc = services.registry.get(procedure)
    assert proc is not None, procedure

    @contextlib.asynccontextmanager
    async def on_the_page_connection() -> AsyncIterator[Connection]:
        async with conn.transaction():
            yield conn

    return Context(
        principal=principal,
        request_id=getattr(request.state, "request_id", ""),
        client_address=client_address(request),
        user_agent=request.headers.get("user-agent", ""),
        settings=services.settings,
        emitter=services.emitter,
        http=services.http,
        connection=conn,
        transactions=on_the_page_connection,
        memory=services.memory,
        emits=frozenset(proc.emits),
        probes=probes or {},
        indexes=services.indexes,
        files=services.files,
        mail=services.mail,
    )
