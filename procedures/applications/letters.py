"""The loop's mail: every kind it sends, with its subject (our words only: never text a user wrote, RFC 5322's
most abused header), and the links its messages carry. Each message is queued in the transaction of the change
it tells of (`ctx.mail`), so a change rolled back sends nothing and a replayed write sends nothing again."""

from __future__ import annotations

from collections.abc import Sequence

from rpc.api import Context
from rpc.mail.outbox import Letter, Mail
from rpc.settings import Settings

SUBJECTS = {
    "application_new": "A new application",
    "application_rejected": "An update on your application",
    "application_hired": "Your application was successful",
    "interview_candidate": "{headline}",
    "interview_interviewer": "{headline}",
    "scorecard_reminder": "Reminder: your scorecard is waiting",
    "offer_sent": "You have an offer",
    "offer_cancelled": "An offer was withdrawn",
    "offer_to_approve": "An offer waits for your approval",
}
TEMPLATES = "procedures.applications"


def mailable(alias: str) -> str:
    """Whether the user aliased `alias` may be mailed: an address they confirmed, not erased (the alerts' rule)."""
    return f"({alias}.email IS NOT NULL AND {alias}.email_verified_at IS NOT NULL AND {alias}.deleted_at IS NULL)"


def mail_of(ctx: Context) -> Mail:
    if ctx.mail is None:
        raise RuntimeError("the dispatcher hands every call the mail queue")
    return ctx.mail


async def send(ctx: Context, letters: Sequence[Letter]) -> None:
    """Queue `letters` in the call's transaction."""
    await mail_of(ctx).send_many(ctx.conn, letters)


def desk_link(settings: Settings, application_id: str) -> str:
    """The application's page in the panel, where its people act on it (and submit scorecards)."""
    return f"{settings.public_url}/panel/applications/{application_id}"


def home_link(settings: Settings) -> str:
    """A candidate's own page: their applications, interviews and offers."""
    return f"{settings.public_url}/me"
