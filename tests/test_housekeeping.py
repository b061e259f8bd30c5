"""The hourly clean-up of credentials nothing can use any more (rpc.auth.housekeeping)."""

from __future__ import annotations

import asyncio
import secrets
import uuid

from procedures.vocabulary import VOCABULARY
from rpc.auth import housekeeping
from rpc.business import Business
from rpc.ops import admin as ops
from rpc.services import periodic_work
from rpc.settings import Settings
from rpc.worker.runtime import worker_app
from tests.support import Admin, User

EXPIRED, LIVE = "now() - interval '1 second'", "now() + interval '1 hour'"


def _seed(admin: Admin, user: User) -> dict[str, dict[str, str]]:
    """An expired and a live row in each table the clean-up looks at; their ids by table and state."""
    client_id = f"client-{uuid.uuid4().hex[:12]}"
    admin.sql(
        """INSERT INTO oauth_clients (id, account_id, name, redirect_uris, scopes)
           VALUES (%(id)s, %(account)s, 'Housekeeping', ARRAY['https://app.example/cb'], ARRAY['read:jobs'])""",
        {"id": client_id, "account": user.account_id},
    )
    [grant] = admin.sql(
        """INSERT INTO oauth_grants (client_id, user_id, scopes, expires_at)
           VALUES (%(client)s, %(user)s, ARRAY['read:jobs'], now() + interval '30 days') RETURNING id::text AS id""",
        {"client": client_id, "user": user.user_id},
    )
    inserts = {
        "web_sessions": "INSERT INTO web_sessions (token_hash, user_id, expires_at) VALUES (%(hash)s, %(user)s, {at})",
        "refresh_tokens": """INSERT INTO refresh_tokens (family_id, user_id, token_hash, expires_at)
                             VALUES (gen_random_uuid(), %(user)s, %(hash)s, {at})""",
        "oauth_refresh_tokens": """INSERT INTO oauth_refresh_tokens (grant_id, token_hash, expires_at)
                                   VALUES (%(grant)s, %(hash)s, {at})""",
    }
    seeded: dict[str, dict[str, str]] = {}
    for table, insert in inserts.items():
        for state, at in (("expired", EXPIRED), ("live", LIVE)):
            [row] = admin.sql(
                insert.format(at=at) + " RETURNING id::text AS id",
                {"hash": secrets.token_bytes(32), "user": user.user_id, "grant": grant["id"]},
            )
            seeded.setdefault(table, {})[state] = row["id"]
    return seeded


def _present(admin: Admin, table: str, ids: list[str]) -> set[str]:
    rows = admin.sql(f"SELECT id::text AS id FROM {table} WHERE id = ANY(%(ids)s::uuid[])", {"ids": ids})
    return {row["id"] for row in rows}


def _forget_expired(admin: Admin) -> int:
    async def clean() -> int:
        async with await ops.connect(admin.database_url) as conn:
            return await housekeeping.forget_expired(conn)

    return asyncio.run(clean())


def test_expired_sessions_and_refresh_tokens_go_and_live_ones_stay(admin: Admin, employer: User) -> None:
    seeded = _seed(admin, employer)

    assert _forget_expired(admin) >= 3  # other tests' rows of this database may have expired too
    for table, ids in seeded.items():
        assert _present(admin, table, list(ids.values())) == {ids["live"]}, table


def test_the_workers_run_it_every_hour(settings: Settings) -> None:
    work = periodic_work(settings, Business(vocabulary=VOCABULARY))
    assert work["forget_expired"] is housekeeping.PERIODIC
    tasks = worker_app(work).periodic_registry.periodic_tasks
    [periodic] = [task for (name, _), task in tasks.items() if name == "hire.forget_expired"]
    assert periodic.cron == housekeeping.SCHEDULE == "17 * * * *"


def test_secrets_the_panel_kept_for_a_page_nobody_opened_go_after_ten_minutes(admin: Admin, employer: User) -> None:
    [session] = admin.sql(
        f"INSERT INTO web_sessions (token_hash, user_id, expires_at) VALUES (%(hash)s, %(user)s, {LIVE})"
        " RETURNING token_hash",
        {"hash": secrets.token_bytes(32), "user": employer.user_id},
    )
    kept = {state: secrets.token_bytes(32) for state in ("expired", "live")}
    for state, token in kept.items():
        admin.sql(
            "INSERT INTO panel_reveals (token_hash, session_hash, kind, object_id, expires_at)"
            f" VALUES (%(token)s, %(session)s, 'api_key', 'x', {EXPIRED if state == 'expired' else LIVE})",
            {"token": token, "session": session["token_hash"]},
        )

    _forget_expired(admin)
    rows = admin.sql("SELECT token_hash FROM panel_reveals WHERE token_hash = ANY(%(t)s)", {"t": list(kept.values())})
    assert [bytes(row["token_hash"]) for row in rows] == [kept["live"]]
