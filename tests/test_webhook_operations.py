"""Webhook operations (docs/webhooks.md: recover, disable): an endpoint's failed deliveries recovered once its
receiver is back, however often "Redeliver failed" is pressed; an endpoint whose every attempt failed for
WEBHOOK_DISABLE_AFTER_DAYS disabled (no attempt while disabled, its events kept as failed deliveries), its
account's employers and admins told by e-mail through a real SMTP server, `webhook.disabled` in the audit log,
and "Enable" in the panel; one success restarting the clock. Real server, receiver, SMTP; no sleeps as clocks
(an old failure is an old `failing_since`, written so)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procedures.vocabulary import VOCABULARY
from rpc.business import Business
from rpc.mail.outbox import Mail
from rpc.ops import admin as ops
from rpc.services import periodic_work
from rpc.settings import Settings
from rpc.worker.disabling import disable_failing
from rpc.worker.runtime import worker_app
from tests.browser import Browser
from tests.conftest import Databases
from tests.receiver import Hook, Receiver, Reply
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, LiveServer, User, emitter_for, settings_for
from tests.test_delivery import in_transaction
from tests.test_panel import (
    create_endpoint,
    follow,
    open_page,
    see_other,
    send_test,
    signed_in,
    submit,
    text,
    wait_for,
)

SHRUNK_DAYS = "0.000001"  # 86 ms: a failure settled before the disabling runs is older than that


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Two attempts 0.2 s apart; mail through the module's SMTP server; sign-in unthrottled. The period of
    disabling stays 5 days here: the live server's own periodic run must not disable other tests' endpoints."""
    data = tmp_path_factory.mktemp("data")
    return mailing_settings(database, smtp, data, WEBHOOK_RETRY_WAITS="0,0.2", WEBHOOK_TIMEOUT="3")


@pytest.fixture(scope="module")
def shrunk(settings: Settings, database: str, smtp: SmtpServer) -> Settings:
    """The same deployment with the period shrunk, for the disabling these tests run themselves."""
    return mailing_settings(
        database, smtp, Path(settings.data_dir), WEBHOOK_DISABLE_AFTER_DAYS=SHRUNK_DAYS, PUBLIC_URL=settings.public_url
    )


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture
def browser(live: LiveServer, admin: Admin) -> Iterator[tuple[Browser, User]]:
    """An employer of a new account, signed in to the panel."""
    user = admin.user("employer")
    signed = signed_in(live, user)
    yield signed, user
    signed.close()


def _disable(admin: Admin, settings: Settings) -> list[str]:
    """The periodic disabling, run now with `settings`' period, in one transaction as the worker runs it."""

    async def run(conn: Any) -> list[str]:
        async with conn.transaction():
            return await disable_failing(conn, settings, Mail(settings, emitter_for(settings).queue))

    ids: list[str] = admin.run(run)
    return ids


def _endpoint(admin: Admin, endpoint_id: str) -> dict[str, Any]:
    [row] = admin.sql(
        "SELECT enabled, failing_since, disabled_at FROM webhook_endpoints WHERE id = %(id)s", {"id": endpoint_id}
    )
    return row


def _failing(browser: Browser, admin: Admin, hook: Hook, events: int = 2) -> str:
    """An endpoint at `hook` (answering 500) whose first `events` test events have failed."""
    endpoint_id, _ = create_endpoint(browser, hook.url)
    for _ in range(events):
        send_test(browser, endpoint_id)
    wait_for(admin, endpoint_id, ["failed"] * events)
    return endpoint_id


# --- recover ------------------------------------------------------------------------------------------------


def test_recover_after_the_receiver_came_back_delivers_each_failed_event_once(
    browser: tuple[Browser, User], admin: Admin, receiver: Receiver
) -> None:
    panel, _ = browser
    hook = receiver.hook(default=Reply(500, b"down for maintenance"))
    endpoint_id = _failing(panel, admin, hook, events=3)
    failed_ids = {r.envelope["idempotency_key"]: r.body for r in hook.received()}
    assert len(failed_ids) == 3

    hook.answer(default=Reply(200))
    page = open_page(panel, f"/panel/webhooks/{endpoint_id}")
    since = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    action = f"/panel/webhooks/{endpoint_id}/redeliver"
    queued = submit(panel, page, action, {"since": since})
    assert see_other(queued).endswith("notice=redelivered_many&queued=3")
    assert "3 failed deliveries since that time were queued again." in text(follow(panel, queued)), "how many"
    assert see_other(submit(panel, page, action, {"since": since})).endswith("notice=nothing_to_redeliver")
    wait_for(admin, endpoint_id, ["failed"] * 3 + ["succeeded"] * 3)
    recovered = [r for r in hook.received() if r.status == 200]
    assert sorted(r.envelope["idempotency_key"] for r in recovered) == sorted(failed_ids), "each event once"
    for request in recovered:
        key = request.envelope["idempotency_key"]
        assert request.body == failed_ids[key] and request.headers["webhook-id"] == key, "the same event again"


