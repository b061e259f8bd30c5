"""Sign-up, e-mail verification, password reset and change for the built-in identity provider (docs/people.md).

Nobody can learn from these whether an address has an account: sign-up and reset answer the same either way
and do the same work (sign-up hashes the password whatever happens; the mail that tells the two cases apart
goes to the address itself). A password reset or change ends every session of the person at once
(`end_sessions`); their API keys stay.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

import email_validator

from rpc.audit import log as audit_log
from rpc.auth import links
from rpc.auth.passwords import Passwords
from rpc.core.database_errors import on_duplicate
from rpc.core.envelope import Params
from rpc.core.errors import InvalidCredentials, InvalidParams
from rpc.core.types import Connection
from rpc.db.pool import one_row
from rpc.mail.outbox import Mail
from rpc.settings import Settings

MIN_PASSWORD_LENGTH = 10
MAX_PASSWORD_LENGTH = 1024
MAX_EMAIL_LENGTH = 254
MAX_NAME_LENGTH = 200
_LINE_BREAKS = frozenset({"Cc", "Zl", "Zp"})  # control characters, line and paragraph separators
# The most common passwords of at least 10 characters in public breach corpora: refused outright.
COMMON_PASSWORDS = frozenset(
    {
        "1234567890", "0987654321", "1111111111", "0000000000", "123456789a", "a123456789", "qwertyuiop",
        "1q2w3e4r5t", "1qaz2wsx3edc", "qwerty1234", "qwerty12345", "password12", "password123", "password1234",
        "iloveyou12", "passw0rd123", "abcdefghij", "abc1234567", "123123123123", "1234567890a", "asdfghjkl1",
        "zaq12wsxcde", "qwertyuiop1", "welcome123", "letmein123", "changeme123", "administrator", "football12",
        "princess12", "sunshine12", "123qweasdzxc", "12345qwert", "qazwsxedcrfv", "1q2w3e4r5t6y",
    }
)  # fmt: skip

_USER_BY_EMAIL = """
SELECT id::text AS id, email_verified_at IS NOT NULL AS verified
FROM users WHERE email = %(email)s AND issuer IS NULL
FOR UPDATE
"""
# The one e-mail address per person of the built-in provider.
EMAIL_TAKEN = "users_email_key"
_NEW_USER = """
WITH account AS (INSERT INTO accounts (name) VALUES (%(account_name)s) RETURNING id)
INSERT INTO users (account_id, role, email, password_hash, display_name)
SELECT account.id, %(role)s, %(email)s, %(password_hash)s, %(display_name)s FROM account
"""
# The person as their sign-up asked, while still unverified (nothing else can depend on them yet).
_SHAPED = """
WITH person AS (
    UPDATE users SET role = %(role)s, display_name = %(display_name)s, updated_at = now()
    WHERE id = %(id)s AND email_verified_at IS NULL RETURNING account_id
)
UPDATE accounts SET name = %(account_name)s WHERE id = (SELECT account_id FROM person)
"""
_PERSON = "SELECT account_id::text AS account_id, email, password_hash FROM users WHERE id = %(id)s AND issuer IS NULL"
_NEW_HASH = """
UPDATE users SET password_hash = %(password_hash)s, email_verified_at = coalesce(email_verified_at, now()),
       updated_at = now()
WHERE id = %(id)s
"""
# Every session token (by the epoch it carries), refresh token and web session of the person.
_END_SESSIONS = """
WITH epoch AS (
    UPDATE users SET session_epoch = session_epoch + 1 WHERE id = %(id)s RETURNING id
), refresh AS (
    UPDATE refresh_tokens SET revoked_at = now() WHERE user_id = %(id)s AND revoked_at IS NULL
)
DELETE FROM web_sessions WHERE user_id = %(id)s
"""


@dataclass(frozen=True, slots=True)
class Verified:
    """A followed verification link: the token of the reset link that lets the person choose a password (a link
    sent again carries none), and where signing in goes on to."""

    reset_token: str | None
    next_path: str | None


class SignUp(Params, frozen=True, kw_only=True):
    email: str
    password: str
    role: Literal["candidate", "employer"]
    display_name: str | None = None
    account_name: str | None = None


def normal_email(email: str) -> str:
    """Spaces around an address typed in a form go; any other character stays, for `email_problem` to refuse
    (a line break or a control character stripped away would let such an address through)."""
    return email.strip(" ").lower()


def email_problem(email: str) -> str | None:
    """Why `email` is not one plain ASCII addr-spec (`local@domain`), or None: a display name (`x <a@b>`), a
    comment (`a(b)@c`), several addresses (`a,b@c`), quoting or control characters would let the address say
    something other than where the mail goes. `.test` domains (RFC 6761) are accepted, for tests and staging;
    whether the domain receives mail is not asked."""
    problem = None
    if not email.isascii() or len(email) > MAX_EMAIL_LENGTH:
        problem = "use only ASCII letters, digits and punctuation, at most 254 of them."
    else:
        try:
            email_validator.validate_email(
                email, check_deliverability=False, test_environment=True, allow_smtputf8=False
            )
        except email_validator.EmailNotValidError as exc:
            problem = str(exc)
    if problem is None:
        return None
    return f"Enter one plain e-mail address such as name@example.com, without a name or comments: {problem}"


def password_problem(password: str, email: str) -> str | None:
    """Why `password` is refused for the person with `email`, or None."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"Use at least {MIN_PASSWORD_LENGTH} characters."
    if len(password) > MAX_PASSWORD_LENGTH:
        return f"Use at most {MAX_PASSWORD_LENGTH} characters."
    folded = password.strip().lower()
    if folded in (email, email.partition("@")[0]):
        return "Your password may not be your e-mail address."
    if folded in COMMON_PASSWORDS:
        return "This password is among the most common ones; choose another."
    return None


