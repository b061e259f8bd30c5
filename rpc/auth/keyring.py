"""The built-in identity provider's ES256 signing keys, kept in the database with the private half sealed."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from psycopg.types.json import Jsonb

from rpc.crypto import Sealer
from rpc.types import Connection

_PURPOSE = "signing_keys.private_key"

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

    def __init__(self, keys: list[_Key]) -> None:
        if not keys:
            raise LookupError("no signing key: run bin/migrate")
        self._keys = {key.kid: key for key in keys}
        self._current = keys[0]

    @classmethod
    async def load(cls, conn: Connection, sealer: Sealer) -> KeyRing:
        cursor = await conn.execute(_SELECT_KEYS)
        keys = []
        for row in await cursor.fetchall():
            pem = sealer.open(row["private_key_sealed"], _PURPOSE)
            private = serialization.load_pem_private_key(pem, password=None)
            assert isinstance(private, ec.EllipticCurvePrivateKey)
            keys.append(_Key(row["kid"], private, row["public_jwk"]))
        return cls(keys)

    def sign(self, claims: dict[str, Any], typ: str = "JWT") -> str:
        return jwt.encode(
            claims, self._current.private, algorithm="ES256", headers={"kid": self._current.kid, "typ": typ}
        )

    def verification_key(self, kid: object) -> ec.EllipticCurvePublicKey | None:
        key = self._keys.get(kid) if isinstance(kid, str) else None
        return key.private.public_key() if key else None

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.public_jwk for key in self._keys.values()]}


async def ensure_signing_key(conn: Any, sealer: Sealer) -> None:
    """Create the first signing key; run under the migration lock, so exactly one process makes it."""
    cursor = await conn.execute("SELECT private_key_sealed FROM signing_keys WHERE retired_at IS NULL LIMIT 1")
    existing = await cursor.fetchone()
    if existing:
        sealer.open(existing[0], _PURPOSE)  # fail at start, not at the first sign-in, on a wrong SERVICE_SECRET_KEY
        return
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
