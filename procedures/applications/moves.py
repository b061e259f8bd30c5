"""An application moved along the pipeline, whichever procedure moves it (`applications.update_status`,
`.withdraw`, scheduling an interview, sending or accepting an offer): the row, its history, the
`application.status_changed` event to the job's and the candidate's accounts, and what follows from a decision —
the candidate told of a rejection or a hire, the interviews that have not started cancelled, the open offers
withdrawn."""

from __future__ import annotations

from procedures.applications import FINAL, PIPELINE, Application, Status, StatusChanged
from procedures.applications.access import COLUMNS, Found, application_of
from procedures.applications.interviews import cancelling as interviews
from procedures.applications.notices import decided
from procedures.applications.offers import cancelling as offers
from rpc.api import Context, InvalidTransition, one_row

_SET_STATUS = f"""
WITH a AS (
    UPDATE applications SET status = %(status)s, updated_at = now() WHERE id = %(id)s RETURNING *
)
SELECT {COLUMNS} FROM a
"""
_HISTORY = """
INSERT INTO application_status_history (application_id, from_status, to_status, changed_by)
VALUES (%(application_id)s, %(from_status)s, %(to_status)s, %(changed_by)s)
"""
# What a move may emit besides its own event: a decision cancels interviews and withdraws offers.
KINDS = ("application.status_changed", *interviews.KINDS, *offers.KINDS)


def check_move(current: Status, target: Status) -> None:
    """Forward along the pipeline (skipping allowed) or to `rejected`, from any non-final status."""
    if current not in FINAL:
        if target == "rejected":
            return
        if target in PIPELINE and PIPELINE.index(target) > PIPELINE.index(current):
            return
    raise InvalidTransition(current, target)


async def move(ctx: Context, found: Found, target: Status) -> Found:
    """Move the (locked) application to `target`, with everything that follows; the moved application."""
    previous = found.application.status
    cursor = await ctx.conn.execute(_SET_STATUS, {"id": found.application.id, "status": target})
    moved = found.replaced(application_of(await one_row(cursor)))
    await record(ctx, moved.application, previous)
    await announce(ctx, moved, previous)
    if target in FINAL:
        await interviews.cancel_not_started(ctx, moved.application.id, moved.job_account)
        await offers.withdraw_open(ctx, moved, tell_candidate=target != "hired")
        await decided(ctx, moved, target)
    return moved


async def record(ctx: Context, application: Application, previous: Status | None) -> None:
    """The application's history: who moved it, from what, to what."""
    values = {
        "application_id": application.id,
        "from_status": previous,
        "to_status": application.status,
        "changed_by": ctx.principal.user_id,
    }
    await ctx.conn.execute(_HISTORY, values)


async def announce(ctx: Context, found: Found, previous: Status) -> None:
    application = found.application
    event = StatusChanged(
        application_id=application.id,
        job_id=application.job_id,
        old_status=previous,
        new_status=application.status,
        updated_by=ctx.principal.user_id,
    )
    await ctx.emit("application.status_changed", event, [found.job_account, found.candidate_account])
