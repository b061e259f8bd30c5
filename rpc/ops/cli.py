"""The `bin/` commands. Each prints one JSON object on stdout and exits 0, or a reason on stderr and exits 1;
`bin/admin verify-audit` prints its verdict either way and exits 1 when the chain is broken, so that a cron job
or a CI step fails on it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, NoReturn

import msgspec
import psycopg
import uvicorn
import uvloop

from rpc.app import assemble, create_app, prepare_database
from rpc.audit import log as audit_log
from rpc.core.crypto import SealError
from rpc.core.types import Connection
from rpc.db.embedded import EmbeddedPostgres, EmbeddedUnavailable
from rpc.db.pool import driver_options
from rpc.mail.transport import transport_for
from rpc.ops import admin as ops
from rpc.outbox.emit import build_emitter
from rpc.outbox.endpoints import Webhooks
from rpc.search import operations as search
from rpc.services import deliver_only
from rpc.settings import Settings, SettingsError

SERVERS = ("uvicorn", "granian")
WORKER_CONCURRENCY = 32  # bin/worker's attempts in flight; it claims jobs in batches of at least half as many


def _print(obj: dict[str, Any]) -> None:
    sys.stdout.write(msgspec.json.encode(obj).decode() + "\n")
    sys.stdout.flush()


def _fail(reason: str) -> NoReturn:
    sys.stderr.write(f"error: {reason}\n")
    raise SystemExit(1)


def _logging(level: int) -> None:
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pgserver").setLevel(logging.WARNING)  # it logs whole command lines at INFO
    logging.getLogger("procrastinate").setLevel(logging.WARNING)  # several lines per job at INFO


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except SettingsError as exc:
        _fail(str(exc))


@contextlib.contextmanager
def _database(settings: Settings) -> Iterator[str]:
    """DATABASE_URL, or the embedded cluster under the data directory (started if it is not running)."""
    if settings.database_url:
        yield settings.database_url
        return
    embedded = EmbeddedPostgres(settings.data_path / "pgdata")
    try:
        url = embedded.start()
    except EmbeddedUnavailable as exc:
        _fail(str(exc))
    try:
        yield url
    finally:
        embedded.stop()


async def _migrate(settings: Settings, database_url: str) -> int:
    try:
        return await prepare_database(settings, database_url)
    except SealError as exc:
        _fail(f"{exc}: the database's keys were sealed with another SERVICE_SECRET_KEY")
    except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
        _fail(
            "the schema change could not take its table locks between the requests of the processes serving this "
            "database (it gave way to them each time, so none failed); run bin/migrate again when it is quieter"
        )


def _where(settings: Settings) -> str:
    return "DATABASE_URL" if settings.database_url else f"embedded PostgreSQL in {settings.data_path / 'pgdata'}"


def migrate(argv: list[str] | None = None) -> None:
    """bin/migrate: bring the database to the current schema."""
    argparse.ArgumentParser(prog="bin/migrate", description=migrate.__doc__).parse_args(argv)
    _logging(logging.INFO)
    settings = _settings()
    with _database(settings) as url:
        version = asyncio.run(_migrate(settings, url))
    _print({"schema_version": version, "database": _where(settings)})


def serve(argv: list[str] | None = None) -> None:
    """bin/serve: migrate, then serve the API."""
    parser = argparse.ArgumentParser(prog="bin/serve", description=serve.__doc__)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 for every interface)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=8000,
        help="the port to listen on (default: 8000); PUBLIC_URL, when not set, is http://HOST:PORT",
    )
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--no-worker", action="store_true", help="do not run webhook delivery in-process")
    parser.add_argument("--access-log", action="store_true", help="log every request (off: /metrics counts them)")
    parser.add_argument(
        "--server", choices=SERVERS, default="uvicorn", help="the HTTP server (docs/benchmarks.md compares them)"
    )
    args = parser.parse_args(argv)
    listening = _listening(args.host, args.port)
    if not os.environ.get("PUBLIC_URL"):  # links, the OAuth issuer and /openapi.json's server: where we listen
        os.environ["PUBLIC_URL"] = listening  # read again by the processes of --workers and granian
    _logging(logging.INFO)
    settings = _settings()
    if args.workers > 1 and settings.rate_limit_storage.startswith("memory"):
        _fail(
            "--workers > 1 needs RATE_LIMIT_STORAGE=redis://...: with memory counters each process "
            "would keep its own budget and the limits would not be shared"
        )
    # uvicorn re-raises the SIGTERM it handled once it has shut down: leave through SystemExit then, so that
    # the embedded database is stopped on the way out instead of the process dying around it.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    with _database(settings) as url:
        asyncio.run(_migrate(settings, url))
        _print(_where_to_go(settings, url, listening))
        common: dict[str, Any] = {
            "host": args.host,
            "port": args.port,
            "proxy_headers": True,
            "forwarded_allow_ips": settings.forwarded_allow_ips,
            "server_header": False,
            "access_log": args.access_log,
        }
        if args.server == "granian":
            os.environ["DATABASE_URL"] = url  # its processes build their settings from the environment
            _serve_granian(args.host, args.port, args.workers, deliver=not args.no_worker, access_log=args.access_log)
        elif args.workers > 1:
            os.environ["DATABASE_URL"] = url  # the worker processes build their settings from the environment
            factory = "rpc.app:app_from_env_without_delivery" if args.no_worker else "rpc.app:app_from_env"
            uvicorn.run(factory, factory=True, workers=args.workers, **common)
        else:
            uvicorn.run(create_app(settings, url, deliver=not args.no_worker), **common)


def _listening(host: str, port: int) -> str:
    """The address `bin/serve` will answer on, as a URL; one clear line and exit 1 if it cannot listen there
    (before anything is started or printed: a port in use is the usual case, a second `bin/serve`)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            probe.bind(address)
    except OverflowError:
        _fail(f"--port {port} is not a port: choose one from 1 to 65535")
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            _fail(f"port {port} on {host} is in use (another bin/serve?): stop that, or choose another --port")
        _fail(f"cannot listen on {host} port {port}: {exc.strerror or exc}")
    name = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host  # noqa: S104
    return f"http://[{name}]:{port}" if ":" in name and not name.startswith("[") else f"http://{name}:{port}"


