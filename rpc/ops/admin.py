"""The operator's commands (`bin/admin ...`), as async functions that return the JSON object they print."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

from rpc.audit import log as audit_log
from rpc.auth import apikeys, keyring
from rpc.auth.identity import IdentityProvider
from rpc.auth.keyring import KeyRing
from rpc.auth.oauth_clients import InvalidClientSpec, create_client
from rpc.auth.passwords import Passwords
from rpc.auth.people import EMAIL_TAKEN, email_problem, name_problem, normal_email, password_problem
from rpc.auth.teams import TEAM_ROLES, Teams
from rpc.core.crypto import Sealer
from rpc.core.database_errors import on_duplicate
from rpc.core.errors import InvalidParams, RpcError
from rpc.core.types import ROLES, Connection
from rpc.core.vocabulary import Vocabulary
from rpc.db.pool import one_row
from rpc.mail.outbox import Mail
from rpc.ops import oauth_demo as demo
from rpc.outbox.emit import Emitter
from rpc.outbox.endpoints import InvalidEndpoint, Webhooks
from rpc.outbox.queue import Queue
from rpc.payments.plan_change import change_plan
from rpc.privacy.erasure import LastMemberPaying, erase_user
from rpc.privacy.steps import PrivacySteps
from rpc.settings import Settings

DEMO_WAIT_SECONDS = 300.0


class AdminError(Exception):
    """A command that cannot be carried out; its message is printed on stderr."""


_ACCOUNT_EXISTS = "SELECT id FROM accounts WHERE id = %(id)s"
_INSERT_ACCOUNT = "INSERT INTO accounts (name) VALUES (%(name)s) RETURNING id"
_INSERT_USER = """
INSERT INTO users (account_id, role, email, password_hash, email_verified_at)
VALUES (%(account_id)s, %(role)s, %(email)s, %(password_hash)s, now())
RETURNING id
"""
_USER_BY_EMAIL = """
SELECT id, account_id, role, session_epoch, display_name FROM users WHERE email = %(email)s AND issuer IS NULL
"""
_DELIVERY_ACCOUNT = """
SELECT ep.account_id FROM webhook_deliveries AS d JOIN webhook_endpoints AS ep ON ep.id = d.endpoint_id
WHERE d.id = %(id)s
"""
_ENDPOINT_ACCOUNT = "SELECT account_id FROM webhook_endpoints WHERE id = %(id)s"


async def connect(database_url: str, **options: Any) -> Connection:
    """A connection for an operator's command; `options` are the service's (`rpc.db.pool.driver_options`)."""
    return await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row, autocommit=True, **options)


async def create_user(
    conn: Connection,
    *,
    email: str,
    password: str,
    role: str,
    account_name: str | None = None,
    account_id: str | None = None,
) -> dict[str, Any]:
    if role not in ROLES:
        raise AdminError(f"--role must be one of {', '.join(ROLES)}")
    email = normal_email(email)
    if problem := email_problem(email):
        raise AdminError(f"--email: {problem}")
    if problem := password_problem(password, email):  # the web's rule: an operator's user is no weaker
        raise AdminError(f"--password: {problem}")
    if problem := name_problem(account_name):
        raise AdminError(f"--account-name: {problem}")
    password_hash = await Passwords().hash(password)
    async with conn.transaction():
        if account_id is not None:
            cursor = await conn.execute(_ACCOUNT_EXISTS, {"id": _uuid(account_id, "--account-id")})
            if await cursor.fetchone() is None:
                raise AdminError(f"no account {account_id}")
        else:
            cursor = await conn.execute(_INSERT_ACCOUNT, {"name": (account_name or email)[:200]})
            account_id = str((await one_row(cursor))["id"])
        with on_duplicate(EMAIL_TAKEN, AdminError(f"a user with e-mail {email} already exists")):
            cursor = await conn.execute(
                _INSERT_USER,
                {"account_id": account_id, "role": role, "email": email, "password_hash": password_hash},
            )
        user_id = str((await one_row(cursor))["id"])
    return {"user_id": user_id, "account_id": account_id}


async def mint_token(conn: Connection, settings: Settings, *, email: str, expires_in: int) -> dict[str, Any]:
    if settings.production:
        raise AdminError("mint-token is refused on a production deployment")
    user = await _user(conn, email)
    keyring = await KeyRing.load(conn, Sealer(settings.secret_key))
    identity = IdentityProvider(settings, keyring, Passwords())
    token = identity.access_token(str(user["id"]), user["session_epoch"], expires_in)
    return {"access_token": token}


async def invite(conn: Connection, settings: Settings, *, inviter_email: str, invitee: str) -> dict[str, Any]:
    """Invite `invitee` into the account of `inviter_email` (an employer or admin): the invitation is mailed,
    and its id and link are printed. An invitee that already has a user is refused."""
    inviter = await _user(conn, inviter_email)
    if inviter["role"] not in TEAM_ROLES:
        raise AdminError(f"{inviter_email} is a {inviter['role']}: only employers and admins have a team")
    teams = Teams(settings, Passwords(), Mail(settings, Queue()))
    try:
        sent = await teams.invite_member(
            conn,
            str(inviter["account_id"]),
            {"id": str(inviter["id"]), "name": inviter["display_name"] or _email(inviter_email)},
            invitee,
            refuse_known=True,
        )
    except InvalidParams as exc:
        raise AdminError("--invitee is not an e-mail address") from exc
    except RpcError as exc:
        raise AdminError(exc.message) from exc
    return {"invitation_id": sent.invitation_id, "link": sent.link}


async def create_api_key(
    conn: Connection,
    settings: Settings,
    vocabulary: Vocabulary,
    *,
    email: str,
    name: str,
    scopes: Sequence[str],
    mode: str,
) -> dict[str, Any]:
    user = await _user(conn, email)
    owner = apikeys.Owner(user_id=str(user["id"]), account_id=str(user["account_id"]), role=user["role"])
    try:
        async with conn.transaction():
            key_id, key = await apikeys.create_key(
                conn,
                owner,
                name=name,
                scopes=scopes,
                mode=mode,
                every_scope=list(vocabulary.scopes),
                production=settings.production,
            )
            await _audit(conn, "api_key.created", owner.account_id, key_id)
    except apikeys.InvalidKey as exc:
        raise AdminError("; ".join(_option_error(field, message) for field, message in exc.errors.items())) from exc
    return {"id": key_id, "key": key}


async def create_oauth_client(
    conn: Connection,
    settings: Settings,
    vocabulary: Vocabulary,
    *,
    email: str,
    name: str,
    redirect_uris: Sequence[str],
    public: bool,
    scopes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A third-party application owned by the user's account; its secret (null when public) is shown once."""
    user = await _user(conn, email)
    try:
        async with conn.transaction():
            client, secret = await create_client(
                conn,
                account_id=str(user["account_id"]),
                created_by=str(user["id"]),
                name=name,
                redirect_uris=redirect_uris,
                confidential=not public,
                scopes=scopes,
                every_scope=list(vocabulary.scopes),
                production=settings.production,
            )
            await _audit(conn, "oauth_client.created", str(user["account_id"]), client.id)
    except InvalidClientSpec as exc:
        raise AdminError(_option_error(exc.field, str(exc))) from exc
    return {"client_id": client.id, "client_secret": secret}