def test_recover_takes_events_since_the_time_and_only_while_they_are_kept(
    browser: tuple[Browser, User], admin: Admin, receiver: Receiver
) -> None:
    panel, _ = browser
    hook = receiver.hook(default=Reply(500))
    endpoint_id = _failing(panel, admin, hook, events=3)
    emptied, older, recent = dict.fromkeys(r.envelope["idempotency_key"] for r in hook.received())  # each tried often
    admin.sql("UPDATE events SET body = ''::bytea WHERE id = %(id)s", {"id": emptied})  # as retention leaves it
    # An event of two hours ago whose delivery is recent (as a delivery redelivered on its own would be).
    admin.sql("UPDATE events SET created_at = created_at - interval '2 hours' WHERE id = %(id)s", {"id": older})
    hook.answer(default=Reply(200))
    page = open_page(panel, f"/panel/webhooks/{endpoint_id}")
    action = f"/panel/webhooks/{endpoint_id}/redeliver"
    too_old = (dt.datetime.now(dt.UTC) - dt.timedelta(days=31)).strftime("%Y-%m-%dT%H:%M")
    refused_page = submit(panel, page, action, {"since": too_old})
    assert refused_page.status_code == 400 and "Events are kept 30 days" in text(refused_page)
    since = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert see_other(submit(panel, page, action, {"since": since})).endswith("notice=redelivered_many&queued=1")
    wait_for(admin, endpoint_id, ["failed"] * 3 + ["succeeded"])
    assert [r.envelope["idempotency_key"] for r in hook.received() if r.status == 200] == [recent]


def test_pressing_recover_twice_at_once_queues_each_event_once(
    browser: tuple[Browser, User], admin: Admin, receiver: Receiver, database: str
) -> None:
    """Two presses whose transactions overlap: the second waits for the first and then finds every event
    redelivered already (each once found no later delivery, and both sent everything)."""
    panel, user = browser
    endpoint_id = _failing(panel, admin, receiver.hook(default=Reply(500)), events=3)
    since = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    webhooks = admin.webhooks

    async def twice() -> tuple[list[str], list[str]]:
        async with await ops.connect(database) as first, await ops.connect(database) as second:
            pid = (await (await second.execute("SELECT pg_backend_pid() AS pid")).fetchone() or {})["pid"]
            async with first.transaction():
                queued_first = await webhooks.redeliver_failed_since(first, user.account_id, endpoint_id, since)
                pressing = asyncio.create_task(
                    in_transaction(webhooks.redeliver_failed_since)(second, user.account_id, endpoint_id, since)
                )
                # The second press either finishes (as it did, doubling every event) or waits for the first.
                while not await _waiting_on_a_lock(first, pid):
                    finished, _ = await asyncio.wait({pressing}, timeout=0.01)
                    if finished:
                        break
            return queued_first, await pressing

    first, second = asyncio.run(twice())
    assert len(first) == 3 and second == []
    rows = admin.sql(
        "SELECT event_id, count(*) AS n FROM webhook_deliveries WHERE endpoint_id = %(e)s GROUP BY event_id",
        {"e": endpoint_id},
    )
    assert sorted(row["n"] for row in rows) == [2, 2, 2], "each failed event redelivered once"


async def _waiting_on_a_lock(conn: Any, pid: int) -> bool:
    query = "SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = %(pid)s"
    row = await (await conn.execute(query, {"pid": pid})).fetchone()
    return bool(row and row["waiting"])


# --- disabling ----------------------------------------------------------------------------------------------


