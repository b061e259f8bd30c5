"""A procedure called from a page's form, for the person signed in to the browser: the API's own code, found in
the registry, with the role check the dispatcher makes, on the page's connection — a write in one transaction
with its events and mail — so that no page is a second implementation of any rule. What the procedure refuses
comes back as `Refused`, in words a form shows next to its fields; `NotFound` passes through, for the page's 404.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import psycopg

from procedures.public_pages.site import context_for
from rpc.api import Context, NotFound, Params, RpcError
from rpc.core import idempotency
from rpc.core.database_errors import translate
from rpc.core.params import field_errors
from rpc.core.registry import Procedure
from rpc.panel.handler import Panel

FORM_KEY = "form_key"  # the hidden field of `ui.form_key()`
P = TypeVar("P", bound=Params)
R = TypeVar("R")
Handler = Callable[[Context, P], Awaitable[R]]


@dataclass(frozen=True)
class Refused(Exception):
    """A procedure's refusal as a form shows it: the status to answer with, a sentence, the message of each field
    at fault (by the procedure's parameter names), and the error's details (an invalid move's `from` and `to`)."""

    status: int
    message: str
    fields: Mapping[str, str] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, error: RpcError) -> Refused:
        details = error.details or {}
        errors = details.get("errors", [])
        fields = {entry["field"]: entry["message"] for entry in errors if entry.get("field")}
        message = error.message if not errors else "Please correct the fields marked below."
        unplaced = [entry["message"] for entry in errors if not entry.get("field")]
        return cls(error.status, " ".join(unplaced) or message, fields, details)


def params(params_type: type[P], values: Mapping[str, Any]) -> P:
    """A form's values as the procedure's parameters, checked as the API checks a JSON body; `Refused` (422)
    naming every field at fault."""
    try:
        return msgspec.convert(values, params_type, strict=True)
    except msgspec.ValidationError as exc:
        errors = field_errors(params_type, dict(values), exc, strict=True)
        fields = {entry["field"]: entry["message"] for entry in errors if entry["field"]}
        unplaced = " ".join(entry["message"] for entry in errors if not entry["field"])
        raise Refused(422, unplaced or "Please correct the fields marked below.", fields) from exc


async def context(panel: Panel, handler: Handler[Any, Any]) -> Context:
    """The `Context` the API gives the procedure `handler` when the signed-in person calls it (for pages that read
    through the rooms' own functions beside a procedure, under its rules)."""
    proc = registered(panel, handler)
    return await context_for(panel.request, panel.conn, panel.services, panel.user, proc.name)


async def run(panel: Panel, handler: Handler[P, R], params: P, *, once: bool = False) -> R:
    """`handler(ctx, params)` as the signed-in person, the dispatcher's role check first; a write in a transaction
    of its own, which a refusal rolls back whole. `once`: the form carries a key (`ui.form_key()`, new each time
    its page is shown) kept as the API keeps an `Idempotency-Key`, so that the form sent twice — a double click, a
    reload after a slow answer — makes one thing, and the second sending gets the first one's result."""
    proc = registered(panel, handler)
    if proc.roles is not None and panel.user.role not in proc.roles:
        raise Refused(403, f"Your role ({panel.user.role}) may not do this.")
    ctx = await context_for(panel.request, panel.conn, panel.services, panel.user, proc.name)
    try:
        if not proc.write:
            return await handler(ctx, params)
        async with panel.conn.transaction():
            claim = _claim(panel, proc, params) if once else None
            if claim is not None:
                kept = await idempotency.claim(panel.conn, claim)
                if isinstance(kept, idempotency.Kept):
                    result: R = msgspec.json.decode(kept.body, type=proc.result_type)
                    return result
            result = await handler(ctx, params)
            if claim is not None:
                await idempotency.keep(panel.conn, claim, 200, msgspec.json.encode(result))
            return result
    except idempotency.KeyInUse as exc:
        raise Refused(409, "This form is being sent already: wait for its page, or reload it in a moment.") from exc
    except idempotency.KeyReused as exc:
        raise Refused(422, "This form was sent before with other values: open it again to send new ones.") from exc
    except NotFound:
        raise
    except RpcError as exc:
        raise Refused.of(exc) from exc
    except psycopg.Error as exc:
        error = translate(exc, panel.services.registry)
        if error is None:
            raise
        raise Refused.of(error) from exc


async def attempt(panel: Panel, handler: Handler[P, Any], params: P) -> Refused | None:
    """`run`, for a form whose page shows no result: None when it was done, else what the procedure refused."""
    try:
        await run(panel, handler, params)
    except Refused as refused:
        return refused
    return None


def _claim(panel: Panel, proc: Procedure, params: Params) -> idempotency.Claim | None:
    """The key the form was sent with, for this call; None for a form without one (or with one no page makes)."""
    try:
        key = str(uuid.UUID(panel.field(FORM_KEY)))
    except ValueError:
        return None
    return idempotency.claim_for(panel.account_id, panel.user.user_id, key, proc.name, msgspec.json.encode(params))


def registered(panel: Panel, handler: Handler[Any, Any]) -> Procedure:
    """The registered procedure whose code `handler` is."""
    found = next((proc for proc in panel.services.registry if proc.handler is handler), None)
    assert found is not None, f"{handler.__qualname__} is not a registered procedure"
    return found