def _serve_granian(host: str, port: int, workers: int, *, deliver: bool, access_log: bool) -> None:
    """The same app under granian (Rust HTTP, uvloop), behind uvicorn's proxy-header handling (rpc.app)."""
    from granian import Granian
    from granian.constants import Interfaces, Loops

    factory = "rpc.app:proxied_app_from_env" if deliver else "rpc.app:proxied_app_from_env_without_delivery"
    server = Granian(
        factory,
        address=host,
        port=port,
        interface=Interfaces.ASGI,
        workers=workers,
        loop=Loops.uvloop,
        websockets=False,
        factory=True,
        log_access=access_log,
    )
    server.serve()


def _where_to_go(settings: Settings, url: str, listening: str) -> dict[str, Any]:
    """What `bin/serve` prints: where it listens, its database, the pages to open, and, on a database with nobody
    in it yet, the first command to run."""
    where = {
        "listening": listening,
        "database": _where(settings),
        "api_reference": f"{listening}/docs",
        "panel": f"{listening}/panel",
        "sign_up": f"{listening}/web/signup",
        "mail": transport_for(settings).description,
    }
    if not asyncio.run(_anyone(url)):
        where["first_step"] = (
            "bin/admin create-user --email you@example.com --password 'choose a password' --role employer"
        )
    return where


async def _anyone(url: str) -> bool:
    async with await ops.connect(url) as conn:
        cursor = await conn.execute("SELECT EXISTS (SELECT FROM users) AS anyone")
        row = await cursor.fetchone()
        return bool(row and row["anyone"])


