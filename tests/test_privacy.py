"""profile.export, profile.delete, bin/admin delete-user, audit.list and retention (docs/privacy.md)."""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from procedures.privacy import PRIVACY
from rpc.audit import log as audit_log
from rpc.core.cursor import CursorCodec
from rpc.ops import admin as ops
from rpc.privacy.retention import RetentionSettings, retain
from tests.browser import Browser, location
from tests.support import TEST_SECRET_KEY, Admin, LiveServer, User, eventually, ok, refused
from tests.test_oauth import App, oauth_error, refresh, register, tokens

Call = Callable[..., httpx.Response]
EXPORT_KEYS = {
    "profile",
    "applications",
    "interviews",
    "offers",
    "scorecards",
    "alerts",
    "files",
    "api_keys",
    "oauth_grants",
    "sessions",
    "audit",
}
ENTRY_KEYS = {"id", "at", "actor_id", "actor_kind", "action", "target_id", "client_address", "user_agent"}


def _job(call: Call, owner: User) -> str:
    made = ok(call("jobs.create", owner, title=f"job-{uuid.uuid4().hex[:8]}", company="Acme", location="Izmir"))
    return str(ok(call("jobs.publish", owner, id=made["id"]))["id"])


def _person(admin: Admin, call: Call) -> tuple[User, dict[str, str]]:
    """A candidate with a name, a headline, a location, a bio, and a cover letter and a resume URL for their
    applications: every string erasure must remove."""
    person = admin.user("candidate")
    marks = {
        "email": person.email,
        "name": f"Zeynep-{uuid.uuid4().hex}",
        "headline": f"headline-{uuid.uuid4().hex}",
        "location": f"Kadikoy-{uuid.uuid4().hex}",
        "bio": f"bio-{uuid.uuid4().hex}",
        "letter": f"letter-{uuid.uuid4().hex}",
        "resume": f"https://cv.example.test/{uuid.uuid4().hex}.pdf",
    }
    profile = {k: marks[k] for k in ("headline", "location", "bio")}
    ok(call("profile.update", person, display_name=marks["name"], **profile))
    return person, marks


def _everywhere(admin: Admin, text: str) -> list[str]:
    """Every column of every table (text, jsonb, bytea, arrays: each as text) that holds `text` anywhere."""
    columns = admin.sql(
        """SELECT table_schema, table_name, column_name FROM information_schema.columns
           WHERE table_schema NOT IN ('pg_catalog', 'information_schema')
             AND data_type IN ('text', 'jsonb', 'json', 'bytea', 'ARRAY', 'character varying')"""
    )
    found = []
    for column in columns:
        table, name = f'"{column["table_schema"]}"."{column["table_name"]}"', f'"{column["column_name"]}"'
        as_text = f"convert_from({name}, 'UTF8')" if column["column_name"] == "body" else f"{name}::text"
        query = f"SELECT count(*) AS n FROM {table} WHERE position(lower(%(t)s) IN lower({as_text})) > 0"
        if column["table_name"] in ("events", "idempotency_keys") and column["column_name"] == "body":
            query = f"SELECT count(*) AS n FROM {table} WHERE position(convert_to(%(t)s, 'UTF8') IN {name}) > 0"
        if admin.sql(query, {"t": text})[0]["n"]:
            found.append(f"{column['table_name']}.{column['column_name']}")
    return found


