"""The stage of a scenario run on its own (`python -m bench.restarts`, `python -m bench.recover`): a private
database with the schema, one enterprise employer with an API key and an endpoint at a local receiver, and the
environment of the processes; everything stopped and dropped at the end. The big harness seeds far more than
these scenarios need."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.config import PLAN, SCOPES, Progress
from bench.processes import free_port, private_database, server_dsn, service_env, shielded
from bench.receiver import Receiver
from bench.targets import Targets
from procedures.vocabulary import VOCABULARY
from rpc.app import prepare_database
from rpc.ops import admin as ops
from rpc.outbox.emit import build_emitter
from rpc.outbox.endpoints import Webhooks
from rpc.settings import Settings

EMAIL = "bench-stage@example.com"


@dataclass(frozen=True, slots=True)
class Stage:
    database_url: str
    env: dict[str, str]
    targets: Targets
    receiver: Receiver
    account_id: str
    endpoint_id: str
    key: str
    say: Progress


async def _employer(url: str, settings: Settings, hook_url: str, events: Sequence[str]) -> tuple[str, str, str]:
    await prepare_database(settings, url)
    async with await ops.connect(url) as conn:
        user = await ops.create_user(
            conn, email=EMAIL, password=secrets.token_urlsafe(16), role="employer", account_name="Bench stage"
        )
        await ops.set_plan(conn, VOCABULARY, email=EMAIL, plan=PLAN)
        key = await ops.create_api_key(
            conn, settings, VOCABULARY, email=EMAIL, name="bench", scopes=SCOPES, mode="test"
        )
        webhooks = Webhooks(settings, build_emitter(settings, VOCABULARY.event_kinds))
        endpoint = await ops.create_webhook(conn, webhooks, email=EMAIL, url=hook_url, events=events)
    return str(user["account_id"]), str(endpoint["id"]), str(key["key"])


@contextlib.contextmanager
def stage(events: Sequence[str], say: Progress, **settings: str) -> Iterator[Stage]:
    """The stage, with `settings` added to the processes' environment."""
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hire-bench-")))
        url = stack.enter_context(private_database(server_dsn()))
        say(f"private database {psycopg.conninfo.conninfo_to_dict(url).get('dbname')}")
        receiver = stack.enter_context(Receiver())
        env = {**service_env(url, free_port(), work), **settings}
        account, endpoint, key = asyncio.run(_employer(url, Settings.from_env(env), receiver.url, events))
        targets = Targets(stack, work, env, "uvicorn", say)
        try:
            yield Stage(url, env, targets, receiver, account, endpoint, key, say)
        finally:
            with shielded():
                say("stopping processes, dropping the private database")
                stack.close()
