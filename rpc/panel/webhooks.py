"""Settings > Webhooks: an account's endpoints (URL, event kinds, enabled, last delivery), adding and editing
them (the URL checked as delivery will check it: the SSRF rules in production), the signing secret (revealed
on request, rotated now or with a 24-hour overlap), enabling and disabling, a test event, and the delivery
log with "redeliver all failed since …". The work itself is `services.webhooks` (rpc/webhooks.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from starlette.responses import Response

from rpc.outbox.endpoints import ROTATION_OVERLAP, Endpoint, InvalidEndpoint
from rpc.panel import deliveries, reveals
from rpc.panel.handler import Panel, page
from rpc.privacy.retention import RetentionSettings
from rpc.web.pages import redirect

SINCE_FORMAT = "%Y-%m-%dT%H:%M"


def kind_groups(kinds: Sequence[str]) -> list[tuple[str, list[str]]]:
    """The vocabulary's event kinds grouped by area (`job.published` → "Job events"), in the vocabulary's order."""
    groups: dict[str, list[str]] = {}
    for kind in kinds:
        groups.setdefault(kind.partition(".")[0], []).append(kind)
    return [(f"{area.capitalize()} events", members) for area, members in groups.items()]


@page
async def endpoints_page(panel: Panel) -> Response:
    """`GET /panel/webhooks`: the endpoints, and the form to add one."""
    suggested = list(panel.services.vocabulary.suggested_event_kinds)
    return await _endpoints(panel, values={"url": "", "event_kinds": suggested})


@page
async def create_endpoint(panel: Panel) -> Response:
    """`POST /panel/webhooks` with `url` and `event_kinds` (repeated): redirects to the new endpoint's page, where
    its secret is shown (once there; later on request)."""
    url, kinds = panel.field("url").strip(), panel.fields("event_kinds")
    try:
        async with panel.conn.transaction():
            endpoint, secret = await panel.services.webhooks.create(panel.conn, panel.account_id, url, kinds)
            await panel.audit("webhook.created", endpoint.id)
            token = await reveals.keep(panel, "webhook_created", endpoint.id, secret)
    except InvalidEndpoint as exc:
        values = {"url": url, "event_kinds": kinds}
        return await _endpoints(panel, values=values, errors={exc.field: str(exc)}, status=400)
    return redirect(f"/panel/webhooks/{endpoint.id}?reveal={token}")


@page
async def endpoint_page(panel: Panel) -> Response:
    """`GET /panel/webhooks/{id}?page=N`: settings, secret, test event and the delivery log; with `?reveal=`,
    once, the secret a form just made."""
    endpoint = await _get(panel)
    kinds: tuple[reveals.Kind, ...] = ("webhook_created", "webhook_rotated_now", "webhook_rotated_overlap")
    reveal = await reveals.take(panel, *kinds, object_id=endpoint.id)
    if reveal is None:
        return await _endpoint(panel, endpoint, notice=reveals.shown_already(panel, reveal) or _queued(panel))
    return await _endpoint(panel, endpoint, secret=reveal.secret, occasion=reveal.kind.removeprefix("webhook_"))


@page
async def edit_page(panel: Panel) -> Response:
    """`GET /panel/webhooks/{id}/edit`."""
    endpoint = await _get(panel)
    return _edit_form(panel, endpoint, {"url": endpoint.url, "event_kinds": endpoint.event_kinds})


@page
async def save_endpoint(panel: Panel) -> Response:
    """`POST /panel/webhooks/{id}/edit` with `url` and `event_kinds`."""
    endpoint = await _get(panel)
    url, kinds = panel.field("url").strip(), panel.fields("event_kinds")
    try:
        async with panel.conn.transaction():
            await panel.services.webhooks.update(panel.conn, panel.account_id, endpoint.id, url=url, event_kinds=kinds)
            await panel.audit("webhook.updated", endpoint.id)
    except InvalidEndpoint as exc:
        return _edit_form(panel, endpoint, {"url": url, "event_kinds": kinds}, {exc.field: str(exc)}, 400)
    return redirect(f"/panel/webhooks/{endpoint.id}?notice=endpoint_updated")


@page
async def reveal_secret(panel: Panel) -> Response:
    """`POST /panel/webhooks/{id}/secret`: the signing secret, in this answer's body."""
    endpoint = await _get(panel)
    async with panel.conn.transaction():
        secret = await panel.services.webhooks.reveal_secret(panel.conn, panel.account_id, endpoint.id)
        await panel.audit("webhook.secret_revealed", endpoint.id)
    return await _endpoint(panel, endpoint, secret=secret, occasion="revealed")