@dataclass
class _SignedIn:
    """A person signed in every way but an API key: a session token, `/auth/login`'s tokens, a panel session
    and an OAuth grant's tokens."""

    person: User
    login: dict[str, str]
    browser: Browser
    app: App
    grant: dict[str, str]

    @classmethod
    def everywhere(
        cls, client: httpx.Client, live: LiveServer, admin: Admin, person: User, developer: User
    ) -> _SignedIn:
        login = client.post("/auth/login", json={"email": person.email, "password": person.password}).json()
        browser = Browser(live.url)
        assert location(browser.sign_in(person, "/panel")) == "/panel"
        app = register(admin, developer, public=True)
        return cls(person, login, browser, app, tokens(client, browser, app, "read:profile"))

    def bearers(self) -> tuple[str, ...]:
        return self.person.token, self.login["access_token"], self.grant["access_token"]

    def assert_stopped(self, call: Call, client: httpx.Client) -> None:
        """Every one of them refused on its next use."""
        for token in self.bearers():
            assert call("profile.me", token).status_code == 401
        assert client.post("/auth/refresh", json={"refresh_token": self.login["refresh_token"]}).status_code == 401
        oauth_error(refresh(client, self.app, self.grant["refresh_token"]), "invalid_grant")
        assert location(self.browser.get("/panel")).startswith("/web/signin")
        self.browser.close()


def _wait_for_mail(admin: Admin, recipient: str, timeout: float = 10) -> None:
    """The reset message is written after the `202` has been answered (so that its timing reveals nothing)."""
    query = "SELECT count(*) AS n FROM mail_messages WHERE recipient = %(e)s"
    eventually(lambda: admin.sql(query, {"e": recipient}) == [{"n": 1}], f"a message to {recipient}", timeout)


def test_export_holds_everything_about_the_caller(call: Call, admin: Admin, employer: User) -> None:
    person, marks = _person(admin, call)
    applied = [
        ok(call("applications.create", person, job_id=_job(call, employer), cover_letter=marks["letter"]))
        for _ in range(3)
    ]
    ok(call("applications.update_status", employer, id=applied[0]["id"], status="reviewed"))
    saved = ok(call("alerts.create", person, q=marks["name"], location="Kadikoy", frequency="daily"))
    exported = ok(call("profile.export", person))
    assert set(exported) == EXPORT_KEYS
    assert exported["profile"]["email"] == person.email and exported["profile"]["display_name"] == marks["name"]
    assert {a["id"] for a in exported["applications"]} == {a["id"] for a in applied}
    first = next(a for a in exported["applications"] if a["id"] == applied[0]["id"])
    assert [(h["status"], h["by"]) for h in first["history"]] == [
        ("pending", person.user_id),
        ("reviewed", employer.user_id),
    ]
    assert all(a["cover_letter"] == marks["letter"] for a in exported["applications"])
    assert exported["alerts"] == [{**saved, "last_sent_at": None}]
    assert exported["api_keys"] == [] and exported["oauth_grants"] == []
    entry = exported["audit"][0]
    assert set(entry) == ENTRY_KEYS
    assert (entry["action"], entry["actor_kind"], entry["actor_id"]) == ("profile.exported", "user", person.user_id)


def test_export_lists_key_metadata_never_the_key(call: Call, admin: Admin, client: httpx.Client) -> None:
    boss = admin.user("employer")
    key = admin.api_key(boss, scopes="read:profile")
    client.post("/auth/login", json={"email": boss.email, "password": boss.password})
    exported = ok(call("profile.export", key["key"]))
    assert [k["id"] for k in exported["api_keys"]] == [key["id"]]
    assert "key_hash" not in exported["api_keys"][0] and key["key"] not in str(exported)
    assert [s["kind"] for s in exported["sessions"]] == ["api"]
    assert [e["action"] for e in exported["audit"]] == ["profile.exported", "signin.succeeded"]


def test_export_needs_read_profile(call: Call, admin: Admin) -> None:
    person = admin.user("employer")
    key = admin.api_key(person, scopes="read:jobs")["key"]
    assert refused(call("profile.export", key), 403, "insufficient_scope")["details"]["required"] == "read:profile"


def test_delete_needs_the_callers_email_and_changes_nothing_otherwise(call: Call, admin: Admin) -> None:
    person = admin.user("candidate")
    for confirm in ("someone@example.test", ""):
        error = refused(call("profile.delete", person, confirm=confirm), 422, "invalid_params")
        assert error["details"]["errors"][0]["field"] == "confirm"
    refused(call("profile.delete", person), 422, "invalid_params")
    assert ok(call("profile.me", person))["email"] == person.email


