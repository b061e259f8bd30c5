"""The business's share of a person's privacy, handed in at assembly (`Business.privacy`): what an erasure
empties and what retention lets go of in the business's tables, as SQL, when the last member of an account may
not be erased, and the export's document. `rpc/privacy` runs these beside its own steps and knows none of the
business's tables."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from rpc.audit import log as audit_log
from rpc.core.types import Connection
from rpc.files.links import DownloadLinks
from rpc.privacy.export import Held, held


async def _held_alone(conn: Connection, framework: Held) -> msgspec.Struct:
    return framework


@dataclass(frozen=True, slots=True)
class PrivacySteps:
    # Statements run first in an erasure's transaction: `%(id)s` the person, `%(account_id)s` their account.
    erase: Sequence[str] = ()
    # A condition on the account `%(account_id)s` under which its last member may not be erased (an active
    # subscription: erasing them would leave it paid for by nobody who could cancel).
    keeps_last_member: str = "false"
    # One bounded batch each, by name: `%(batch)s` rows at most, the periods `%(webhook_days)s` and
    # `%(application_days)s` (`RETENTION_*_DAYS`).
    retention: Mapping[str, str] = field(default_factory=dict)
    # The export's document: what the framework holds of the person, with the business's rows about them.
    document: Callable[[Connection, Held], Awaitable[msgspec.Struct]] = _held_alone


async def export(
    conn: Connection,
    steps: PrivacySteps,
    user_id: str,
    *,
    account_id: str,
    actor: audit_log.Actor,
    origin: audit_log.Origin,
    links: DownloadLinks,
) -> msgspec.Struct:
    """Everything held about the user, recorded as `profile.exported` (`rpc.privacy.export.held`), as the
    business's document."""
    framework = await held(conn, user_id, account_id=account_id, actor=actor, origin=origin, links=links)
    return await steps.document(conn, framework)