async def revoke_api_key(conn: Connection, *, key_id: str) -> dict[str, Any]:
    async with conn.transaction():
        row = await apikeys.revoke_key(conn, _uuid(key_id, "--id"), None)
        if row is None:
            raise AdminError(f"no API key {key_id}")
        await _audit(conn, "api_key.revoked", row["account_id"], row["id"])
    return {"id": row["id"], "revoked_at": row["revoked_at"]}


async def rotate_signing_key(conn: Connection, settings: Settings) -> dict[str, Any]:
    """A new signing key; every process signs with it within the key ring's reload time."""
    kid = await keyring.add_signing_key(conn, Sealer(settings.secret_key))
    return {"kid": kid, "signs_everywhere_within_seconds": int(keyring.RELOAD_SECONDS)}


async def retire_signing_key(conn: Connection, *, kid: str, force: bool) -> dict[str, Any]:
    try:
        retired_at = await keyring.retire_signing_key(conn, kid, force=force)
    except keyring.KeyStillNeeded as exc:
        raise AdminError(str(exc)) from None
    return {"kid": kid, "retired_at": retired_at.isoformat()}


async def oauth_demo(
    conn: Connection, settings: Settings, vocabulary: Vocabulary, *, email: str, scopes: Sequence[str], port: int
) -> dict[str, Any]:
    """The flow of a third-party application, for `email`'s account (`rpc.ops.oauth_demo`)."""
    unknown = sorted(set(scopes) - set(vocabulary.scopes))
    if unknown or not scopes:
        raise AdminError(f"--scopes takes a comma-separated subset of {', '.join(vocabulary.scopes)}")
    user = await _user(conn, email)
    try:
        return await demo.oauth_demo(
            conn,
            settings,
            account_id=str(user["account_id"]),
            user_id=str(user["id"]),
            every_scope=list(vocabulary.scopes),
            scopes=scopes,
            port=port,
            wait=DEMO_WAIT_SECONDS,
        )
    except demo.DemoError as exc:
        raise AdminError(str(exc)) from exc