def test_delete_needs_write_profile_and_ends_the_api_keys(call: Call, admin: Admin) -> None:
    """API keys are employers' (candidates have none): an employer's key stops with its erased owner."""
    person = admin.user("employer")
    key = admin.api_key(person, scopes="read:profile")["key"]
    error = refused(call("profile.delete", key, confirm=person.email), 403, "insufficient_scope")
    assert error["details"]["required"] == "write:profile"
    assert ok(call("profile.me", key))["email"] == person.email  # still there, and so is the key
    ok(call("profile.delete", person, confirm=person.email))
    refused(call("profile.me", key), 401, "invalid_api_key")


def test_no_credential_resolves_to_an_erased_person(
    call: Call, client: httpx.Client, live: LiveServer, admin: Admin, employer: User
) -> None:
    """Erasure deletes every credential; one that outlived it (made in the same instant, say) still finds no
    person: every lookup asks that its user is not erased. Here the credentials are left in place on purpose."""
    boss = admin.user("employer")
    key = admin.api_key(boss, scopes="read:profile")["key"]
    signed_in = _SignedIn.everywhere(client, live, admin, boss, employer)
    admin.sql("UPDATE users SET deleted_at = now() WHERE id = %(u)s", {"u": boss.user_id})

    refused(call("profile.me", key), 401, "invalid_api_key")
    signed_in.assert_stopped(call, client)


def test_delete_erases_the_person_everywhere(
    call: Call, client: httpx.Client, live: LiveServer, admin: Admin, employer: User
) -> None:
    person, marks = _person(admin, call)
    applied = ok(
        call(
            "applications.create",
            person,
            job_id=_job(call, employer),
            cover_letter=marks["letter"],
            resume_url=marks["resume"],
        )
    )
    ok(call("applications.update_status", employer, id=applied["id"], status="reviewed"))
    signed_in = _SignedIn.everywhere(client, live, admin, person, employer)  # API keys are employers'
    assert signed_in.browser.get("/panel").status_code == 200
    for credential in signed_in.bearers():
        assert ok(call("profile.me", credential))["id"] == person.user_id
    # A message addressed to them (its recipient is kept in mail_messages) and an invitation to another account.
    assert client.post("/auth/password-reset", json={"email": person.email}).status_code == 202
    admin.sql(
        "INSERT INTO invitations (account_id, email, token_hash, expires_at) "
        "SELECT account_id, %(e)s, sha256(gen_random_uuid()::text::bytea), now() + interval '7 days' FROM users "
        "WHERE id = %(u)s::uuid RETURNING id",
        {"e": person.email, "u": employer.user_id},
    )
    _wait_for_mail(admin, person.email)
    hook = admin.webhook(person, "http://127.0.0.1:9/nowhere", ["user.deleted"])
    ok(call("profile.export", person))  # the export's answer is not kept; an idempotent update's is
    client.post(
        "/v1/profile.update", json={"headline": marks["headline"]}, headers={**person.auth, "Idempotency-Key": "k1"}
    )
    for mark in marks.values():
        assert _everywhere(admin, mark), mark  # the search finds what is there

    done = ok(call("profile.delete", person, confirm=person.email.upper()))
    assert done == {"id": person.user_id, "deleted": True}
    assert admin.audit_trail(person.user_id)[-1] == ("user.deleted", "user", person.user_id)

    for mark in marks.values():
        assert _everywhere(admin, mark) == [], mark
    signed_in.assert_stopped(call, client)
    kept = ok(call("applications.get", employer, id=applied["id"]))
    assert kept["candidate_id"] == person.user_id and kept["status"] == "reviewed"
    assert kept["cover_letter"] is None and kept["resume_url"] is None
    event = admin.sql("SELECT convert_from(body, 'UTF8')::jsonb AS body FROM events WHERE kind = 'user.deleted'")
    assert {"event": "user.deleted", "data": {"user_id": person.user_id}} in [
        {k: e["body"][k] for k in ("event", "data")} for e in event
    ]
    assert admin.sql(
        "SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint_id = %(e)s::uuid", {"e": hook["id"]}
    ) == [{"n": 1}]
    again = admin.user("candidate", email=person.email)  # the e-mail may sign up again, as a new person
    assert again.user_id != person.user_id and ok(call("applications.list", again))["data"] == []