@page
async def rotate_secret(panel: Panel) -> Response:
    """`POST /panel/webhooks/{id}/rotate` with `rotation` = `now` or `overlap`: redirects to the endpoint's page,
    which shows the new secret once."""
    endpoint = await _get(panel)
    rotation = panel.field("rotation")
    if rotation not in ("now", "overlap"):
        return await _endpoint(panel, endpoint, status=400, errors={"rotation": "Choose how to rotate."})
    async with panel.conn.transaction():
        secret = await panel.services.webhooks.rotate_secret(
            panel.conn, panel.account_id, endpoint.id, overlap=rotation == "overlap"
        )
        await panel.audit("webhook.secret_rotated", endpoint.id)
        kind: reveals.Kind = "webhook_rotated_overlap" if rotation == "overlap" else "webhook_rotated_now"
        token = await reveals.keep(panel, kind, endpoint.id, secret)
    return redirect(f"/panel/webhooks/{endpoint.id}?reveal={token}")


@page
async def confirm_delete(panel: Panel) -> Response:
    """`GET /panel/webhooks/{id}/delete`: are you sure?"""
    return panel.render("panel/webhook_delete.html", section="webhooks", endpoint=await _get(panel))


@page
async def delete_endpoint(panel: Panel) -> Response:
    """`POST /panel/webhooks/{id}/delete`: the endpoint is gone, with its delivery log; nothing more is sent to it
    (a delivery already in flight finds no endpoint and stops)."""
    endpoint = await _get(panel)
    async with panel.conn.transaction():
        await panel.services.webhooks.delete(panel.conn, panel.account_id, endpoint.id)
        await panel.audit("webhook.deleted", endpoint.id)
    return redirect("/panel/webhooks?notice=endpoint_deleted")


@page
async def set_enabled(panel: Panel) -> Response:
    """`POST /panel/webhooks/{id}/enabled` with `enabled` = `true` or `false`. Enabling an endpoint disabled for
    failing restarts its clock of failures; its failed deliveries wait to be redelivered."""
    endpoint = await _get(panel)
    enabled = panel.field("enabled") == "true"
    async with panel.conn.transaction():
        await panel.services.webhooks.update(panel.conn, panel.account_id, endpoint.id, enabled=enabled)
        await panel.audit("webhook.enabled" if enabled else "webhook.disabled", endpoint.id)
    notice = "endpoint_enabled" if enabled else "endpoint_disabled"
    return redirect(f"/panel/webhooks/{endpoint.id}?notice={notice}")


@page
async def send_test(panel: Panel) -> Response:
    """`POST /panel/webhooks/{id}/test`: `webhook.test` to this endpoint, through the queue like any event."""
    endpoint = await _get(panel)
    async with panel.conn.transaction():
        await panel.services.webhooks.send_test_event(panel.conn, panel.account_id, endpoint.id)
    return redirect(f"/panel/webhooks/{endpoint.id}?notice=test_sent")


