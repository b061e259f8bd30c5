"""Reads answered by streaming replicas, read-your-writes kept for every reader (docs/scaling.md), against real
servers (bench/clusters.py): a primary made with `initdb`, a replica made with `pg_basebackup -R` that replays each
commit two seconds after it was made (`recovery_min_apply_delay`), a prompt one, and server processes reading
through them. Nothing here is timed: what a replica has replayed is waited for, never slept for."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from bench import clusters, seeding
from rpc.app import prepare_database
from rpc.ops import admin as ops
from tests.support import Admin, LiveServer, User, admin_command, eventually, metric, ok, settings_for

DELAY = 2  # seconds the lagging replica replays each commit after it was made
READS = "hire_db_reads_total"
FALLBACKS = "hire_replica_fallbacks_total"
UNREACHABLE = "postgresql://127.0.0.1:9/hire"  # nothing listens on the discard port


@dataclass
class Cluster:
    servers: clusters.Servers
    primary: clusters.Postgres
    lagging: clusters.Postgres
    prompt: clusters.Postgres
    database: str  # the service's database on the primary

    def replayed_everything(self, replica: clusters.Postgres) -> bool:
        """Whether `replica` shows everything the primary has committed until now."""
        (position,) = self.primary.sql("SELECT pg_current_wal_lsn()::text")[0]
        return bool(replica.sql(f"SELECT pg_last_wal_replay_lsn() >= '{position}'::pg_lsn")[0][0])


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with clusters.Servers() as servers:
        primary = servers.primary()
        primary.sql("CREATE DATABASE hire")
        database = primary.url("hire")
        asyncio.run(prepare_database(settings_for(database), database))
        lagging = servers.replica(primary, "lagging", delay=f"{DELAY}s")
        # Conflicts with its recovery cancel its queries after a tenth of a second: hot_standby_feedback must spare
        # them (test_a_feed_streamed_from_a_replica_outlives_the_primarys_vacuum).
        prompt = servers.replica(primary, "prompt", settings="max_standby_streaming_delay = '100ms'")
        yield Cluster(servers, primary, lagging, prompt, database)


def server(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, *replicas: clusters.Postgres, **env: str
) -> LiveServer:
    """A server process of the service reading through `replicas`, with no webhook worker: nothing writes but
    the tests' calls."""
    urls = ",".join(replica.url("hire") for replica in replicas)
    data = str(tmp_path_factory.mktemp("data"))
    return LiveServer(settings_for(cluster.database, DATABASE_REPLICA_URLS=urls, DATA_DIR=data, **env), deliver=False)


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Admin:
    return Admin(cluster.database, settings_for(cluster.database))


@pytest.fixture(scope="module")
def employer(admin: Admin) -> User:
    return admin.user("employer")


@pytest.fixture(scope="module")
def colleague(admin: Admin, employer: User) -> User:
    return admin.user("employer", account_id=employer.account_id)


@pytest.fixture(scope="module")
def candidate(admin: Admin) -> User:
    return admin.user("candidate")