def test_the_last_member_of_a_paying_account_is_refused(call: Call, admin: Admin) -> None:
    boss = admin.user("employer")
    admin.sql(
        """INSERT INTO subscriptions (account_id, plan, status, current_period_start, current_period_end)
           VALUES (%(a)s::uuid, 'pro', 'active', now(), now() + interval '30 days')""",
        {"a": boss.account_id},
    )
    refused(call("profile.delete", boss, confirm=boss.email), 409, "conflict")
    assert ok(call("profile.me", boss))["email"] == boss.email
    member = admin.user("employer", account_id=boss.account_id)
    ok(call("profile.delete", boss, confirm=boss.email))  # no longer the last member
    refused(call("profile.delete", member, confirm=member.email), 409, "conflict")


def test_admin_delete_user_does_the_same_as_an_operator(call: Call, admin: Admin) -> None:
    person, marks = _person(admin, call)
    assert admin.run(ops.delete_user, admin.webhooks._emitter, PRIVACY, email=person.email) == {
        "user_id": person.user_id,
        "deleted": True,
    }
    assert _everywhere(admin, marks["name"]) == []
    assert call("profile.me", person).status_code == 401
    entry = admin.sql("SELECT actor_kind, actor_id, target_id FROM audit_entries WHERE action = 'user.deleted' "
                      "AND target_id = %(u)s", {"u": person.user_id})  # fmt: skip
    assert entry == [{"actor_kind": "operator", "actor_id": None, "target_id": person.user_id}]
    with pytest.raises(ops.AdminError):
        admin.run(ops.delete_user, admin.webhooks._emitter, PRIVACY, email=person.email)


