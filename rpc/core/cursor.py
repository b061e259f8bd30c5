"""The one codec of opaque cursors (sync feeds, `jobs.search`, the audit log): a position's bytes and an HMAC
that binds them to what handed them out, in unpadded URL-safe base64. A cursor can be neither forged nor taken
to another list; each list checks what the position says and words its own refusal."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

_TAG_BYTES = 16
# The key's purpose, from when only the sync feeds had cursors: kept, so that cursors handed out stay good.
_KEY_PURPOSE = b"hire-api sync cursor v1"


@dataclass(frozen=True, slots=True)
class CursorCodec:
    """Cursors of the list named `name`, signed with a key derived from SERVICE_SECRET_KEY."""

    secret_key: str
    name: str

    def encode(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(payload + self._tag(payload)).rstrip(b"=").decode()

    def decode(self, cursor: str) -> bytes | None:
        """The position's bytes; None for anything this server did not hand out for this list."""
        try:
            token = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            return None
        payload, tag = token[:-_TAG_BYTES], token[-_TAG_BYTES:]
        if len(token) <= _TAG_BYTES or not hmac.compare_digest(tag, self._tag(payload)):
            return None
        return payload

    def _tag(self, payload: bytes) -> bytes:
        key = hmac.new(self.secret_key.encode(), _KEY_PURPOSE, hashlib.sha256).digest()
        return hmac.new(key, self.name.encode() + b"\x00" + payload, hashlib.sha256).digest()[:_TAG_BYTES]
