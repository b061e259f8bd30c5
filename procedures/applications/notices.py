"""Who hears of an application: the job's account's members of each new one (unless they turned it off), and the
candidate when theirs is decided — a courteous word naming the job and the company, and nothing internal (no
rating, note or reason)."""

from __future__ import annotations

from procedures.applications import Status
from procedures.applications.access import Found
from procedures.applications.letters import desk_link, home_link, mailable, send
from rpc.api import Context
from rpc.mail.outbox import Letter

_MEMBERS = f"""
SELECT u.email FROM users AS u
WHERE u.account_id = %(account_id)s AND u.role IN ('employer', 'admin') AND u.notify_new_applications
  AND {mailable("u")}
ORDER BY u.created_at, u.id
"""
_CANDIDATE = f"SELECT u.email FROM users AS u WHERE u.id = %(id)s AND {mailable('u')}"
DECISIONS: dict[Status, str] = {"rejected": "application_rejected", "hired": "application_hired"}


async def new_application(ctx: Context, found: Found) -> None:
    """Each member of the job's account who wants it hears of the new application, with a link to it."""
    rows = await (await ctx.conn.execute(_MEMBERS, {"account_id": found.job_account})).fetchall()
    context = {
        "job_title": found.job_title,
        "company": found.job_company,
        "candidate_name": found.candidate.display_name or "A candidate",
        "link": desk_link(ctx.settings, found.application.id),
    }
    await send(ctx, [Letter("application_new", row["email"], context) for row in rows])


async def decided(ctx: Context, found: Found, status: Status) -> None:
    """The candidate hears that their application was `rejected` or `hired` (other moves say nothing)."""
    kind = DECISIONS.get(status)
    if kind is None:
        return
    row = await (await ctx.conn.execute(_CANDIDATE, {"id": found.application.candidate_id})).fetchone()
    if row is None:
        return
    context = {
        "job_title": found.job_title,
        "company": found.job_company,
        "name": found.candidate.display_name,
        "link": home_link(ctx.settings),
    }
    await send(ctx, [Letter(kind, row["email"], context)])
