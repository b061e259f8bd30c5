"""The event log (`events.list`, docs/webhooks.md): an account's events newest first, each exactly the envelope its
webhooks delivered, filtered by kind and time, paged by a cursor bound to its query, kept as long as webhook
deliveries are; only the account's own events, for its employers and admins, with the `read:events` scope."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from procedures.jobs.shapes import JobEvent
from rpc.ops import admin as ops
from tests.receiver import Receiver, Reply
from tests.support import Admin, User, emitter_for, ok, refused

Call = Callable[..., httpx.Response]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


def _emit(admin: Admin, kind: str, accounts: list[str], count: int = 1) -> list[str]:
    """`count` events of `kind` to `accounts`, each in its own transaction as a write emits it; their ids."""
    emitter = emitter_for(admin.settings)

    async def go() -> list[str]:
        ids = []
        async with await ops.connect(admin.database_url) as conn:
            for number in range(count):
                data = JobEvent(job_id=str(uuid.uuid4()), title=f"Job {number}", status="published")
                async with conn.transaction():
                    ids.append(str(await emitter.emit(conn, kind, data, accounts)))
        return ids

    return asyncio.run(go())


def _walk(call: Call, who: User | str, **params: Any) -> list[list[dict[str, Any]]]:
    """Every page of a query, following next_cursor from the first."""
    pages, cursor = [], None
    while True:
        page = ok(call("events.list", who, **params, **({"cursor": cursor} if cursor else {})))
        pages.append(page["data"])
        cursor = page["next_cursor"]
        if cursor is None:
            return pages


def test_each_entry_is_the_envelope_its_webhook_delivered(
    call: Call, admin: Admin, receiver: Receiver, employer: User
) -> None:
    hook = receiver.hook(default=Reply(200))
    hook.know(admin.webhook(employer, hook.url, ["job.published"])["secret"])
    job = ok(call("jobs.create", employer, title="Logged", company="Acme", location="Remote"))
    ok(call("jobs.publish", employer, id=job["id"]))
    [delivered] = hook.wait_for(1)
    [entry] = ok(call("events.list", employer, event="job.published"))["data"]
    assert entry == {"id": delivered.envelope["idempotency_key"], **delivered.envelope}
    assert entry["id"] == delivered.headers["webhook-id"]
    listed = call("events.list", employer, event="job.published").content
    assert json.dumps(delivered.envelope["data"], separators=(",", ":")).encode() in listed, "the data's bytes"


def test_paging_walks_every_event_once_newest_first(call: Call, admin: Admin) -> None:
    boss = admin.user("employer")
    closed = _emit(admin, "job.closed", [boss.account_id], 3)
    updated = _emit(admin, "job.updated", [boss.account_id], 45)
    pages = _walk(call, boss, per_page=10)
    assert [len(page) for page in pages] == [10, 10, 10, 10, 8]
    walked = [entry["id"] for page in pages for entry in page]
    # Dozens of events a second: those of one second too come newest first, in the reverse of their emission.
    assert walked == list(reversed(closed + updated)), "each once, newest first"
    assert [e["id"] for e in ok(call("events.list", boss))["data"]] == walked[:20], "20 a page by default"
    only_closed = [e["id"] for p in _walk(call, boss, event="job.closed", per_page=2) for e in p]
    assert only_closed == [event for event in walked if event in closed]


def test_since_is_to_the_second_an_event_is_stamped_with(call: Call, admin: Admin) -> None:
    boss = admin.user("employer")
    [event] = _emit(admin, "job.updated", [boss.account_id])
    [entry] = ok(call("events.list", boss))["data"]
    stamped = dt.datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
    late_in_that_second = (stamped + dt.timedelta(milliseconds=999)).isoformat()
    assert [e["id"] for e in ok(call("events.list", boss, since=late_in_that_second))["data"]] == [event]
    next_second = (stamped + dt.timedelta(seconds=1)).isoformat()
    assert ok(call("events.list", boss, since=next_second))["data"] == []


def test_since_and_event_filter(call: Call, admin: Admin) -> None:
    boss = admin.user("employer")
    before = _emit(admin, "job.updated", [boss.account_id], 2)
    admin.sql(
        "UPDATE events SET created_at = created_at - interval '1 hour' WHERE id = ANY(%(ids)s::uuid[])", {"ids": before}
    )
    since = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)).isoformat().replace("+00:00", "Z")
    after = _emit(admin, "job.updated", [boss.account_id], 2) + _emit(admin, "job.published", [boss.account_id])
    assert {e["id"] for e in ok(call("events.list", boss, since=since))["data"]} == set(after)
    updated = ok(call("events.list", boss, since=since, event="job.updated"))["data"]
    assert {e["id"] for e in updated} == set(after[:2]) and {e["event"] for e in updated} == {"job.updated"}
    assert {e["id"] for e in ok(call("events.list", boss))["data"]} == set(before + after)


def test_only_the_accounts_own_events(call: Call, admin: Admin) -> None:
    """An event belongs to every account it was emitted to (an application's to the job's account and the
    candidate's); another account's is never listed."""
    a, b = admin.user("employer"), admin.user("employer")
    colleague = admin.user("employer", account_id=a.account_id)
    only_a = _emit(admin, "job.updated", [a.account_id], 3)
    only_b = _emit(admin, "job.updated", [b.account_id], 2)
    both = _emit(admin, "job.updated", [a.account_id, b.account_id])
    assert {e["id"] for e in ok(call("events.list", a, per_page=100))["data"]} == set(only_a + both)
    assert {e["id"] for e in ok(call("events.list", colleague, per_page=100))["data"]} == set(only_a + both)
    assert {e["id"] for e in ok(call("events.list", b, per_page=100))["data"]} == set(only_b + both)
    cursor = ok(call("events.list", a, per_page=1))["next_cursor"]
    assert {e["id"] for e in ok(call("events.list", b, per_page=1, cursor=cursor))["data"]} <= set(only_b + both)


def test_kept_as_long_as_deliveries_and_never_the_panels_test_event(call: Call, admin: Admin) -> None:
    boss = admin.user("employer")
    old, gone, kept = (_emit(admin, "job.updated", [boss.account_id])[0] for _ in range(3))
    admin.sql("UPDATE events SET created_at = now() - interval '31 days' WHERE id = %(id)s", {"id": old})
    admin.sql("UPDATE events SET body = ''::bytea WHERE id = %(id)s", {"id": gone})  # retention emptied it
    _emit(admin, "webhook.test", [boss.account_id])
    assert [e["id"] for e in ok(call("events.list", boss))["data"]] == [kept]


def test_a_cursor_is_bound_to_its_query(call: Call, admin: Admin) -> None:
    boss = admin.user("employer")
    _emit(admin, "job.updated", [boss.account_id], 3)
    cursor = ok(call("events.list", boss, per_page=1))["next_cursor"]
    assert ok(call("events.list", boss, per_page=2, cursor=cursor))["data"], "per_page may change"
    for params in ({"event": "job.updated"}, {"since": "2020-01-01T00:00:00Z"}):
        error = refused(call("events.list", boss, cursor=cursor, **params), 422, "invalid_params")
        assert error["details"]["errors"][0]["field"] == "cursor"
    for bad in ("garbage", cursor[:-4], "eyJ9"):
        error = refused(call("events.list", boss, cursor=bad), 422, "invalid_params")
        assert error["details"]["errors"][0]["field"] == "cursor"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"event": "job.exploded"}, "event"),
        ({"event": "webhook.test"}, "event"),
        ({"since": "yesterday"}, "since"),
        ({"per_page": 0}, "per_page"),
        ({"per_page": 101}, "per_page"),
    ],
)
def test_bad_parameters_are_422_on_their_field(call: Call, employer: User, params: dict[str, Any], field: str) -> None:
    error = refused(call("events.list", employer, **params), 422, "invalid_params")
    assert error["details"]["errors"][0]["field"] == field


def test_it_needs_read_events_and_an_employer_or_admin(call: Call, admin: Admin, client: httpx.Client) -> None:
    boss = admin.user("employer")
    _emit(admin, "job.updated", [boss.account_id])
    error = refused(call("events.list", admin.api_key(boss, scopes="read:jobs")["key"]), 403, "insufficient_scope")
    assert error["details"]["required"] == "read:events"
    assert ok(call("events.list", admin.api_key(boss, scopes="read:events")["key"]))["data"]
    refused(call("events.list", admin.user("candidate")), 403, "forbidden")
    document = client.get("/openapi.json").json()
    operation = document["paths"]["/v1/events.list"]
    assert {"bearer": ["read:events"]} in next(iter(operation.values()))["security"]
    schemes = document["components"]["securitySchemes"]["oauth2"]["flows"]
    assert "read:events" in next(iter(schemes.values()))["scopes"], "offered to apps on the consent page"


class Store:
    """The integrator's store of the reconciliation loop in docs/webhooks.md."""

    def __init__(self, last: dt.datetime) -> None:
        self.last = last
        self.processed: list[tuple[str, str]] = []
        self.marked: set[str] = set()

    def last_event_time(self) -> dt.datetime:
        return self.last

    def seen(self, event_id: str) -> bool:
        return event_id in self.marked

    def process(self, kind: str, data: dict[str, Any]) -> None:
        self.processed.append((kind, data["job_id"]))

    def mark_seen(self, event_id: str, timestamp: str) -> None:
        self.marked.add(event_id)


def test_the_reconciliation_loop_of_the_docs_runs_as_written(admin: Admin, live: Any) -> None:
    """The loop an integrator copies from docs/webhooks.md, with only its address and key filled in: it processes
    every event it missed once, oldest first, and a second run processes none again."""
    boss = admin.user("employer")
    key = admin.api_key(boss, scopes="read:events")["key"]
    seen_before = _emit(admin, "job.updated", [boss.account_id])
    missed = _emit(admin, "job.updated", [boss.account_id], 130)  # more than one page of 100
    text = (ROOT / "docs" / "webhooks.md").read_text()
    section = text[text.index("## A reconciliation loop") :]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    source = code.group(1).replace('"https://api.example.com"', repr(live.url)).replace('"service_live_..."', repr(key))
    namespace: dict[str, Any] = {}
    exec(compile(source, "docs/webhooks.md", "exec"), namespace)  # noqa: S102 - our own documentation
    store = Store(dt.datetime.now(dt.UTC))
    store.mark_seen(seen_before[0], "")
    namespace["reconcile"](store)
    bodies = {
        row["id"]: json.loads(bytes(row["body"]))
        for row in admin.sql("SELECT id::text AS id, body FROM events WHERE id = ANY(%(ids)s::uuid[])", {"ids": missed})
    }
    assert store.processed == [("job.updated", bodies[event]["data"]["job_id"]) for event in missed], "as emitted"
    namespace["reconcile"](store)
    assert len(store.processed) == len(missed), "nothing twice"