def worker(argv: list[str] | None = None) -> None:
    """bin/worker: webhook delivery only; run as many as you like, on any host."""
    parser = argparse.ArgumentParser(prog="bin/worker", description=worker.__doc__)
    parser.add_argument(
        "--concurrency", type=int, default=WORKER_CONCURRENCY, help="attempts in flight at once (all endpoints)"
    )
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        _fail("--concurrency must be at least 1")
    _logging(logging.INFO)
    settings = _settings()
    with _database(settings) as url:
        asyncio.run(_migrate(settings, url))
        _print({"worker": "webhooks", "concurrency": args.concurrency, "database": _where(settings)})
        # uvloop, as uvicorn gives the API: a worker's time goes to many short round trips, and its event loop
        # costs a fraction of asyncio's on each of them.
        uvloop.run(deliver_only(settings, url, assemble(settings)[1], args.concurrency))


def admin(argv: list[str] | None = None) -> None:
    """bin/admin: operator commands."""
    parser = argparse.ArgumentParser(prog="bin/admin", description=admin.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    user = commands.add_parser("create-user", help="create a user (and an account, unless --account-id)")
    user.add_argument("--email", required=True)
    user.add_argument("--password", required=True)
    user.add_argument("--role", required=True)
    account = user.add_mutually_exclusive_group()
    account.add_argument("--account-name")
    account.add_argument("--account-id")
    token = commands.add_parser("mint-token", help="a session token of the built-in identity provider")
    token.add_argument("--email", required=True)
    token.add_argument("--expires-in", type=int, default=3600)
    key = commands.add_parser("create-api-key", help="an API key for an employer or admin")
    key.add_argument("--email", required=True)
    key.add_argument("--name", required=True)
    key.add_argument("--scopes", required=True, help="comma-separated")
    key.add_argument("--mode", default="test", choices=["live", "test"])
    revoke = commands.add_parser("revoke-api-key", help="revoke an API key at once")
    revoke.add_argument("--id", required=True)
    hook = commands.add_parser("create-webhook", help="a webhook endpoint of the user's account")
    hook.add_argument("--email", required=True)
    hook.add_argument("--url", required=True)
    hook.add_argument("--events", required=True, help="comma-separated event kinds")
    unhook = commands.add_parser("delete-webhook", help="delete a webhook endpoint and its delivery log")
    unhook.add_argument("--id", required=True)
    oauth = commands.add_parser("create-oauth-client", help="register a third-party application (OAuth 2.0 client)")
    oauth.add_argument("--email", required=True, help="a user of the owning account")
    oauth.add_argument("--name", required=True, help="shown on the consent page")
    oauth.add_argument("--redirect-uri", required=True, action="append", help="exact; repeat for several")
    oauth.add_argument("--public", action="store_true", help="no secret (browser and native apps; PKCE only)")
    oauth.add_argument("--scopes", help="comma-separated scopes it may ask for (default: every scope)")
    again = commands.add_parser("redeliver", help="deliver failed webhook deliveries again")
    again.add_argument("--id", help="one failed delivery")
    again.add_argument("--endpoint-id", help="with --since: every failed delivery of this endpoint")
    again.add_argument("--since", help="ISO 8601 time, e.g. 2026-11-21T00:00:00Z")
    demo = commands.add_parser("oauth-demo", help="walk through OAuth 2.0 as a third-party app would (docs/oauth.md)")
    demo.add_argument("--email", required=True, help="a user of the account that owns the demo app")
    demo.add_argument("--scopes", default="read:profile,read:jobs", help="comma-separated scopes to ask for")
    demo.add_argument("--port", type=int, default=8765, help="the loopback port the browser comes back to")
    demo.add_argument(
        "--api", help="the service's address, as bin/serve printed it (default: PUBLIC_URL, else port 8000's)"
    )
    invite = commands.add_parser("invite", help="e-mail an invitation into the inviter's hiring account")
    invite.add_argument("--email-of-inviter", required=True, help="an employer or admin of the account")
    invite.add_argument("--invitee", required=True, help="the e-mail address to invite")
    plan = commands.add_parser("set-plan", help="put a user's account on a plan")
    plan.add_argument("--email", required=True)
    plan.add_argument("--plan", required=True)
    commands.add_parser("rotate-signing-key", help="a new signing key for sessions and OAuth access tokens")
    retire = commands.add_parser("retire-signing-key", help="retire an older signing key: its tokens stop at once")
    retire.add_argument("--kid", required=True)
    retire.add_argument("--force", action="store_true", help="even while tokens it signed may still be in use")
    erase = commands.add_parser("delete-user", help="erase a person (docs/privacy.md)")
    erase.add_argument("--email", required=True)
    commands.add_parser("verify-audit", help="check the audit log's hash chain from end to end")
    commands.add_parser(
        "rebuild-search", help="build this host's search indexes anew from PostgreSQL (running servers take them up)"
    )
    commands.add_parser("verify-search", help="compare this host's search indexes with PostgreSQL")
    args = parser.parse_args(argv)
    _logging(logging.WARNING)
    settings = _settings()
    with _database(settings) as url:
        asyncio.run(_migrate(settings, url))
        done = asyncio.run(_admin(args, settings, url))
    _print(done)
    if args.command == "verify-audit" and not done["ok"]:
        broken = done["entry"]
        _fail(f"the audit log does not verify at entry {broken['id'] or '(end)'}: {broken['reason']}")
    if args.command == "verify-search" and not done["ok"]:
        _fail("a search index differs from PostgreSQL (see above); bin/admin rebuild-search builds it anew")


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


async def _admin(args: argparse.Namespace, settings: Settings, url: str) -> dict[str, Any]:
    business = assemble(settings)[1]
    vocabulary = business.vocabulary
    # Defers on the command's own connection: no pool of its own.
    emitter = build_emitter(settings, vocabulary.event_kinds)
    webhooks = Webhooks(settings, emitter)
    commands: dict[str, Callable[[Connection], Coroutine[Any, Any, dict[str, Any]]]] = {
        "create-user": lambda conn: ops.create_user(
            conn,
            email=args.email,
            password=args.password,
            role=args.role,
            account_name=args.account_name,
            account_id=args.account_id,
        ),
        "mint-token": lambda conn: ops.mint_token(conn, settings, email=args.email, expires_in=args.expires_in),
        "create-api-key": lambda conn: ops.create_api_key(
            conn,
            settings,
            vocabulary,
            email=args.email,
            name=args.name,
            scopes=_list(args.scopes),
            mode=args.mode,
        ),
        "revoke-api-key": lambda conn: ops.revoke_api_key(conn, key_id=args.id),
        "create-oauth-client": lambda conn: ops.create_oauth_client(
            conn,
            settings,
            vocabulary,
            email=args.email,
            name=args.name,
            redirect_uris=args.redirect_uri,
            public=args.public,
            scopes=_list(args.scopes) if args.scopes is not None else None,
        ),
        "invite": lambda conn: ops.invite(conn, settings, inviter_email=args.email_of_inviter, invitee=args.invitee),
        "set-plan": lambda conn: ops.set_plan(conn, vocabulary, email=args.email, plan=args.plan),
        "oauth-demo": lambda conn: ops.oauth_demo(
            conn,
            msgspec.structs.replace(settings, public_url=args.api.rstrip("/")) if args.api else settings,
            vocabulary,
            email=args.email,
            scopes=_list(args.scopes),
            port=args.port,
        ),
        "create-webhook": lambda conn: ops.create_webhook(
            conn, webhooks, email=args.email, url=args.url, events=_list(args.events)
        ),
        "delete-webhook": lambda conn: ops.delete_webhook(conn, webhooks, endpoint_id=args.id),
        "rotate-signing-key": lambda conn: ops.rotate_signing_key(conn, settings),
        "retire-signing-key": lambda conn: ops.retire_signing_key(conn, kid=args.kid, force=args.force),
        "delete-user": lambda conn: ops.delete_user(conn, emitter, business.privacy, email=args.email),
        "verify-audit": audit_log.verify,
        "rebuild-search": lambda conn: search.rebuild_all(conn, business.corpora, settings, url),
        "verify-search": lambda conn: search.verify_all(business.corpora, settings.search_path, url),
        "redeliver": lambda conn: ops.redeliver(
            conn, webhooks, delivery_id=args.id, endpoint_id=args.endpoint_id, since=args.since
        ),
    }
    try:
        async with await ops.connect(url, **driver_options(settings)) as conn:
            return await commands[args.command](conn)
    except ops.AdminError as exc:
        _fail(str(exc))
