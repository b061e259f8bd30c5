"""Password hashing with Argon2id (memory-hard), off the event loop since each hash takes tens of ms.

Each hash holds 64 MiB while it runs, and sign-in needs no credential: unbounded, a flood of sign-ins could
make the process hold gigabytes. So at most `concurrency` hashes run at once in a process, and at most
`max_waiting` more wait for a turn; beyond that the attempt is refused at once (`429`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from rpc.core.errors import RateLimited

_hasher = PasswordHasher()
# Verified when the e-mail is unknown, so that a miss costs as long as a wrong password.
_DECOY = _hasher.hash("decoy password of an unknown user")

T = TypeVar("T")

DEFAULT_CONCURRENCY = 4
DEFAULT_MAX_WAITING = 64


class Passwords:
    """Hashes and verifies passwords, a bounded number at a time (create it inside the event loop)."""

    def __init__(self, concurrency: int = DEFAULT_CONCURRENCY, max_waiting: int = DEFAULT_MAX_WAITING) -> None:
        self._limiter = anyio.CapacityLimiter(concurrency)
        self._most = concurrency + max_waiting
        self._admitted = 0  # running or waiting for a turn

    @property
    def waiting(self) -> int:
        """Attempts waiting for a turn."""
        return self._admitted - self._limiter.borrowed_tokens

    async def hash(self, password: str) -> str:
        return await self._run(_hash, password)

    async def verify(self, stored_hash: str | None, password: str) -> bool:
        """Whether `password` matches; takes the same time whether or not the user exists."""
        return await self._run(_verify, stored_hash, password)

    async def _run(self, work: Callable[..., T], *args: object) -> T:
        if self._admitted >= self._most:
            raise RateLimited(1, "Too many sign-ins are being checked right now; retry in a moment.")
        self._admitted += 1
        try:
            async with self._limiter:
                return await anyio.to_thread.run_sync(work, *args)
        finally:
            self._admitted -= 1


def _hash(password: str) -> str:
    return _hasher.hash(password)


def _verify(stored_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(stored_hash or _DECOY, password) and stored_hash is not None
    except (VerificationError, InvalidHashError):
        return False
