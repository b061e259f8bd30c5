"""Password hashing with Argon2id (memory-hard), off the event loop since each hash takes tens of ms."""

from __future__ import annotations

import anyio.to_thread
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
# Verified when the e-mail is unknown, so that a miss costs as long as a wrong password.
_DECOY = _hasher.hash("decoy password of an unknown user")


async def hash_password(password: str) -> str:
    return await anyio.to_thread.run_sync(_hasher.hash, password)


async def verify_password(stored_hash: str | None, password: str) -> bool:
    """Whether `password` matches; takes the same time whether or not the user exists."""
    return await anyio.to_thread.run_sync(_verify, stored_hash, password)


def _verify(stored_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(stored_hash or _DECOY, password) and stored_hash is not None
    except (VerificationError, InvalidHashError):
        return False
