"""How deliveries are signed, and what an endpoint's secret is.

A secret is `whsec_` + the standard base64 (RFC 4648 section 4, padded: 44 characters) of 32 random bytes
(docs/webhooks.md). It signs twice:
- `X-Service-Signature`: lowercase hex HMAC-SHA256 of the raw body, keyed with the UTF-8 bytes of the whole
  secret string, exactly as shown;
- `webhook-signature` (Standard Webhooks, docs/webhooks.md): `v1,` + base64 HMAC-SHA256 keyed with the 32
  decoded bytes, over `{webhook-id}.{webhook-timestamp}.{body}`, so that the standardwebhooks and Svix libraries
  verify it.
Secrets made before the Standard Webhooks signature are `whsec_` + unpadded base64url; they decode to their 32
bytes as well (the libraries decode only standard base64, so such an endpoint's owner rotates to use them). It is
sealed at rest, since it must be read back to sign.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Sequence

ENDPOINT_SEAL_PURPOSE = "webhook_endpoints.secret"
SECRET_PREFIX = "whsec_"  # noqa: S105 - the prefix of every signing secret, not a secret


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(os.urandom(32)).decode()


def secret_bytes(secret: str) -> bytes:
    """The 32 bytes a secret encodes (padded standard base64 today, or the earlier unpadded base64url)."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    return base64.urlsafe_b64decode(encoded.replace("+", "-").replace("/", "_") + "=" * (-len(encoded) % 4))


def sign(secret: str, body: bytes) -> str:
    """`X-Service-Signature`: lowercase hex HMAC-SHA256 of the body, keyed with the secret's UTF-8 bytes."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def standard_signature(secrets: Sequence[str], webhook_id: str, timestamp: int, body: bytes) -> str:
    """`webhook-signature`: one `v1,<base64>` per secret, space-separated (during a rotation: the new first)."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(secret_bytes(secret), signed, hashlib.sha256).digest()).decode()
        for secret in secrets
    )


def signed_headers(
    *, event_id: str, timestamp: int, body: bytes, secret: str, previous_secret: str | None
) -> dict[str, str]:
    """The signature headers of one attempt: `X-Service-Signature` (the old secret's during a rotation with
    overlap, with `X-Service-Signature-Next` the new one's) and the three Standard Webhooks headers."""
    signing = [secret] if previous_secret is None else [secret, previous_secret]
    headers = {
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": standard_signature(signing, event_id, timestamp, body),
    }
    if previous_secret is None:
        headers["X-Service-Signature"] = sign(secret, body)
    else:
        headers["X-Service-Signature"] = sign(previous_secret, body)
        headers["X-Service-Signature-Next"] = sign(secret, body)
    return headers
