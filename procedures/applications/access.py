"""Finding the application a call is about, and what its caller may see of it.

A candidate sees their own applications; the employers of the job's account (and platform admins) see those to
its jobs, with the employer's rating and notes and who applied. Anyone else is told there is no such application:
another account's application is `404`, never `403`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from procedures.applications import Application, Candidate
from rpc.api import Context, Forbidden, Id, InvalidParams, NotFound, Principal, parse_id
from rpc.files.model import as_json, nested, nested_list

COLUMNS = f"""a.id::text AS id, a.job_id::text AS job_id, a.candidate_id::text AS candidate_id, a.status,
    a.cover_letter, a.resume_url, a.rating, a.notes, a.created_at, a.updated_at,
    (SELECT json_build_object('id', c.id::text, 'display_name', c.display_name, 'email', c.email,
                              'headline', c.headline, 'location', c.location)
     FROM users AS c WHERE c.id = a.candidate_id) AS candidate,
    (SELECT {as_json("f")} FROM application_files AS af JOIN files AS f ON f.id = af.file_id
     WHERE af.application_id = a.id AND af.kind = 'resume') AS resume,
    coalesce((SELECT json_agg({as_json("f")} ORDER BY af.position)
              FROM application_files AS af JOIN files AS f ON f.id = af.file_id
              WHERE af.application_id = a.id AND af.kind = 'attachment'), '[]') AS attachments"""
_FIND = f"""
SELECT {COLUMNS}, a.candidate_account_id::text AS candidate_account_id, j.account_id::text AS job_account_id,
       j.title AS job_title, j.company AS job_company
FROM applications AS a JOIN jobs AS j ON j.id = a.job_id
WHERE a.id = %(id)s
"""
_MEMBERS = """
SELECT id::text AS id FROM users
WHERE id = ANY(%(ids)s::uuid[]) AND account_id = %(account_id)s AND role IN ('employer', 'admin')
  AND deleted_at IS NULL
"""


@dataclass(frozen=True, slots=True)
class Found:
    """An application as stored, with what acting on it needs: the accounts of its job (whose events and members
    these are) and of its candidate, and the job's title and company (for the mail about it)."""

    application: Application
    job_account: str
    candidate_account: str
    job_title: str
    job_company: str

    @property
    def candidate(self) -> Candidate:
        assert isinstance(self.application.candidate, Candidate), "read with COLUMNS"
        return self.application.candidate

    def replaced(self, application: Application) -> Found:
        return Found(application, self.job_account, self.candidate_account, self.job_title, self.job_company)


def application_of(row: dict[str, Any]) -> Application:
    """A row of `COLUMNS` as an Application (its files and candidate arrive as JSON)."""
    return Application(
        **{
            **row,
            "candidate": msgspec.convert(row["candidate"], Candidate),
            "resume": nested(row["resume"]),
            "attachments": nested_list(row["attachments"]),
        }
    )


def employs(principal: Principal, job_account: str) -> bool:
    """Whether `principal` acts for the job's account: an employer of it, or a platform admin."""
    return principal.is_admin or (principal.role == "employer" and principal.account_id == job_account)


async def find(ctx: Context, application_id: Id, *, lock: bool, field: str = "id") -> Found:
    """The application, if the caller may see it (locked for a change with `lock`); else `404`."""
    query = _FIND + (" FOR UPDATE OF a" if lock else "")
    row = await (await ctx.conn.execute(query, {"id": parse_id(application_id, field)})).fetchone()
    if row is None:
        raise NotFound("No such application.")
    found = Found(
        job_account=row.pop("job_account_id"),
        candidate_account=row.pop("candidate_account_id"),
        job_title=row.pop("job_title"),
        job_company=row.pop("job_company"),
        application=application_of(row),
    )
    principal = ctx.principal
    if found.application.candidate_id != principal.user_id and not employs(principal, found.job_account):
        raise NotFound("No such application.")
    return found


async def find_owned(ctx: Context, application_id: Id, *, field: str = "id") -> Found:
    """The application, locked, for an action of the employer: only the job's account may take it (admins: any),
    whoever its candidate is — applying to a job is no way into its pipeline. `404` unseen, `403` seen but not
    owned."""
    found = await find(ctx, application_id, lock=True, field=field)
    if not employs(ctx.principal, found.job_account):
        raise Forbidden("Only the account that owns the job may act on its applications.")
    return found


def as_seen_by(principal: Principal, application: Application, job_account: str) -> Application:
    """What `principal` may see: the employer's rating and notes, and who applied, only for those who act for
    the job's account; the candidate sees their application as they sent it."""
    if employs(principal, job_account):
        return application
    return msgspec.structs.replace(application, rating=None, notes=None, candidate=msgspec.UNSET)


def seen(principal: Principal, rows: list[dict[str, Any]]) -> list[Application]:
    """Rows of `COLUMNS` carrying their job's account (`job_account_id`), as `principal` may see them."""
    shown = []
    for row in rows:
        job_account = row.pop("job_account_id")
        shown.append(as_seen_by(principal, application_of(row), job_account))
    return shown


async def members(ctx: Context, job_account: str, values: Sequence[Id], field: str) -> list[str]:
    """`values`, in their order, when each names a different member (employer or admin) of the job's account;
    else `422` on `field`, naming the first that does not (people of other accounts are not told apart from
    ids that name nobody)."""
    ids: list[str] = []
    for value in values:
        try:
            ids.append(str(uuid.UUID(value)) if isinstance(value, str) else "")
        except ValueError:
            ids.append("")
    named = [parsed for parsed in ids if parsed]
    if len(set(named)) != len(named):
        raise InvalidParams([{"field": field, "message": "Name each person once."}])
    rows = await (await ctx.conn.execute(_MEMBERS, {"ids": named, "account_id": job_account})).fetchall()
    known = {row["id"] for row in rows}
    for value, parsed in zip(values, ids, strict=True):
        if parsed not in known:
            shown = msgspec.json.encode(value).decode()[:60]
            message = f"{shown} is not a member (employer or admin) of the account that owns the job."
            raise InvalidParams([{"field": field, "message": message}])
    return ids