def invalid(problems: dict[str, str | None]) -> None:
    """Raise `422 invalid_params` with one entry per field that has a problem."""
    errors = [{"field": field, "message": message} for field, message in problems.items() if message]
    if errors:
        raise InvalidParams(errors)


def name_problem(name: str | None) -> str | None:
    """Why a person's or an account's name is refused, or None: too long, or with a control character or line
    break (a name is shown in pages and mail, and must not start a new line in either)."""
    if name is None:
        return None
    if len(name.strip()) > MAX_NAME_LENGTH or any(unicodedata.category(c) in _LINE_BREAKS for c in name):
        return f"Use at most {MAX_NAME_LENGTH} characters, without line breaks or control characters."
    return None


def _asked(params: SignUp, email: str) -> dict[str, Any]:
    """What a sign-up asks to be: its role, display name and account name (an employer's own, else the e-mail)."""
    account_name = (params.account_name or "").strip() if params.role == "employer" else ""
    return {
        "role": params.role,
        "display_name": (params.display_name or "").strip() or None,
        "account_name": (account_name or email)[:MAX_NAME_LENGTH],
    }


async def end_sessions(conn: Connection, user_id: str) -> None:
    """Stop every session token, refresh token and web session of the person at their next use (API keys and
    OAuth grants stay). Part of the caller's transaction."""
    await conn.execute(_END_SESSIONS, {"id": user_id})