def test_an_endpoint_failing_for_the_period_is_disabled_told_and_enabled_again(
    browser: tuple[Browser, User], admin: Admin, receiver: Receiver, smtp: SmtpServer, shrunk: Settings
) -> None:
    panel, user = browser
    colleague = admin.user("employer", account_id=user.account_id)
    candidate = admin.user("candidate", account_id=user.account_id)
    hook = receiver.hook(default=Reply(503, b"maintenance"))
    endpoint_id = _failing(panel, admin, hook)
    assert _endpoint(admin, endpoint_id)["failing_since"] is not None

    assert endpoint_id in _disable(admin, shrunk)
    row = _endpoint(admin, endpoint_id)
    assert row["enabled"] is False and row["disabled_at"] is not None
    assert ("webhook.disabled", "operator", "webhook-disabling") in admin.audit_trail(endpoint_id)
    assert endpoint_id not in _disable(admin, shrunk), "disabled once"

    for person in (user, colleague):
        mail = smtp.inbox.wait_for(person.email)
        assert hook.url in mail.text and "the receiver answered 503" in mail.text
        assert f"/panel/webhooks/{endpoint_id}" in mail.text and mail.message["Subject"] == (
            "A webhook endpoint of your account was disabled"
        )
    assert smtp.inbox.to(candidate.email) == [], "employers and admins only"

    seen = len(hook.received())
    send_test(panel, endpoint_id)
    rows = wait_for(admin, endpoint_id, ["failed"] * 3)
    kept = admin.sql("SELECT attempts, last_error FROM webhook_deliveries WHERE id = %(id)s", {"id": rows[-1]["id"]})
    assert kept == [{"attempts": 0, "last_error": "the endpoint is disabled"}]
    assert len(hook.received()) == seen, "no attempt while disabled"

    page = open_page(panel, f"/panel/webhooks/{endpoint_id}")
    assert "was disabled on" in text(page) and "every attempt to it had failed" in text(page)
    enabled = submit(panel, page, f"/panel/webhooks/{endpoint_id}/enabled")
    assert see_other(enabled).endswith("notice=endpoint_enabled")
    row = _endpoint(admin, endpoint_id)
    assert row == {"enabled": True, "failing_since": None, "disabled_at": None}, "enabling restarts the clock"
    assert admin.audit_trail(endpoint_id)[-1] == ("webhook.enabled", "user", user.user_id)

    hook.answer(default=Reply(200))
    page = open_page(panel, f"/panel/webhooks/{endpoint_id}")
    since = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert see_other(submit(panel, page, f"/panel/webhooks/{endpoint_id}/redeliver", {"since": since})).endswith(
        "notice=redelivered_many&queued=3"
    )
    wait_for(admin, endpoint_id, ["failed"] * 3 + ["succeeded"] * 3)
    kept_event = admin.sql(
        "SELECT event_id::text AS id FROM webhook_deliveries WHERE id = %(id)s", {"id": rows[-1]["id"]}
    )
    assert kept_event[0]["id"] in {r.envelope["idempotency_key"] for r in hook.received() if r.status == 200}, (
        "the event kept while disabled is recovered"
    )


def test_one_success_restarts_the_clock(
    browser: tuple[Browser, User], admin: Admin, receiver: Receiver, settings: Settings
) -> None:
    """Failures older than the period do not disable an endpoint that has succeeded since; an endpoint that has
    not succeeded since is disabled by them. (The old failures are made old by writing their start back.)"""
    panel, _ = browser
    flaky_hook = receiver.hook(default=Reply(500))
    flaky = _failing(panel, admin, flaky_hook, events=1)
    broken = _failing(panel, admin, receiver.hook(default=Reply(500)), events=1)
    admin.sql(
        "UPDATE webhook_endpoints SET failing_since = now() - interval '6 days' WHERE id = ANY(%(ids)s::uuid[])",
        {"ids": [flaky, broken]},
    )
    flaky_hook.answer(Reply(200), default=Reply(500))
    send_test(panel, flaky)
    wait_for(admin, flaky, ["failed", "succeeded"])
    assert _endpoint(admin, flaky)["failing_since"] is None, "a success stops the clock"
    send_test(panel, flaky)
    wait_for(admin, flaky, ["failed", "succeeded", "failed"])
    assert _endpoint(admin, flaky)["failing_since"] > dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)

    disabled = _disable(admin, settings)  # the default period: five days
    assert broken in disabled and flaky not in disabled
    assert _endpoint(admin, flaky)["enabled"] is True


def test_the_workers_run_the_disabling_every_minute(settings: Settings) -> None:
    tasks = worker_app(periodic_work(settings, Business(vocabulary=VOCABULARY))).periodic_registry.periodic_tasks
    [periodic] = [task for (name, _), task in tasks.items() if name == "hire.disable_failing_endpoints"]
    assert periodic.cron == "* * * * *"


def test_the_period_is_a_positive_number_of_days(databases: Databases) -> None:
    url = databases.copy()
    assert settings_for(url, WEBHOOK_DISABLE_AFTER_DAYS="0.5").webhook_disable_after_days == 0.5
    assert settings_for(url).webhook_disable_after_days == 5
    for bad in ("0", "-1"):
        with pytest.raises(ValueError, match="WEBHOOK_DISABLE_AFTER_DAYS"):
            settings_for(url, WEBHOOK_DISABLE_AFTER_DAYS=bad)
