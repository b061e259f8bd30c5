"""The service behind Debian's PgBouncer (1.18) in transaction mode (docs/scaling.md): a server session serves
another client after each transaction, so nothing may outlive one. Against real servers (bench/clusters.py): a
primary made with `initdb`, and PgBouncer in front of it with two server sessions per database (one for the
prepared statements' case), which its clients share as they would under load."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from bench import clusters
from rpc.app import prepare_database
from rpc.db import migrate
from rpc.db.pool import configure, driver_options
from tests.receiver import Receiver
from tests.support import Admin, LiveServer, eventually, ok, settings_for

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Pooled:
    primary: clusters.Postgres
    bouncer: clusters.Bouncer
    lone: clusters.Bouncer  # one server session per database: what one client prepares, the next one meets

    def database(self) -> str:
        """A new, empty database; its name."""
        name = f"pooled_{uuid.uuid4().hex[:10]}"
        self.primary.sql(f"CREATE DATABASE {name}")
        return name


@pytest.fixture(scope="module")
def pooled() -> Iterator[Pooled]:
    with clusters.Servers() as servers:
        primary = servers.primary()
        yield Pooled(primary, servers.bouncer(primary, pool_size=2), servers.bouncer(primary, pool_size=1))


def through(pooled: Pooled, name: str, **env: str) -> dict[str, str]:
    """The settings of a service that reaches database `name` through PgBouncer in transaction mode."""
    return {"DATABASE_POOLER": "transaction", "DATABASE_URL": pooled.bouncer.url(name), **env}


def test_named_prepared_statements_are_off_behind_a_transaction_pooler(pooled: Pooled) -> None:
    """psycopg prepares a statement it has run five times, under a name of its own (`_pg3_0`) in the server
    session; behind the pooler the next client's `_pg3_0` meets it there. The service's connections prepare none."""
    name = pooled.database()
    settings = settings_for(pooled.primary.url(name), **through(pooled, name))

    def run_twice_five_times(**options: object) -> None:
        first, second = (psycopg.connect(pooled.lone.url(name), autocommit=True, **options) for _ in range(2))
        with first, second:
            for conn in (first, second):
                for _ in range(6):
                    conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s", ("jobs",))

    with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
        run_twice_five_times()
    run_twice_five_times(**driver_options(settings))


def test_the_time_zone_is_carried_to_each_server_session(pooled: Pooled) -> None:
    """The one setting the service makes in a session, `TimeZone`, is one PgBouncer carries: whichever of the two
    server sessions answers, the service's timestamps come back in UTC, while another client of the same sessions
    that set Tokyo's gets Tokyo's."""
    name = pooled.database()

    async def offsets() -> tuple[set[dt.timedelta | None], set[dt.timedelta | None]]:
        other = await psycopg.AsyncConnection.connect(pooled.bouncer.url(name), autocommit=True)
        ours = [await psycopg.AsyncConnection.connect(pooled.bouncer.url(name)) for _ in range(5)]
        try:
            await other.execute("SET TIME ZONE 'Asia/Tokyo'")
            for conn in ours:
                await configure(conn)  # type: ignore[arg-type]
            theirs, seen = set(), set()
            for _ in range(4):
                for conn in ours:
                    theirs.add((await (await other.execute("SELECT now()")).fetchone())[0].utcoffset())
                    seen.add((await (await conn.execute("SELECT now()")).fetchone())[0].utcoffset())
            return theirs, seen
        finally:
            for conn in [other, *ours]:
                await conn.close()

    assert asyncio.run(offsets()) == ({dt.timedelta(hours=9)}, {dt.timedelta(0)})


def test_migrations_through_the_pooler_take_a_transaction_level_lock(
    pooled: Pooled, caplog: pytest.LogCaptureFixture
) -> None:
    """Without DATABASE_DIRECT_URL, three processes migrating an empty database at once through the pooler take
    turns under a transaction-level lock (a session's lock would be taken in one server session and released in
    another, and stay held): one applies the schema, the others find it current; the log says so once each."""
    name = pooled.database()
    settings = settings_for(pooled.primary.url(name), **through(pooled, name))

    async def three_at_once() -> list[int]:
        url = pooled.bouncer.url(name)
        async with asyncio.timeout(120):
            return list(await asyncio.gather(*(prepare_database(settings, url) for _ in range(3))))

    with caplog.at_level(logging.WARNING, logger=migrate.__name__):
        versions = asyncio.run(three_at_once())
    newest = migrate.migrations()[-1].version
    assert versions == [newest] * 3
    said = [record for record in caplog.records if "transaction-level lock" in record.getMessage()]
    assert len(said) == 3
    digests = pooled.primary.sql("SELECT count(*) FROM schema_digests", name)
    assert digests == [(1,)]
    held = pooled.primary.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'", name)
    assert held == [(0,)]


def test_with_a_direct_url_migrations_take_a_sessions_lock(pooled: Pooled, caplog: pytest.LogCaptureFixture) -> None:
    """DATABASE_DIRECT_URL: what needs a session of its own gets one; nothing is said of doing without."""
    name = pooled.database()
    settings = settings_for(
        pooled.primary.url(name), **through(pooled, name, DATABASE_DIRECT_URL=pooled.primary.url(name))
    )
    with caplog.at_level(logging.WARNING):
        asyncio.run(prepare_database(settings, pooled.bouncer.url(name)))
    assert not [record for record in caplog.records if "DATABASE_DIRECT_URL" in record.getMessage()]
    assert pooled.primary.sql("SELECT count(*) FROM schema_digests", name) == [(1,)]


def test_the_api_through_the_pooler_without_a_direct_url(
    pooled: Pooled, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The service through PgBouncer alone: searches asked again and again (psycopg would have prepared them),
    writes, reads, and a webhook delivered by a worker that polls for it, since it cannot LISTEN."""
    name = pooled.database()
    direct = pooled.primary.url(name)
    settings = settings_for(direct, **through(pooled, name, DATA_DIR=str(tmp_path_factory.mktemp("data"))))
    asyncio.run(prepare_database(settings, pooled.bouncer.url(name)))
    admin = Admin(direct, settings)
    employer = admin.user("employer")
    with Receiver() as receiver, caplog.at_level(logging.WARNING), LiveServer(settings) as live, live.client() as http:
        hook = receiver.hook()
        hook.know(admin.webhook(employer, hook.url, ["job.published"])["secret"])
        for number in range(8):
            job = ok(http.post("/v1/jobs.create", json=_job(number), headers=employer.auth))
            ok(http.post("/v1/jobs.publish", json={"id": job["id"]}, headers=employer.auth))
            assert ok(http.get("/v1/jobs.search", params={"q": "pooled"}, headers=employer.auth))["total"] == number + 1
            got = ok(http.get("/v1/jobs.get", params={"id": job["id"]}, headers=employer.auth))
            assert got["status"] == "published"
        eventually(lambda: len(hook.received()) == 8, "eight deliveries, found by polling")
        assert {received.valid for received in hook.received()} == {True}
    said = [record for record in caplog.records if "do not LISTEN" in record.getMessage()]
    assert len(said) == 1


