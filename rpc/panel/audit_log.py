"""Settings > Audit log: the account's audit entries, newest first, filtered by action, actor and a first day,
a page at a time with an "Older" link. It reads through `rpc.audit.entries`, the query behind `audit.list`, and
serves the same roles (employers and admins); it shows the signed-in person's own account only, also to a
platform admin, whose `audit.list` reads every account's. Filters travel in the address (a GET form): reading
changes nothing, so it needs no CSRF token, and the page can be bookmarked."""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Mapping

from starlette.responses import Response

from rpc.audit import entries
from rpc.audit.log import ACTIONS
from rpc.core.errors import InvalidParams
from rpc.panel import audit_labels
from rpc.panel.handler import Panel, error_page, page

PER_PAGE = 50
MAX_ACTOR_ID = 100  # as `audit.list`'s `actor_id`
FILTERS = ("action", "actor_id", "since")


class BadFilter(Exception):
    """A filter the page cannot use; `errors` maps each field to its message."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__(errors)
        self.errors = errors


@page
async def audit_page(panel: Panel) -> Response:
    """`GET /panel/audit-log[?action=&actor_id=&since=YYYY-MM-DD&cursor=]`."""
    if panel.user.role not in entries.AUDIT_ROLES:
        return error_page(
            403,
            "Audit log",
            "The audit log belongs to hiring accounts: their employers and admins see here who did what.",
            user=panel.user,
        )
    shown = {name: panel.request.query_params.get(name, "").strip() for name in FILTERS}
    kept = {name: value for name, value in shown.items() if value}
    newest = "/panel/audit-log" + (f"?{urllib.parse.urlencode(kept)}" if kept else "")
    cursor = panel.request.query_params.get("cursor") or None
    try:
        filters = _filters(panel.account_id, shown)
        secret_key = panel.services.settings.secret_key
        found = await entries.page(panel.conn, filters, cursor=cursor, per_page=PER_PAGE, secret_key=secret_key)
    except BadFilter as exc:
        return _render(panel, shown, errors=exc.errors, status=400)
    except InvalidParams:
        error = "That page no longer matches the filters: start again from the newest entries."
        return _render(panel, shown, errors={"form": error}, newest=newest, status=400)
    older = None
    if found.next_cursor is not None:
        older = "/panel/audit-log?" + urllib.parse.urlencode({**kept, "cursor": found.next_cursor})
    ids = [entry.actor_id for entry in found.data] + [entry.target_id for entry in found.data]
    named = await audit_labels.labels(panel.conn, panel.account_id, ids)
    return _render(panel, shown, found=found, labels=named, older=older, newest=newest if cursor else None)


def _filters(account_id: str, shown: Mapping[str, str]) -> entries.Filters:
    """The filters as the query takes them; `BadFilter` names every field that is wrong."""
    errors = {}
    action = shown["action"] or None
    if action is not None and action not in ACTIONS:
        errors["action"] = "Choose one of the actions in the list."
    actor_id = shown["actor_id"] or None
    if actor_id is not None and (len(actor_id) > MAX_ACTOR_ID or "\x00" in actor_id):
        errors["actor_id"] = f"An actor id has at most {MAX_ACTOR_ID} characters."
    since = None
    if shown["since"]:
        try:
            since = dt.datetime.combine(dt.date.fromisoformat(shown["since"]), dt.time(), dt.UTC)
        except ValueError:
            errors["since"] = "Give a day as YYYY-MM-DD."
    if errors:
        raise BadFilter(errors)
    return entries.Filters(account_id=account_id, action=action, actor_id=actor_id, since=since)


def _render(
    panel: Panel,
    shown: Mapping[str, str],
    *,
    found: entries.AuditPage | None = None,
    labels: Mapping[str, str] | None = None,
    older: str | None = None,
    newest: str | None = None,
    errors: Mapping[str, str] | None = None,
    status: int = 200,
) -> Response:
    return panel.render(
        "panel/audit_log.html",
        status,
        section="audit_log",
        actions=sorted(ACTIONS),
        values=shown,
        filtered=any(shown.values()),
        entries=found.data if found else [],
        labels=labels or {},
        older=older,
        newest=newest,
        errors=errors or {},
    )
