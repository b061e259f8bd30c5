"""Secrets at rest: sealing what must be read back, hashing what must only be checked."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_VERSION = b"\x01"
_NONCE_BYTES = 12


class SealError(ValueError):
    """A sealed value that this key cannot open (wrong SERVICE_SECRET_KEY or tampered data)."""


class Sealer:
    """AES-256-GCM keyed from SERVICE_SECRET_KEY via HKDF; `purpose` binds each value to its column."""

    def __init__(self, secret_key: str) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"hire-api at-rest v1").derive(
            secret_key.encode()
        )
        self._aead = AESGCM(key)

    def seal(self, plaintext: bytes, purpose: str) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return _VERSION + nonce + self._aead.encrypt(nonce, plaintext, purpose.encode())

    def open(self, sealed: bytes, purpose: str) -> bytes:
        if sealed[:1] != _VERSION:
            raise SealError("unknown sealed-value version")
        nonce, ciphertext = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
        try:
            return self._aead.decrypt(nonce, ciphertext, purpose.encode())
        except InvalidTag as exc:
            raise SealError("cannot open a sealed value: wrong SERVICE_SECRET_KEY or tampered data") from exc


def token_hash(token: str) -> bytes:
    """SHA-256 of a high-entropy token (API key, refresh token): enough, since it cannot be guessed."""
    return hashlib.sha256(token.encode()).digest()


def random_token(nbytes: int = 32) -> str:
    return secrets.token_urlsafe(nbytes)


def same(a: bytes, b: bytes) -> bool:
    """Constant-time equality."""
    return hmac.compare_digest(a, b)