class People:
    """The flows, with the services they need: password hashing, the mail outbox and the links' lifetimes."""

    def __init__(self, settings: Settings, passwords: Passwords, mail: Mail) -> None:
        self._settings = settings
        self._passwords = passwords
        self.mail = mail

    async def sign_up(self, conn: Connection, params: SignUp, next_path: str | None = None) -> None:
        """A new person gets a verification link; a known verified address a reset link instead; a known
        unverified one (a sign-up never confirmed) a new verification link that carries this sign-up's password,
        so that only whoever follows it signs in with it (the person's row keeps the first sign-up's). Either
        link keeps `next_path`, the page of this site the sign-up began on, where signing in goes on to."""
        email = normal_email(params.email)
        invalid(
            {
                "email": email_problem(email),
                "password": password_problem(params.password, email),
                "display_name": name_problem(params.display_name),
                "account_name": name_problem(params.account_name),
            }
        )
        password_hash = await self._passwords.hash(params.password)  # known or not: the same work
        async with conn.transaction():
            known = await (await conn.execute(_USER_BY_EMAIL, {"email": email})).fetchone()
            if known is None:  # new, or created by a concurrent sign-up a moment ago: this one gets its own link
                await self._create(conn, params, email, password_hash)
                known = await one_row(await conn.execute(_USER_BY_EMAIL, {"email": email}))
            if known["verified"]:
                link = await self._reset_link(conn, known["id"], email, next_path)
                await self.mail.send(conn, "account_exists", email, link=link)
                return
            asked = _asked(params, email)
            await self._send_verification(conn, known["id"], email, password_hash, asked, next_path)

    async def _create(self, conn: Connection, params: SignUp, email: str, password_hash: str) -> None:
        """The person, unless a concurrent sign-up created them first."""
        values = {**_asked(params, email), "email": email, "password_hash": password_hash}
        with on_duplicate(EMAIL_TAKEN, None):
            async with conn.transaction():
                await conn.execute(_NEW_USER, values)

    async def resend_verification(self, conn: Connection, email: str, next_path: str | None = None) -> None:
        """A new verification link for a known, unverified address; nothing otherwise (and the same answer). It
        carries no password: whoever follows it chooses one then (`verify`)."""
        email = normal_email(email)
        async with conn.transaction():
            known = await (await conn.execute(_USER_BY_EMAIL, {"email": email})).fetchone()
            if known is not None and not known["verified"]:
                await self._send_verification(conn, known["id"], email, None, next_path=next_path)

    async def verify(self, conn: Connection, token: str) -> Verified:
        """Mark the link's person verified. A link sent for a sign-up sets that sign-up's password; a link sent
        again on request carries none, so the password is cleared and a reset token given, for the person to
        choose one at once — no password chosen by anyone else ever signs in. `InvalidLink` for a used, expired
        or unknown link."""
        async with conn.transaction():
            used = await links.use(conn, "verify", token)
            if used.sign_up is not None:
                await conn.execute(_SHAPED, {**used.sign_up, "id": used.user_id})
            await self._set_password(conn, used.user_id, used.password_hash)
            if used.password_hash is not None:
                return Verified(None, used.next_path)
            email = (await one_row(await conn.execute(_PERSON, {"id": used.user_id})))["email"]
            lifetime = self._settings.reset_link_lifetime
            reset = await links.issue(conn, "reset", used.user_id, email, lifetime, next_path=used.next_path)
            return Verified(reset, used.next_path)

    async def request_reset(self, conn: Connection, email: str) -> None:
        """A reset link for a known, verified address; nothing otherwise (and the same answer)."""
        email = normal_email(email)
        async with conn.transaction():
            known = await (await conn.execute(_USER_BY_EMAIL, {"email": email})).fetchone()
            if known is not None and known["verified"]:
                link = await self._reset_link(conn, known["id"], email)
                await self.mail.send(conn, "reset", email, link=link)

    async def reset_password(self, conn: Connection, token: str, password: str, origin: audit_log.Origin) -> links.Used:
        """The password reset (audit: `password.reset`, from `origin`): sets the password of the link's person
        and ends every session of theirs; the link as used (whose person, and where they go on). A refused
        password leaves the link usable."""
        if len(password) > MAX_PASSWORD_LENGTH:
            invalid({"password": password_problem(password, "")})
        password_hash = await self._passwords.hash(password)
        async with conn.transaction():
            used = await links.use(conn, "reset", token)
            user_id = used.user_id
            person = await one_row(await conn.execute(_PERSON, {"id": user_id}))
            invalid({"password": password_problem(password, person["email"])})
            await self._set_password(conn, user_id, password_hash)
            await audit_log.record(
                conn,
                "password.reset",
                account_id=person["account_id"],
                actor=audit_log.Actor("user", user_id),
                target_id=user_id,
                origin=origin,
            )
        return used

    async def change_password(
        self, conn: Connection, user_id: str, current: str, new: str, origin: audit_log.Origin
    ) -> None:
        """A signed-in person's change (the current password required; audit: `password.changed`); ends every
        session of theirs. `InvalidCredentials` for a wrong current password, `InvalidParams` for a refused one."""
        person = await (await conn.execute(_PERSON, {"id": user_id})).fetchone()
        if person is None or not await self._passwords.verify(person["password_hash"], current):
            raise InvalidCredentials("The current password is wrong.")
        invalid({"new_password": password_problem(new, person["email"])})
        password_hash = await self._passwords.hash(new)
        async with conn.transaction():
            await self._set_password(conn, user_id, password_hash)
            actor = audit_log.Actor("user", user_id)
            await audit_log.record(
                conn, "password.changed", account_id=person["account_id"], actor=actor, target_id=user_id, origin=origin
            )

    async def _set_password(self, conn: Connection, user_id: str, password_hash: str | None) -> None:
        """Set (or, with None, clear) the password and mark the address verified: the person followed a link
        mailed to it, or signed in with it."""
        await conn.execute(_NEW_HASH, {"id": user_id, "password_hash": password_hash})
        await links.void(conn, user_id, "reset")
        await end_sessions(conn, user_id)

    async def _send_verification(
        self,
        conn: Connection,
        user_id: str,
        email: str,
        password_hash: str | None,
        sign_up: dict[str, Any] | None = None,
        next_path: str | None = None,
    ) -> None:
        lifetime = self._settings.verify_link_lifetime
        token = await links.issue(conn, "verify", user_id, email, lifetime, password_hash, sign_up, next_path)
        await self.mail.send(conn, "verify", email, link=self.mail.composer.link("/web/verify", token))

    async def _reset_link(self, conn: Connection, user_id: str, email: str, next_path: str | None = None) -> str:
        lifetime = self._settings.reset_link_lifetime
        token = await links.issue(conn, "reset", user_id, email, lifetime, next_path=next_path)
        return self.mail.composer.link("/web/reset", token)