async def set_plan(conn: Connection, vocabulary: Vocabulary, *, email: str, plan: str) -> dict[str, Any]:
    if plan not in vocabulary.plans:
        raise AdminError(f"--plan must be one of {', '.join(vocabulary.plans)}")
    user = await _user(conn, email)
    account_id = str(user["account_id"])
    async with conn.transaction():
        await change_plan(conn, account_id, plan, actor=audit_log.OPERATOR)
    return {"account_id": account_id, "plan": plan}


async def create_webhook(
    conn: Connection, webhooks: Webhooks, *, email: str, url: str, events: Sequence[str]
) -> dict[str, Any]:
    user = await _user(conn, email)
    try:
        async with conn.transaction():
            endpoint, secret = await webhooks.create(conn, str(user["account_id"]), url, events)
            await _audit(conn, "webhook.created", str(user["account_id"]), endpoint.id)
    except InvalidEndpoint as exc:
        raise AdminError(_option_error(exc.field, str(exc))) from exc
    return {"id": endpoint.id, "secret": secret}


async def delete_webhook(conn: Connection, webhooks: Webhooks, *, endpoint_id: str) -> dict[str, Any]:
    """An endpoint of any account, with its delivery log."""
    async with conn.transaction():
        account = await _owner(conn, _ENDPOINT_ACCOUNT, endpoint_id, "--id")
        await webhooks.delete(conn, account, endpoint_id)
        await _audit(conn, "webhook.deleted", account, endpoint_id)
    return {"id": endpoint_id, "deleted": True}


async def redeliver(
    conn: Connection, webhooks: Webhooks, *, delivery_id: str | None, endpoint_id: str | None, since: str | None
) -> dict[str, Any]:
    """One failed delivery again (`--id`), or every failed one of an endpoint since a time."""
    async with conn.transaction():
        if delivery_id is not None:
            account = await _owner(conn, _DELIVERY_ACCOUNT, delivery_id, "--id")
            return {"deliveries": [await webhooks.redeliver(conn, account, delivery_id)]}
        if endpoint_id is None or since is None:
            raise AdminError("give --id, or --endpoint-id with --since")
        try:
            moment = dt.datetime.fromisoformat(since.replace("Z", "+00:00"))
        except ValueError as exc:
            raise AdminError(f"--since: not an ISO 8601 time: {since!r}") from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        account = await _owner(conn, _ENDPOINT_ACCOUNT, endpoint_id, "--endpoint-id")
        return {"deliveries": await webhooks.redeliver_failed_since(conn, account, endpoint_id, moment)}


async def delete_user(conn: Connection, emitter: Emitter, steps: PrivacySteps, *, email: str) -> dict[str, Any]:
    """Erase a person as `profile.delete` does (docs/privacy.md), for an operator handling a request."""
    async with conn.transaction():
        user = await _user(conn, email)
        try:
            await erase_user(
                conn, emitter, steps, str(user["id"]), actor=audit_log.OPERATOR, origin=audit_log.NO_ORIGIN
            )
        except LastMemberPaying as exc:
            raise AdminError(
                "the last member of an account with an active subscription: cancel it or add a member first"
            ) from exc
    return {"user_id": str(user["id"]), "deleted": True}


async def _audit(conn: Connection, action: str, account_id: str, target_id: str) -> None:
    """Record an operator's action in the audit log of the account it concerns."""
    await audit_log.record(conn, action, account_id=account_id, actor=audit_log.OPERATOR, target_id=target_id)


async def _owner(conn: Connection, query: str, object_id: str, option: str) -> str:
    cursor = await conn.execute(query, {"id": _uuid(object_id, option)})
    row = await cursor.fetchone()
    if row is None:
        raise AdminError(f"{option}: no such object {object_id}")
    return str(row["account_id"])


async def _user(conn: Connection, email: str) -> dict[str, Any]:
    cursor = await conn.execute(_USER_BY_EMAIL, {"email": _email(email)})
    row = await cursor.fetchone()
    if row is None:
        raise AdminError(f"no user with e-mail {email}")
    return row


def _option_error(field: str, message: str) -> str:
    """A rule's message, naming the command-line option at fault (or none, for the account's cap)."""
    option = {"redirect_uris": "redirect-uri", "event_kinds": "events", "form": "", "role": "email"}.get(field, field)
    return f"--{option}: {message}" if option else message


def _email(email: str) -> str:
    email = email.strip().lower()
    if "@" not in email or len(email) > 254:
        raise AdminError(f"not an e-mail address: {email!r}")
    return email


def _uuid(value: str, option: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise AdminError(f"{option}: not an id: {value!r}") from exc
