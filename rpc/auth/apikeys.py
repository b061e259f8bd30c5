"""API keys: `service_{live|test}_` + 32 random base62 characters + a 6-character checksum.

The checksum (CRC-32 of everything before it) lets a mistyped or made-up key be refused before any
database lookup; only the SHA-256 of the whole key is stored.
"""

from __future__ import annotations

import secrets
import string
import zlib
from typing import Literal

Mode = Literal["live", "test"]

PREFIX = "service_"
_ALPHABET = string.digits + string.ascii_letters
_BODY_LENGTH = 32
_CHECKSUM_LENGTH = 6
DISPLAY_PREFIX_LENGTH = len("service_live_") + 4


def _base62(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, digit = divmod(number, 62)
        digits.append(_ALPHABET[digit])
    return "".join(reversed(digits))


def _checksum(head: str) -> str:
    return _base62(zlib.crc32(head.encode()), _CHECKSUM_LENGTH)


def generate(mode: Mode) -> str:
    """A new key value; shown once, never stored."""
    head = f"{PREFIX}{mode}_" + "".join(secrets.choice(_ALPHABET) for _ in range(_BODY_LENGTH))
    return head + _checksum(head)


def looks_like_key(token: str) -> bool:
    """Whether a bearer token claims to be an API key (as opposed to a JWT)."""
    return token.startswith(PREFIX)


def parse_mode(token: str) -> Mode | None:
    """The key's mode if it is well-formed with a valid checksum, else None."""
    for mode in ("live", "test"):
        head_prefix = f"{PREFIX}{mode}_"
        if token.startswith(head_prefix):
            body = token[len(head_prefix) :]
            if len(body) != _BODY_LENGTH + _CHECKSUM_LENGTH or any(c not in _ALPHABET for c in body):
                return None
            head, checksum = token[:-_CHECKSUM_LENGTH], token[-_CHECKSUM_LENGTH:]
            return mode if secrets.compare_digest(_checksum(head), checksum) else None
    return None