def _job(number: int) -> dict[str, str]:
    return {"title": f"Pooled engineer {number}", "company": "Acme", "location": "Izmir"}


# What would keep state in a server session past its transaction (a pooler would hand it to another client), as
# SQL writes it: a session's advisory lock, LISTEN, a held cursor, a temporary table, a session's SET.
SESSION_STATE = re.compile(
    r"pg_advisory_lock\(|WITH HOLD|TEMP(ORARY)? TABLE|SET SESSION|"
    r"[\"']\s*(LISTEN|SET(?!\s+(LOCAL|TRANSACTION)\b))\s+[A-Za-z_]+(\s+[A-Za-z_]+)?"
)
# Each place allowed one: the migrations' lock through a direct connection (or a session pooler), and the one
# setting PgBouncer carries per client (rpc/db/pool.py says why).
ALLOWED = {("rpc/db/migrate.py", "pg_advisory_lock("), ("rpc/db/pool.py", "SET TIME ZONE")}


def test_no_state_is_kept_in_a_server_session() -> None:
    """An audit of the service's code and schema: no session advisory lock, LISTEN, held cursor, temporary table
    or session SET but those allowed."""
    found = set()
    for path in sorted([*(ROOT / "rpc").rglob("*.py"), *(ROOT / "procedures").rglob("*.py"), ROOT / "schema.sql"]):
        for match in SESSION_STATE.finditer(path.read_text()):
            found.add((str(path.relative_to(ROOT)), match.group(0).strip("\"' ")))
    assert found == ALLOWED