def _audit(call: Call, who: User | str, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = ok(call("audit.list", who, **params))
    return result


def test_audit_list_shows_the_accounts_entries_newest_first(
    call: Call, client: httpx.Client, admin: Admin, operator: User
) -> None:
    boss = admin.user("employer")
    other = admin.user("employer")
    key = admin.api_key(boss, scopes="read:audit")
    admin.revoke(key["id"])
    admin.api_key(other)
    client.post("/auth/login", json={"email": boss.email, "password": "wrong"}, headers={"User-Agent": "probe/1"})
    client.post("/auth/login", json={"email": f"nobody-{uuid.uuid4().hex}@x.test", "password": "wrong"})
    page = _audit(call, boss)
    expected = ["signin.failed", "api_key.revoked", "api_key.created", "plan.changed"]
    assert [e["action"] for e in page["data"]] == expected
    failed = page["data"][0]
    assert set(failed) == ENTRY_KEYS
    assert (failed["actor_kind"], failed["actor_id"], failed["user_agent"]) == ("user", boss.user_id, "probe/1")
    assert failed["client_address"] == "127.0.0.1"
    assert page["data"][1]["target_id"] == key["id"] and page["data"][1]["actor_kind"] == "operator"
    assert page["next_cursor"] is None
    everyone = _audit(call, operator, action="signin.failed", per_page=100)["data"]
    assert any(e["actor_id"] is None for e in everyone)  # the unknown e-mail: the platform's log only
    assert {e["actor_id"] for e in everyone} >= {boss.user_id}


def next_ids_cross_a_power_of_ten(admin: Admin) -> None:
    """Move the entries' ids to just below a power of ten, so that the next few differ in length: as text, 10
    sorts before 9, and a page ordered by the text would come out shuffled."""
    newest = admin.sql("SELECT coalesce(max(id), 0) AS id FROM audit_entries")[0]["id"]
    admin.sql("SELECT setval('audit_entries_id_seq', %(v)s)", {"v": 10 ** len(str(newest + 3)) - 3})


def test_audit_list_filters_and_pages(call: Call, admin: Admin) -> None:
    boss = admin.user("employer")
    next_ids_cross_a_power_of_ten(admin)
    keys = [admin.api_key(boss)["id"] for _ in range(5)]
    assert [e["target_id"] for e in _audit(call, boss, action="api_key.created", per_page=100)["data"]] == keys[::-1]
    seen, cursor = [], None
    while True:
        page = _audit(call, boss, action="api_key.created", per_page=2, **({"cursor": cursor} if cursor else {}))
        seen += [e["target_id"] for e in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == keys[::-1]
    first = _audit(call, boss, per_page=2)
    error = refused(
        call("audit.list", boss, action="api_key.revoked", cursor=first["next_cursor"]), 422, "invalid_params"
    )
    assert error["details"]["errors"][0]["field"] == "cursor"
    refused(call("audit.list", boss, cursor="garbage"), 422, "invalid_params")
    # The position it names, unsigned (as the log's cursors once were): not a cursor this server handed out.
    raw = CursorCodec(TEST_SECRET_KEY, "audit").decode(first["next_cursor"])
    assert raw is not None
    unsigned = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    refused(call("audit.list", boss, per_page=2, cursor=unsigned), 422, "invalid_params")
    refused(call("audit.list", boss, per_page=101), 422, "invalid_params")
    assert _audit(call, boss, actor_id=boss.user_id)["data"] == []  # every entry here is the operator's
    assert _audit(call, boss, since="2999-01-01T00:00:00Z")["data"] == []


def test_audit_list_finds_an_actors_entries_and_those_since_a_time(
    call: Call, client: httpx.Client, admin: Admin
) -> None:
    """The filters must narrow to the matching entries, not only to none: one person's own among an operator's
    and a colleague's, and what came after a moment among what came before."""
    boss = admin.user("employer")
    colleague = admin.user("employer", account_id=boss.account_id)
    admin.api_key(boss)  # the operator's entry about the boss
    client.post("/auth/login", json={"email": boss.email, "password": boss.password})
    client.post("/auth/login", json={"email": colleague.email, "password": colleague.password})
    mine = _audit(call, boss, actor_id=boss.user_id)["data"]
    assert [(e["action"], e["actor_kind"], e["actor_id"]) for e in mine] == [("signin.succeeded", "user", boss.user_id)]
    theirs = _audit(call, boss, actor_id=colleague.user_id)["data"]
    assert [(e["action"], e["actor_id"]) for e in theirs] == [("signin.succeeded", colleague.user_id)]

    # Just after the newest entry of the account so far: every entry of a later transaction is at or after it.
    [newest] = admin.sql(
        "SELECT max(at) + interval '1 microsecond' AS t FROM audit_entries WHERE account_id = %(a)s",
        {"a": boss.account_id},
    )
    between = newest["t"].astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    key = admin.api_key(boss)
    later = _audit(call, boss, since=between)["data"]  # not the plan, the first key or the two sign-ins
    assert [(e["action"], e["target_id"]) for e in later] == [("api_key.created", key["id"])]


def test_audit_list_needs_read_audit_and_an_employer(call: Call, admin: Admin) -> None:
    boss = admin.user("employer")
    refused(call("audit.list", admin.api_key(boss, scopes="read:jobs")["key"]), 403, "insufficient_scope")
    assert ok(call("audit.list", admin.api_key(boss, scopes="read:audit")["key"]))["data"]
    refused(call("audit.list", admin.user("candidate")), 403, "forbidden")


def _payment_records(admin: Admin, account_id: str) -> list[dict[str, Any]]:
    """The account's payments and invoices, and the provider's notifications about its orders, each row whole."""
    return admin.sql(
        """SELECT 'payment' AS kind, to_jsonb(p) AS row FROM payments AS p WHERE account_id = %(a)s::uuid
           UNION ALL SELECT 'invoice', to_jsonb(i) FROM invoices AS i WHERE account_id = %(a)s::uuid
           UNION ALL SELECT 'notification', to_jsonb(n) FROM payment_notifications AS n
                     WHERE merchant_oid IN (SELECT merchant_oid FROM payments WHERE account_id = %(a)s::uuid)
           ORDER BY 1""",
        {"a": account_id},
    )


def _old_payment(admin: Admin, owner: User) -> None:
    """A completed payment with its invoice and the provider's notification, older than both periods."""
    oid = uuid.uuid4().hex
    admin.sql(
        """WITH s AS (
             INSERT INTO subscriptions (account_id, plan, status, current_period_start, current_period_end,
                                        created_at, updated_at, cancelled_at)
             VALUES (%(a)s::uuid, 'pro', 'cancelled', now() - interval '800 days', now() - interval '770 days',
                     now() - interval '800 days', now() - interval '770 days', now() - interval '770 days')
             RETURNING id),
           p AS (
             INSERT INTO payments (account_id, subscription_id, provider, merchant_oid, amount, currency, status,
                                   created_at, updated_at, completed_at)
             SELECT %(a)s::uuid, id, 'paytr', %(o)s, 99900, 'TRY', 'completed', now() - interval '800 days',
                    now() - interval '800 days', now() - interval '800 days' FROM s
             RETURNING id),
           n AS (
             INSERT INTO payment_notifications (provider, received_at, remote_address, merchant_oid, fields, verdict)
             VALUES ('paytr', now() - interval '800 days', '127.0.0.1', %(o)s, '{"status": "success"}', 'applied'))
         INSERT INTO invoices (account_id, payment_id, number, amount, currency, line_items, issued_at)
         SELECT %(a)s::uuid, id, %(n)s, 99900, 'TRY', '[{"plan": "pro"}]', now() - interval '800 days' FROM p""",
        {"a": owner.account_id, "o": oid, "n": f"OLD-{oid[:12]}"},
    )


def _retain_all(admin: Admin) -> None:
    async def run(conn: Any) -> dict[str, int]:
        async with conn.transaction():
            return await retain(conn, RetentionSettings(), PRIVACY.retention, batch=2)

    while any(admin.run(run).values()):  # bounded batches, until there is nothing left
        pass


def _deliveries_aged(admin: Admin, owner: User, days: tuple[int, ...]) -> list[dict[str, Any]]:
    """For each age in `days`, an event, its finished delivery and one attempt, that many days old: written here,
    not sent, so that the service's in-process delivery worker (which retries real deliveries) adds nothing."""
    hook = admin.webhook(owner, "http://127.0.0.1:9/nowhere", ["job.closed"])
    made = []
    for age in days:
        values = {"a": owner.account_id, "h": hook["id"], "d": age, "b": f'{{"age": {age}}}'.encode()}
        [row] = admin.sql(
            """WITH e AS (
                 INSERT INTO events (id, kind, account_ids, body, created_at)
                 VALUES (gen_random_uuid(), 'job.closed', ARRAY[%(a)s::uuid], %(b)s,
                         now() - make_interval(days => %(d)s))
                 RETURNING id),
               d AS (
                 INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, last_status_code)
                 SELECT id, %(h)s::uuid, 'failed', 1, 500 FROM e RETURNING id, event_id)
               INSERT INTO webhook_attempts (delivery_id, number, started_at, duration_ms, status_code)
               SELECT id, 1, now() - make_interval(days => %(d)s), 5, 500 FROM d
               RETURNING id AS attempt_id, delivery_id::text AS delivery_id,
                         (SELECT event_id::text FROM d) AS event_id""",
            values,
        )
        made.append({**row, "body": values["b"]})
    return made


def test_retention_keeps_deliveries_and_anonymizes_old_final_applications(call: Call, admin: Admin) -> None:
    employer = admin.user("employer")
    person, marks = _person(admin, call)
    texts = {"cover_letter": marks["letter"], "resume_url": marks["resume"]}
    old = ok(call("applications.create", person, job_id=_job(call, employer), **texts))
    new = ok(call("applications.create", person, job_id=_job(call, employer), **texts))
    waiting = ok(call("applications.create", person, job_id=_job(call, employer), **texts))  # still pending
    ok(call("applications.update_status", employer, id=old["id"], status="rejected"))
    ok(call("applications.update_status", employer, id=new["id"], status="rejected"))
    admin.sql(
        "UPDATE applications SET updated_at = now() - interval '731 days' WHERE id = ANY(%(ids)s::uuid[])",
        {"ids": [old["id"], waiting["id"]]},
    )
    _old_payment(admin, employer)
    payments = _payment_records(admin, employer.account_id)
    assert {r["kind"] for r in payments} == {"payment", "invoice", "notification"}
    aged, fresh = _deliveries_aged(admin, employer, (31, 29))  # either side of RETENTION_WEBHOOK_DAYS
    ids = {name: [aged[name], fresh[name]] for name in ("event_id", "delivery_id", "attempt_id")}
    deliveries = (
        "SELECT id::text AS id, status, attempts FROM webhook_deliveries WHERE id = ANY(%(d)s::uuid[]) ORDER BY id"
    )
    before = admin.sql(deliveries, {"d": ids["delivery_id"]})

    _retain_all(admin)
    rows = admin.sql("SELECT id::text AS id, cover_letter, resume_url FROM applications "
                     "WHERE candidate_id = %(c)s::uuid", {"c": person.user_id})  # fmt: skip
    assert {r["id"]: (r["cover_letter"], r["resume_url"]) for r in rows} == {
        old["id"]: (None, None),
        new["id"]: (marks["letter"], marks["resume"]),
        waiting["id"]: (marks["letter"], marks["resume"]),  # not final: the employer is still deciding
    }
    bodies = admin.sql("SELECT id::text AS id, body FROM events WHERE id = ANY(%(e)s::uuid[])", {"e": ids["event_id"]})
    assert {r["id"]: r["body"] for r in bodies} == {aged["event_id"]: b"", fresh["event_id"]: fresh["body"]}
    attempts = admin.sql("SELECT id FROM webhook_attempts WHERE id = ANY(%(a)s)", {"a": ids["attempt_id"]})
    assert attempts == [{"id": fresh["attempt_id"]}]
    assert admin.sql(deliveries, {"d": ids["delivery_id"]}) == before  # both, with their status
    assert _payment_records(admin, employer.account_id) == payments  # accounting law: kept as they were
    assert admin.run(audit_log.verify)["ok"]


def test_retention_settings_are_read_and_checked() -> None:
    from rpc.settings import Settings, SettingsError

    env = {"SERVICE_SECRET_KEY": "x" * 44, "RETENTION_WEBHOOK_DAYS": "7", "RETENTION_APPLICATION_DAYS": "90"}
    settings = Settings.from_env(env)
    assert settings.section("RETENTION_", RetentionSettings) == RetentionSettings(7, 90)
    defaults = Settings.from_env({"SERVICE_SECRET_KEY": "x" * 44}).section("RETENTION_", RetentionSettings)
    assert (defaults.webhook_days, defaults.application_days) == (30, 730)  # docs/privacy.md
    with pytest.raises(SettingsError):
        Settings.from_env({**env, "RETENTION_WEBHOOK_DAYS": "0"}).section("RETENTION_", RetentionSettings)


def test_web_signin_is_audited(client: httpx.Client, admin: Admin, call: Call) -> None:
    person = admin.user("employer")
    client.post("/auth/login", json={"email": person.email, "password": person.password})
    entries = _audit(call, person, action="signin.succeeded")["data"]
    assert [(e["actor_id"], e["target_id"]) for e in entries] == [(person.user_id, person.user_id)]