@page
async def redeliver_since(panel: Panel) -> Response:
    """`POST /panel/webhooks/{id}/redeliver` with `since` (UTC): every event since then whose delivery failed,
    again (those redelivered already are left alone); at most RETENTION_WEBHOOK_DAYS back, as events are kept."""
    endpoint = await _get(panel)
    raw = panel.field("since").strip()
    try:
        since = dt.datetime.fromisoformat(raw)
    except ValueError:
        error = "Give a date and time (UTC), e.g. 2026-11-21T09:00."
        return await _endpoint(panel, endpoint, status=400, errors={"since": error}, since=raw)
    since = since.replace(tzinfo=dt.UTC) if since.tzinfo is None else since
    days = panel.services.settings.section("RETENTION_", RetentionSettings).webhook_days
    oldest = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
    if since < oldest:
        error = (
            f"Events are kept {days} days (RETENTION_WEBHOOK_DAYS): choose a time after {oldest:%Y-%m-%dT%H:%M} (UTC)."
        )
        return await _endpoint(panel, endpoint, status=400, errors={"since": error}, since=raw)
    async with panel.conn.transaction():
        queued = await panel.services.webhooks.redeliver_failed_since(panel.conn, panel.account_id, endpoint.id, since)
    if not queued:
        return redirect(f"/panel/webhooks/{endpoint.id}?notice=nothing_to_redeliver")
    return redirect(f"/panel/webhooks/{endpoint.id}?notice=redelivered_many&queued={len(queued)}")


def _queued(panel: Panel) -> str | None:
    """After "Redeliver failed": how many were queued (a number in the address, never free text)."""
    queued = panel.query_int("queued", default=0, maximum=10_000_000)
    if panel.request.query_params.get("notice") != "redelivered_many" or not queued:
        return None
    if queued == 1:
        return "1 failed delivery since that time was queued again."
    return f"{queued:,} failed deliveries since that time were queued again."


async def _get(panel: Panel) -> Endpoint:
    return await panel.services.webhooks.get(panel.conn, panel.account_id, panel.path("id"))


async def _endpoints(
    panel: Panel, *, values: dict[str, Any], errors: dict[str, str] | None = None, status: int = 200
) -> Response:
    endpoints = await panel.services.webhooks.endpoints(panel.conn, panel.account_id)
    last = await deliveries.last_deliveries(panel.conn, [endpoint.id for endpoint in endpoints])
    return panel.render(
        "panel/webhooks.html",
        status,
        section="webhooks",
        endpoints=endpoints,
        last=last,
        groups=kind_groups(panel.services.vocabulary.event_kinds),
        values=values,
        errors=errors or {},
        production=panel.services.settings.production,
    )


async def _endpoint(
    panel: Panel,
    endpoint: Endpoint,
    *,
    secret: str | None = None,
    occasion: str = "",
    errors: dict[str, str] | None = None,
    status: int = 200,
    since: str | None = None,
    notice: str | None = None,
) -> Response:
    log = await deliveries.delivery_log(panel.conn, endpoint.id, panel.query_int("page"))
    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    return panel.render(
        "panel/webhook.html",
        status,
        section="webhooks",
        endpoint=endpoint,
        log=log,
        secret=secret,
        occasion=occasion,
        errors=errors or {},
        since=yesterday.strftime(SINCE_FORMAT) if since is None else since,
        overlap_hours=int(ROTATION_OVERLAP.total_seconds() // 3600),
        disable_after_days=f"{panel.services.settings.webhook_disable_after_days:g}",
        overlapping=endpoint.overlap_until is not None and endpoint.overlap_until > dt.datetime.now(dt.UTC),
        notice=notice,
    )


def _edit_form(
    panel: Panel, endpoint: Endpoint, values: dict[str, Any], errors: dict[str, str] | None = None, status: int = 200
) -> Response:
    return panel.render(
        "panel/webhook_edit.html",
        status,
        section="webhooks",
        endpoint=endpoint,
        groups=kind_groups(panel.services.vocabulary.event_kinds),
        values=values,
        errors=errors or {},
        production=panel.services.settings.production,
    )