@pytest.fixture(scope="module")
def writer(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with server(cluster, tmp_path_factory, cluster.lagging) as live, live.client() as client:
        yield client


@pytest.fixture(scope="module")
def reader(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """Another server process, reading through the same lagging replica."""
    with server(cluster, tmp_path_factory, cluster.lagging) as live, live.client() as client:
        yield client


def new_job(client: httpx.Client, who: User, title: str) -> dict[str, Any]:
    job: dict[str, Any] = ok(
        client.post(
            "/v1/jobs.create",
            json={"title": title, "company": "Acme", "location": "Izmir", "description": "Streams " * 300},
            headers=who.auth,
        )
    )
    return job


def known(client: httpx.Client, *users: User) -> None:
    """Each user's credential used once on this server: its later statements read the primary's position."""
    for user in users:
        ok(client.get("/v1/profile.me", headers=user.auth))


def test_every_write_is_read_at_once_through_the_lagging_replica(
    cluster: Cluster, writer: httpx.Client, reader: httpx.Client, employer: User, colleague: User, candidate: User
) -> None:
    """Each write through one server is seen at once by its writer, and through another server by another user
    and by an anonymous visitor, although the replica both servers read through shows it only two seconds later:
    the replica was asked, had not replayed the write, and the primary answered."""
    known(writer, employer)
    known(reader, colleague, candidate)
    behind = metric(reader, FALLBACKS, reason="behind")
    word = f"replicated{uuid.uuid4().hex[:8]}"
    job = new_job(writer, employer, f"Engineer {word}")
    assert ok(writer.get("/v1/jobs.get", params={"id": job["id"]}, headers=employer.auth))["title"].endswith(word)
    assert ok(reader.get("/v1/jobs.get", params={"id": job["id"]}, headers=colleague.auth))["status"] == "draft"

    ok(writer.post("/v1/jobs.publish", json={"id": job["id"]}, headers=employer.auth))
    listed = ok(reader.get("/v1/jobs.list", params={"per_page": 100}, headers=candidate.auth))
    assert job["id"] in [row["id"] for row in listed["data"]]
    assert ok(reader.get("/v1/jobs.search", params={"q": word}, headers=candidate.auth))["total"] == 1
    page = reader.get(f"/jobs/{job['id']}")
    assert page.status_code == 200 and word in page.text
    assert job["id"] in reader.get("/feeds/jobs.xml").text

    ok(writer.post("/v1/jobs.update", json={"id": job["id"], "title": f"Lead {word}"}, headers=employer.auth))
    assert ok(reader.get("/v1/jobs.get", params={"id": job["id"]}, headers=colleague.auth))["title"] == f"Lead {word}"
    assert ok(reader.get("/v1/jobs.search", params={"q": f"lead {word}"}, headers=candidate.auth))["total"] == 1

    ok(writer.post("/v1/jobs.close", json={"id": job["id"]}, headers=employer.auth))
    assert reader.get(f"/jobs/{job['id']}").status_code == 410
    assert ok(reader.get("/v1/jobs.search", params={"q": word}, headers=candidate.auth))["total"] == 0
    assert job["id"] not in reader.get("/feeds/jobs.xml").text

    assert not cluster.replayed_everything(cluster.lagging), "the replica was meant to lag behind the reads"
    assert metric(reader, FALLBACKS, reason="behind") >= behind + 8  # every read above found it behind


def test_reads_go_to_the_replica_once_it_has_replayed_them(
    cluster: Cluster, writer: httpx.Client, reader: httpx.Client, employer: User, candidate: User
) -> None:
    """With nothing in flight, a replica that has replayed every write answers the reads — the API's and the
    anonymous visitor's — and what it answers is what was written."""
    known(reader, employer, candidate)
    job = new_job(writer, employer, "Replayed engineer")
    ok(writer.post("/v1/jobs.publish", json={"id": job["id"]}, headers=employer.auth))
    eventually(lambda: cluster.replayed_everything(cluster.lagging), "the lagging replica's replay", timeout=30)
    replica = cluster.lagging.label

    def all_on_the_replica() -> bool:
        before = metric(reader, READS, database=replica), metric(reader, READS, database="primary")
        assert ok(reader.get("/v1/jobs.get", params={"id": job["id"]}, headers=employer.auth))["status"] == "published"
        assert ok(reader.get("/v1/jobs.search", params={"q": "replayed"}, headers=candidate.auth))["total"] >= 1
        assert reader.get(f"/jobs/{job['id']}").status_code == 200
        after = metric(reader, READS, database=replica), metric(reader, READS, database="primary")
        return after[0] - before[0] >= 3 and after[1] == before[1]

    # Anything else committed meanwhile (a checkpoint's record is not) would hold the replica back two seconds.
    eventually(all_on_the_replica, "three reads answered by the replica alone", timeout=30)
    assert metric(reader, "hire_replica_up", database=replica) == 1
    assert metric(reader, "hire_replica_lag_seconds", database=replica) < DELAY


def test_a_read_that_writes_is_answered_by_the_primary(
    cluster: Cluster, reader: httpx.Client, candidate: User, admin: Admin
) -> None:
    """`profile.export` reads, and records the export in the audit log: the replica refuses its write, having
    written nothing, and the primary answers it, recorded once."""
    known(reader, candidate)
    eventually(lambda: cluster.replayed_everything(cluster.lagging), "the lagging replica's replay", timeout=30)
    wrote = metric(reader, FALLBACKS, reason="wrote")
    assert ok(reader.get("/v1/profile.export", headers=candidate.auth))["profile"]["id"] == candidate.user_id
    assert metric(reader, FALLBACKS, reason="wrote") == wrote + 1
    assert [action for action, _, _ in admin.audit_trail(candidate.user_id)].count("profile.exported") == 1


def test_a_replica_lagging_past_the_limit_is_left_out_and_taken_back(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, writer: httpx.Client, employer: User
) -> None:
    """REPLICA_MAX_LAG_SECONDS: a replica further behind is left out (reads go to the primary without waiting
    for it), and taken back once it has caught up; /readyz stays ready throughout."""
    replica = cluster.lagging.label
    eventually(lambda: cluster.replayed_everything(cluster.lagging), "the lagging replica's replay", timeout=30)
    lag_limit = server(cluster, tmp_path_factory, cluster.lagging, REPLICA_MAX_LAG_SECONDS="0.5")
    with lag_limit as live, live.client() as client:
        eventually(lambda: metric(client, "hire_replica_up", database=replica) == 1, "the replica's admission")
        new_job(writer, employer, "Lagging engineer")  # the replica shows it two seconds later
        eventually(lambda: metric(client, "hire_replica_up", database=replica) == 0, "the replica left out")
        assert metric(client, "hire_replica_lag_seconds", database=replica) > 0.5
        assert client.get("/readyz").status_code == 200
        known(client, employer)
        before = metric(client, FALLBACKS, reason="unavailable"), metric(client, READS, database=replica)
        ok(client.get("/v1/jobs.list", params={"mine": "true"}, headers=employer.auth))
        after = metric(client, FALLBACKS, reason="unavailable"), metric(client, READS, database=replica)
        assert after[0] > before[0] and after[1] == before[1]
        eventually(lambda: metric(client, "hire_replica_up", database=replica) == 1, "the replica taken back")


def test_a_starting_server_builds_its_search_index_from_a_replica(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Its replicas checked before it serves, a new server process reads its whole search index (a minute's read
    at a million jobs) from one, not from the primary."""
    starting = server(cluster, tmp_path_factory, cluster.prompt)
    with caplog.at_level(logging.INFO, logger="rpc.search.index"), starting as live, live.client() as client:
        eventually(lambda: client.get("/readyz").status_code == 200, "the server's search index", timeout=60)
    built = [record.getMessage() for record in caplog.records if " built at position " in record.getMessage()]
    assert built and built[0].endswith(f"from {cluster.prompt.label}"), built


def test_bin_admin_rebuilds_the_search_index_from_a_replica(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`bin/admin rebuild-search` reads the index it builds as a starting server does: from a healthy replica,
    and from the primary when the replicas named cannot answer."""
    for replica, read_from in ((cluster.prompt.url("hire"), cluster.prompt.label), (UNREACHABLE, "primary")):
        data = str(tmp_path_factory.mktemp("data"))
        done = admin_command(
            settings_for(cluster.database, DATABASE_REPLICA_URLS=replica, DATA_DIR=data), "rebuild-search"
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["read_from"] == read_from and report["indexes"][0]["slots"] == {"slot-0": "served"}


def test_a_replica_stopped_outright_costs_no_request_and_is_taken_back(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, writer: httpx.Client, employer: User, candidate: User
) -> None:
    """`pg_ctl stop -m immediate` on the replica that answers the reads, under a steady load of reads: not one
    request fails (a read on it when it goes is answered by the primary), it is left out, and once started
    again it is taken back and answers reads again."""
    job = new_job(writer, employer, "Steady engineer")
    ok(writer.post("/v1/jobs.publish", json={"id": job["id"]}, headers=employer.auth))
    replica = cluster.prompt.label
    with server(cluster, tmp_path_factory, cluster.prompt) as live, live.client() as client:
        known(client, candidate)
        load = Load(live, candidate, job["id"])
        with load:
            on_replica = lambda: metric(client, READS, database=replica)  # noqa: E731
            eventually(lambda: on_replica() > 10, "reads answered by the replica")
            cluster.prompt.stop("immediate")
            eventually(lambda: metric(client, "hire_replica_up", database=replica) == 0, "the replica left out")
            assert client.get("/readyz").status_code == 200
            answered = load.answered()
            eventually(lambda: load.answered() > answered + 20, "reads answered while the replica is down")
            cluster.prompt.start()
            eventually(lambda: metric(client, "hire_replica_up", database=replica) == 1, "the replica taken back")
            taken_back = on_replica()
            eventually(lambda: on_replica() > taken_back + 10, "reads answered by the replica again")
        assert load.statuses and set(load.statuses) == {200}, load.statuses


class Load:
    """Reads from four threads until the block ends: the API's (as `who`) and a job's public page."""

    def __init__(self, live: LiveServer, who: User, job_id: str) -> None:
        self._live = live
        self._who = who
        self._job_id = job_id
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.statuses: Counter[int] = Counter()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(4)]

    def answered(self) -> int:
        with self._lock:
            return sum(self.statuses.values())

    def _run(self) -> None:
        with self._live.client() as client:
            while not self._stop.is_set():
                for response in (
                    client.get("/v1/jobs.get", params={"id": self._job_id}, headers=self._who.auth),
                    client.get("/v1/jobs.list", headers=self._who.auth),
                    client.get(f"/jobs/{self._job_id}"),
                ):
                    with self._lock:
                        self.statuses[response.status_code] += 1

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)


OLDEST = "SELECT id FROM jobs WHERE status = 'published' ORDER BY created_at, id LIMIT 2"
RENDERING = "SELECT count(*) FROM pg_stat_activity WHERE datname = 'hire' AND query LIKE '%%feed_jobs%%'"


async def seed_jobs(url: str, count: int) -> None:
    """`count` jobs of an employer by COPY (bin/bench's seeding), most of them published."""
    settings = settings_for(url)
    await prepare_database(settings, url)
    async with await ops.connect(url) as conn:
        user = await ops.create_user(conn, email="vacuum@example.test", password=uuid.uuid4().hex, role="employer")
        await seeding.load_jobs(conn, random.Random(34), count, [str(user["account_id"])], collect=False, rebuild=True)


@pytest.fixture(scope="module")
def vacuumed() -> Iterator[Cluster]:
    """A cluster of its own: a primary with 30,000 jobs and one replica, whose queries in the way of its recovery
    are cancelled after a tenth of a second; no other replica holds the primary's vacuum back."""
    with clusters.Servers() as servers:
        primary = servers.primary()
        primary.sql("CREATE DATABASE hire")
        asyncio.run(seed_jobs(primary.url("hire"), 30_000))  # a render of seconds
        replica = servers.replica(primary, "replica", settings="max_standby_streaming_delay = '100ms'")
        yield Cluster(servers, primary, replica, replica, primary.url("hire"))


def test_a_feed_rendered_from_a_replica_outlives_the_primarys_vacuum(
    vacuumed: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The aggregators' feed is rendered from the replica in one snapshot (a long read: a minute at a million
    jobs) while the primary changes jobs and vacuums their old versions away. The replica cancels a query in the
    way of its recovery after 100 ms (`max_standby_streaming_delay`); with `hot_standby_feedback` the primary keeps
    what the render's snapshot still reads, so nothing is in the way, and the feed comes whole, as of its start.
    Tried until the vacuum's replay falls within a render (a busy machine may make the render the quicker)."""
    cluster, replica = vacuumed, vacuumed.prompt
    published = cluster.primary.sql("SELECT count(*) FROM jobs WHERE status = 'published'", "hire")[0][0]
    # FEED_RENDER_WAIT: each reader waits for the render of the version it asked at, so its answer is that render.
    with server(cluster, tmp_path_factory, replica, FEED_RENDER_WAIT="60") as live, live.client() as client:
        # Ready: its search index built, so that nothing but the render reads long.
        eventually(lambda: client.get("/readyz").status_code == 200, "the server's search index", timeout=120)
        eventually(lambda: metric(client, "hire_replica_up", database=replica.label) == 1, "the replica's admission")
        attempts = iter(range(1, 6))

        def vacuumed_while_rendering() -> bool:
            attempt = next(attempts, None)
            assert attempt is not None, "five renders all ended before the vacuum's replay: seed more jobs"
            answers: list[httpx.Response] = []
            reader = threading.Thread(target=lambda: answers.append(client.get("/feeds/jobs.xml")))
            reader.start()
            eventually(lambda: replica.sql(RENDERING)[0][0] == 1, "the render's read on the replica")
            # The oldest jobs, which the render (newest first) reads last: their versions as of its snapshot go.
            cluster.primary.sql(f"UPDATE jobs SET description = 'Changed {attempt}.' WHERE id IN ({OLDEST})", "hire")
            cluster.primary.sql("VACUUM (INDEX_CLEANUP OFF) jobs", "hire")  # the old versions pruned
            eventually(lambda: cluster.replayed_everything(replica), "the vacuum's replay", timeout=30)
            overlapped = replica.sql(RENDERING)[0][0] == 1
            cancelled = replica.sql("SELECT confl_snapshot FROM pg_stat_database_conflicts WHERE datname = 'hire'")
            assert cancelled == [(0,)], "the replica cancelled the render: its snapshot was in the way of the replay"
            reader.join(timeout=120)
            (answer,) = answers
            assert answer.status_code == 200, answer.text
            assert answer.text.endswith("</source>\n") and answer.text.count("<job>") == published
            assert f"Changed {attempt}." not in answer.text  # as of the render's start
            return overlapped

        eventually(vacuumed_while_rendering, "a vacuum replayed while a render read", timeout=600)


def test_metrics_show_each_database(cluster: Cluster, reader: httpx.Client) -> None:
    """`/metrics`: reads by the database that answered, fallbacks by reason, each replica up and its lag."""
    text = reader.get("/metrics").text
    replica = cluster.lagging.label
    for line in (
        'hire_db_reads_total{database="primary"}',
        f'hire_db_reads_total{{database="{replica}"}}',
        'hire_replica_fallbacks_total{reason="behind"}',
        'hire_replica_fallbacks_total{reason="unavailable"}',
        f'hire_replica_up{{database="{replica}"}}',
        f'hire_replica_lag_seconds{{database="{replica}"}}',
    ):
        assert line in text, line
