"""The built-in identity provider's ES256 signing keys, kept in the database with the private half sealed.

Each process holds the unretired keys in memory and reads them again every `RELOAD_SECONDS` (a key added by
`bin/admin rotate-signing-key` signs everywhere within that time, one retired by `bin/admin retire-signing-key`
stops signing) and at once when a token names a key it does not know (one another process signs with already), at
most every `UNKNOWN_KID_RELOAD_SECONDS`. A retired key stops verifying at once: the credential lookups check it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from rpc.core.crypto import Sealer
from rpc.core.types import Connection

log = logging.getLogger(__name__)

_PURPOSE = "signing_keys.private_key"
RELOAD_SECONDS = 30.0
# The lifetime of the tokens the keys sign (sessions and OAuth access tokens): what a retirement must wait out.
ACCESS_TOKEN_SECONDS = 3600
UNKNOWN_KID_RELOAD_SECONDS = 5.0

_SELECT_KEYS = """
SELECT kid, private_key_sealed, public_jwk
FROM signing_keys
WHERE retired_at IS NULL
ORDER BY created_at DESC, kid DESC
"""
_INSERT_KEY = """
INSERT INTO signing_keys (kid, algorithm, private_key_sealed, public_jwk)
VALUES (%(kid)s, 'ES256', %(sealed)s, %(jwk)s)
"""


@dataclass(frozen=True, slots=True)
class _Key:
    kid: str
    private: ec.EllipticCurvePrivateKey
    public_jwk: dict[str, Any]


class KeyRing:
    """The newest key signs; every unretired key verifies and is published in the JWKS document."""

    def __init__(self, sealer: Sealer, keys: list[_Key]) -> None:
        self._sealer = sealer
        self._install(keys)
        self._lock = asyncio.Lock()
        self._learnt_at = float("-inf")  # the last reload an unknown kid asked for

    def _install(self, keys: list[_Key]) -> None:
        if not keys:
            raise LookupError("no signing key: run bin/migrate")
        self._keys = {key.kid: key for key in keys}
        self._current = keys[0]

    @classmethod
    async def load(cls, conn: Connection, sealer: Sealer) -> KeyRing:
        return cls(sealer, await _read_keys(conn, sealer))

    async def reload(self, conn: Connection) -> None:
        """Read the unretired keys again."""
        self._install(await _read_keys(conn, self._sealer))

    async def keep_fresh(self, pool: AsyncConnectionPool[Any]) -> None:
        """Reload every `RELOAD_SECONDS` until cancelled (a failed reload keeps the keys held and is retried)."""
        while True:
            await asyncio.sleep(RELOAD_SECONDS)
            try:
                async with pool.connection() as conn:
                    await self.reload(conn)
            except Exception as exc:  # the database away for a moment: sign with what we hold
                log.warning("could not reload the signing keys: %s", type(exc).__name__)

    async def learn(self, conn: Connection, kid: object) -> None:
        """Reload when a token names a key this process does not hold (a newer one), at most every few seconds."""
        if not isinstance(kid, str) or kid in self._keys:
            return
        async with self._lock:
            if kid not in self._keys and time.monotonic() - self._learnt_at >= UNKNOWN_KID_RELOAD_SECONDS:
                self._learnt_at = time.monotonic()
                await self.reload(conn)

    def sign(self, claims: dict[str, Any], typ: str = "JWT") -> str:
        return jwt.encode(
            claims, self._current.private, algorithm="ES256", headers={"kid": self._current.kid, "typ": typ}
        )

    def verification_key(self, kid: object) -> ec.EllipticCurvePublicKey | None:
        key = self._keys.get(kid) if isinstance(kid, str) else None
        return key.private.public_key() if key else None

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.public_jwk for key in self._keys.values()]}


async def _read_keys(conn: Connection, sealer: Sealer) -> list[_Key]:
    cursor = await conn.execute(_SELECT_KEYS)
    keys = []
    for row in await cursor.fetchall():
        pem = sealer.open(bytes(row["private_key_sealed"]), _PURPOSE)
        private = serialization.load_pem_private_key(pem, password=None)
        assert isinstance(private, ec.EllipticCurvePrivateKey)
        keys.append(_Key(row["kid"], private, row["public_jwk"]))
    return keys


async def ensure_signing_key(conn: Any, sealer: Sealer) -> None:
    """Create the first signing key; run under the migration lock, so exactly one process makes it."""
    cursor = await conn.execute("SELECT private_key_sealed FROM signing_keys WHERE retired_at IS NULL LIMIT 1")
    existing = await cursor.fetchone()
    if existing:
        sealer.open(existing[0], _PURPOSE)  # fail at start, not at the first sign-in, on a wrong SERVICE_SECRET_KEY
        return
    await add_signing_key(conn, sealer)


async def add_signing_key(conn: Any, sealer: Sealer) -> str:
    """A new ES256 key, which becomes the signing key of every process within `RELOAD_SECONDS`; its kid."""
    private = ec.generate_private_key(ec.SECP256R1())
    kid = f"{time.strftime('%Y%m%d')}-{uuid.uuid4().hex[:8]}"
    jwk = ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    jwk.update({"kid": kid, "alg": "ES256", "use": "sig"})
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    await conn.execute(
        _INSERT_KEY,
        {"kid": kid, "sealed": sealer.seal(pem, _PURPOSE), "jwk": Jsonb(jwk)},
    )
    return kid


_UNRETIRED_FOR_UPDATE = """
SELECT kid, created_at FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC, kid DESC FOR UPDATE
"""
_RETIRE = "UPDATE signing_keys SET retired_at = now() WHERE kid = %(kid)s RETURNING retired_at"


class KeyStillNeeded(Exception):
    """A key that cannot be retired now; the message says why and what to do first."""


async def retire_signing_key(conn: Any, kid: str, *, force: bool = False) -> dt.datetime:
    """Retire `kid`, which must be an older key than the one signing now: the tokens it signed stop at once.

    Refused, unless `force`, while the signing key is younger than a session token's lifetime plus the reload
    time: tokens signed by `kid` may still be in use, and retiring it would end them early."""
    async with conn.transaction():
        return await _retire(conn, kid, force)


async def _retire(conn: Any, kid: str, force: bool) -> dt.datetime:
    keys = await (await conn.execute(_UNRETIRED_FOR_UPDATE)).fetchall()
    kids = [key["kid"] for key in keys]
    if kid not in kids:
        raise KeyStillNeeded(f"there is no unretired signing key {kid!r}; unretired: {', '.join(kids)}")
    if kid == kids[0]:
        raise KeyStillNeeded(
            f"{kid} is the key that signs now: run `bin/admin rotate-signing-key` first, and retire {kid} once "
            "the new key has signed for an hour"
        )
    signing_since = keys[0]["created_at"]
    safe_after = signing_since + dt.timedelta(seconds=ACCESS_TOKEN_SECONDS + RELOAD_SECONDS)
    if not force and dt.datetime.now(dt.UTC) < safe_after:
        raise KeyStillNeeded(
            f"session tokens signed by {kid} may live until {safe_after.isoformat()}; retire it after that, or "
            "now with --force (every token it signed stops at once)"
        )
    row = await (await conn.execute(_RETIRE, {"kid": kid})).fetchone()
    retired_at: dt.datetime = row["retired_at"]
    return retired_at
